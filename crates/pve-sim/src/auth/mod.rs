//! Authentication (API tokens, login tickets with CSRF tokens) and
//! permission checks, as pve-http-server and pve-access-control do them.

pub mod acl;
pub mod ticket;

use std::collections::{BTreeSet, HashMap};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use hyper::HeaderMap;
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::config::{Secret, SimConfig};
use crate::http::ApiError;
use crate::http::decode::uri_unescape;
use acl::{ALL_PRIVILEGES, Acl};
pub use acl::{Entry, Kind};
use ticket::TicketKey;

/// Who makes a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `user@realm`
    pub user: String,
    /// The token name when authenticated with an API token.
    pub token: Option<String>,
}

impl Identity {
    pub fn anonymous() -> Self {
        Self {
            user: String::new(),
            token: None,
        }
    }

    /// `user@realm` or `user@realm!tokenid`, as written into UPIDs.
    pub fn full(&self) -> String {
        match &self.token {
            Some(t) => format!("{}!{t}", self.user),
            None => self.user.clone(),
        }
    }

    /// Exactly `root@pam` with a ticket (root's API tokens do not count:
    /// PVE compares the full user string).
    pub fn is_root(&self) -> bool {
        self.user == "root@pam" && self.token.is_none()
    }
}

struct Token {
    secret: Secret,
}

pub struct Auth {
    tokens: HashMap<String, Token>,
    users: HashMap<String, Secret>,
    /// Groups that exist (`--group`); the simulator models no members.
    groups: BTreeSet<String>,
    /// Changed by `PUT /access/acl` and pool deletions.
    acl: RwLock<Acl>,
    tickets: TicketKey,
}

/// The result of a successful `POST /access/ticket`.
pub struct Login {
    pub user: String,
    pub ticket: String,
    pub csrf: String,
}

impl Auth {
    pub fn new(config: &SimConfig, key: [u8; 32]) -> Result<Self, String> {
        let tokens = config
            .api_tokens
            .iter()
            .map(|t| {
                (
                    t.full_id(),
                    Token {
                        secret: t.secret.clone(),
                    },
                )
            })
            .collect();
        let users = config
            .users
            .iter()
            .map(|u| (u.user.clone(), u.password.clone()))
            .collect();
        let acl = RwLock::new(Acl::new(config.grants.clone())?);
        Ok(Self {
            tokens,
            users,
            groups: config.groups.iter().cloned().collect(),
            acl,
            tickets: TicketKey::new(key, config.ticket_lifetime.as_secs()),
        })
    }

    /// Authenticates a request from its headers; errors are 401s.
    pub fn authenticate(&self, headers: &HeaderMap, method: &str) -> Result<Identity, ApiError> {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(token) = header("authorization").and_then(extract_token) {
            return self.verify_token(&token);
        }
        let ticket = cookie(headers, "PVEAuthCookie")
            .or_else(|| header("authorization").and_then(extract_cookie_auth));
        let Some(ticket) = ticket else {
            return Err(ApiError::Unauthorized("No ticket".into()));
        };
        let now = Clock::epoch_secs();
        let user = self
            .tickets
            .verify(&ticket, now)
            .ok_or_else(|| ApiError::Unauthorized("Authentication failed!".into()))?;
        if method != "GET" {
            let csrf = header("csrfpreventiontoken").unwrap_or_default();
            if !self.tickets.verify_csrf(&user, csrf, now) {
                return Err(ApiError::Unauthorized(
                    "Permission denied - invalid csrf token".into(),
                ));
            }
        }
        Ok(Identity { user, token: None })
    }

    fn verify_token(&self, value: &str) -> Result<Identity, ApiError> {
        let failed = || ApiError::Unauthorized("Authentication failed!".into());
        let (id, secret) = value.rsplit_once('=').ok_or_else(failed)?;
        let token = self.tokens.get(id).ok_or_else(failed)?;
        if token.secret.expose() != secret {
            return Err(failed());
        }
        let (user, name) = id.split_once('!').ok_or_else(failed)?;
        Ok(Identity {
            user: user.to_owned(),
            token: Some(name.to_owned()),
        })
    }

    /// `POST /access/ticket`: a password, or a still-valid ticket to renew.
    pub fn login(&self, username: &str, realm: Option<&str>, password: &str) -> Option<Login> {
        let user = match (username.contains('@'), realm) {
            (false, Some(r)) => format!("{username}@{r}"),
            _ => username.to_owned(),
        };
        let now = Clock::epoch_secs();
        let renewed = self
            .tickets
            .verify(password, now)
            .is_some_and(|u| u == user);
        let valid = renewed
            || self
                .users
                .get(&user)
                .is_some_and(|p| p.expose() == password);
        valid.then(|| Login {
            ticket: self.tickets.issue(&user, now),
            csrf: self.tickets.csrf(&user, now),
            user,
        })
    }

    /// The effective privileges of a caller on an ACL path.
    pub fn privileges(&self, id: &Identity, path: &str) -> BTreeSet<&'static str> {
        let user_privs = if id.user == "root@pam" {
            ALL_PRIVILEGES.iter().copied().collect()
        } else {
            self.acl().privileges(&id.user, path)
        };
        match &id.token {
            Some(_) if self.acl().names(&id.full()) => {
                let token_privs = self.acl().privileges(&id.full(), path);
                user_privs.intersection(&token_privs).copied().collect()
            }
            _ => user_privs,
        }
    }

    /// The ACL, read.
    pub fn acl(&self) -> RwLockReadGuard<'_, Acl> {
        // A panicked writer left whole entries: the ACL stays usable.
        self.acl.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The ACL, to change.
    pub fn acl_mut(&self) -> RwLockWriteGuard<'_, Acl> {
        self.acl.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `ugid` names a user (with a password or a token, or root),
    /// a group or an API token that exists, as `PUT /access/acl` requires.
    pub fn subject_exists(&self, kind: Kind, ugid: &str) -> bool {
        match kind {
            Kind::User => {
                ugid == "root@pam"
                    || self.users.contains_key(ugid)
                    || self
                        .tokens
                        .keys()
                        .any(|t| t.split_once('!').is_some_and(|(u, _)| u == ugid))
            }
            Kind::Group => self.groups.contains(ugid),
            Kind::Token => self.tokens.contains_key(ugid),
        }
    }

    pub fn has(&self, id: &Identity, path: &str, privilege: &str) -> bool {
        self.privileges(id, path).contains(privilege)
    }

    /// Requires any one of `privs` on `path`: 403 `Permission check failed (path, A|B)`.
    pub fn check(&self, id: &Identity, path: &str, privs: &[&str]) -> Result<(), ApiError> {
        let have = self.privileges(id, path);
        if privs.iter().any(|p| have.contains(p)) {
            Ok(())
        } else {
            Err(ApiError::forbidden(path, &privs.join("|")))
        }
    }

    /// The `cap` object of a login response.
    pub fn capabilities(&self, user: &str) -> Value {
        let id = Identity {
            user: user.to_owned(),
            token: None,
        };
        let group = |path: &str, prefixes: &[&str]| -> Value {
            let privs = self.privileges(&id, path);
            let map: serde_json::Map<String, Value> = privs
                .iter()
                .filter(|p| prefixes.iter().any(|pre| p.starts_with(pre)))
                .map(|p| ((*p).to_owned(), json!(1)))
                .collect();
            Value::Object(map)
        };
        json!({
            "vms": group("/vms", &["VM.", "Permissions.Modify"]),
            "storage": group("/storage", &["Datastore.", "Permissions.Modify"]),
            "nodes": group("/nodes", &["Sys.", "Permissions.Modify"]),
            "sdn": group("/sdn", &["SDN.", "Permissions.Modify"]),
            "access": group("/access", &["User.", "Group.", "Permissions.Modify"]),
            "dc": group("/", &["Sys.Audit", "Sys.Modify", "SDN.", "Mapping."]),
            "mapping": group("/mapping", &["Mapping.", "Permissions.Modify"]),
        })
    }
}

/// `(?:^|\s)PVEAPIToken(?:=| )([^;]*)`, URI-unescaped.
fn extract_token(header: &str) -> Option<String> {
    let start = header
        .match_indices("PVEAPIToken")
        .find(|(i, _)| *i == 0 || header[..*i].ends_with(char::is_whitespace))?
        .0;
    let rest = &header[start + "PVEAPIToken".len()..];
    let rest = rest.strip_prefix(['=', ' '])?;
    Some(uri_unescape(rest.split(';').next().unwrap_or_default()))
}

/// The ticket may also come as `Authorization: PVEAuthCookie=<ticket>`.
fn extract_cookie_auth(header: &str) -> Option<String> {
    let value = header.trim().strip_prefix("PVEAuthCookie=")?;
    Some(uri_unescape(value.split(';').next().unwrap_or_default()))
}

/// A cookie's value, URI-unescaped like pve-http-server's `extract_auth_value`.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then(|| uri_unescape(v))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_header_is_parsed_like_pve() {
        assert_eq!(
            extract_token("PVEAPIToken=root@pam!ci=s3cr=t").as_deref(),
            Some("root@pam!ci=s3cr=t")
        );
        assert_eq!(
            extract_token("PVEAPIToken root@pam!ci=x").as_deref(),
            Some("root@pam!ci=x")
        );
        assert_eq!(
            extract_token("PVEAPIToken=root%40pam!ci=x;junk").as_deref(),
            Some("root@pam!ci=x")
        );
        assert_eq!(extract_token("Bearer x"), None);
        assert_eq!(extract_token("XPVEAPIToken=a=b"), None);
    }

    #[test]
    fn privsep_tokens_get_the_intersection() {
        let config = SimConfig {
            api_tokens: vec![
                "ci@pve!prov=s".parse().unwrap(),
                "ci@pve!full=s".parse().unwrap(),
            ],
            grants: vec![
                "ci@pve:/:PVEVMAdmin".parse().unwrap(),
                "ci@pve!prov:/vms:PVEAuditor".parse().unwrap(),
            ],
            ..SimConfig::default()
        };
        let auth = Auth::new(&config, [1; 32]).unwrap();
        let prov = Identity {
            user: "ci@pve".into(),
            token: Some("prov".into()),
        };
        let full = Identity {
            user: "ci@pve".into(),
            token: Some("full".into()),
        };
        assert!(auth.has(&prov, "/vms/100", "VM.Audit"));
        assert!(!auth.has(&prov, "/vms/100", "VM.Allocate"));
        assert!(auth.has(&full, "/vms/100", "VM.Allocate"));
        assert_eq!(
            auth.check(&prov, "/vms/100", &["VM.Allocate"]),
            Err(ApiError::Forbidden(Some("/vms/100, VM.Allocate".into())))
        );
    }
}
