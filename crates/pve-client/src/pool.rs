//! Resource pools and the access granted on them: `/pools` (pve-manager
//! `PVE::API2::Pool`) and `/access/acl` (pve-access-control
//! `PVE::API2::ACL`). Every call is synchronous: it writes user.cfg and
//! returns. Pools need `Pool.Allocate` on `/pool/<id>` (reads
//! `Pool.Audit`); an ACL entry on `/pool/<id>` needs `Permissions.Modify`
//! there, or `Pool.Allocate` and every privilege of the role granted.
//! Deleting a pool deletes the ACL entries on its path too.

use reqwest::Method;
use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;

/// `GET /pools/{poolid}`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Pool {
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub members: Vec<PoolMember>,
}

/// A guest or storage in a pool.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct PoolMember {
    /// `qemu/100`, `lxc/101`, `storage/pve/local`.
    pub id: String,
    /// `qemu`, `lxc`, `storage`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub vmid: Option<u64>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub storage: Option<String>,
}

/// Who an ACL entry gives its role to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AclSubject {
    /// `user@realm`.
    User(String),
    /// A group name.
    Group(String),
    /// `user@realm!token`.
    Token(String),
}

/// One role on one path for one subject.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclEntry {
    pub path: String,
    pub subject: AclSubject,
    pub role: String,
    /// Whether it counts on the paths below `path` too.
    pub propagate: bool,
}

/// An entry of `GET /access/acl`, as sent.
#[derive(Deserialize)]
struct ListedAcl {
    path: String,
    #[serde(rename = "type")]
    kind: String,
    ugid: String,
    roleid: String,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    propagate: Option<bool>,
}

impl ListedAcl {
    fn entry(self) -> Option<AclEntry> {
        let subject = match self.kind.as_str() {
            "user" => AclSubject::User(self.ugid),
            "group" => AclSubject::Group(self.ugid),
            "token" => AclSubject::Token(self.ugid),
            _ => return None,
        };
        Some(AclEntry {
            path: self.path,
            subject,
            role: self.roleid,
            // The schema's default.
            propagate: self.propagate.unwrap_or(true),
        })
    }
}

impl Client {
    /// `GET /pools/{poolid}` (served by every PVE from 7 on; 8.1's
    /// `GET /pools?poolid=` answers the same): `None` when Proxmox says it
    /// does not exist.
    pub async fn pool(&self, poolid: &str) -> Result<Option<Pool>> {
        match self
            .get(ApiPath::new("/pools/{poolid}", &[poolid]), Params::new())
            .await
        {
            Ok(pool) => Ok(Some(pool)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /pools`.
    pub async fn create_pool(&self, poolid: &str, comment: &str) -> Result<()> {
        let params = Params::new()
            .text("poolid", poolid)
            .text("comment", comment);
        self.write_null(Method::POST, ApiPath::new("/pools", &[]), params)
            .await
    }

    /// `PUT /pools/{poolid}` with only `comment`: members are left alone.
    pub async fn set_pool_comment(&self, poolid: &str, comment: &str) -> Result<()> {
        let path = ApiPath::new("/pools/{poolid}", &[poolid]);
        self.write_null(Method::PUT, path, Params::new().text("comment", comment))
            .await
    }

    /// `PUT /pools/{poolid}` with `vms`: the guest `vmid` into the pool;
    /// `allow_move` when it is in another pool now (PVE 8.1+: one call, so
    /// the guest is never outside both). Proxmox refuses a guest already in
    /// `poolid` ("already a pool member"): the caller checks first.
    pub async fn add_to_pool(&self, poolid: &str, vmid: u32, allow_move: bool) -> Result<()> {
        let path = ApiPath::new("/pools/{poolid}", &[poolid]);
        let mut params = Params::new().text("vms", vmid.to_string());
        if allow_move {
            params = params.text("allow-move", "1");
        }
        self.write_null(Method::PUT, path, params).await
    }

    /// `DELETE /pools/{poolid}` (refused while it has members; takes the
    /// ACL entries on `/pool/{poolid}` with it).
    pub async fn delete_pool(&self, poolid: &str) -> Result<()> {
        let path = ApiPath::new("/pools/{poolid}", &[poolid]);
        self.write_null(Method::DELETE, path, Params::new()).await
    }

    /// `GET /access/acl`: the entries the credentials may see (those on
    /// paths where they may change permissions, or all with `Sys.Audit` on
    /// `/access`).
    pub async fn acl(&self) -> Result<Vec<AclEntry>> {
        let listed: Vec<ListedAcl> = self
            .get(ApiPath::new("/access/acl", &[]), Params::new())
            .await?;
        Ok(listed.into_iter().filter_map(ListedAcl::entry).collect())
    }

    /// `PUT /access/acl`: adds `entry` (or changes its propagation).
    pub async fn grant(&self, entry: &AclEntry) -> Result<()> {
        self.acl_write(entry, false).await
    }

    /// `PUT /access/acl` with `delete`: removes `entry`.
    pub async fn revoke(&self, entry: &AclEntry) -> Result<()> {
        self.acl_write(entry, true).await
    }

    async fn acl_write(&self, entry: &AclEntry, delete: bool) -> Result<()> {
        let (key, ugid) = match &entry.subject {
            AclSubject::User(u) => ("users", u),
            AclSubject::Group(g) => ("groups", g),
            AclSubject::Token(t) => ("tokens", t),
        };
        let params = Params::new()
            .text("path", &entry.path)
            .text("roles", &entry.role)
            .text(key, ugid)
            .flag("propagate", entry.propagate)
            .flag("delete", delete);
        self.write_null(Method::PUT, ApiPath::new("/access/acl", &[]), params)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_what_pve_lists() {
        let listed: Vec<ListedAcl> = serde_json::from_value(json!([
            {"path": "/pool/a", "type": "user", "ugid": "u@pve", "roleid": "PVEVMUser", "propagate": 0},
            {"path": "/pool/a", "type": "token", "ugid": "u@pve!t", "roleid": "PVEAuditor"},
            {"path": "/", "type": "mystery", "ugid": "x", "roleid": "NoAccess", "propagate": 1},
        ]))
        .unwrap();
        let entries: Vec<AclEntry> = listed.into_iter().filter_map(ListedAcl::entry).collect();
        assert_eq!(
            entries,
            vec![
                AclEntry {
                    path: "/pool/a".into(),
                    subject: AclSubject::User("u@pve".into()),
                    role: "PVEVMUser".into(),
                    propagate: false,
                },
                AclEntry {
                    path: "/pool/a".into(),
                    subject: AclSubject::Token("u@pve!t".into()),
                    role: "PVEAuditor".into(),
                    propagate: true,
                },
            ]
        );
        let pool: Pool = serde_json::from_value(json!({
            "comment": "c",
            "members": [{"id": "qemu/100", "type": "qemu", "vmid": 100, "name": "web", "node": "pve"}],
        }))
        .unwrap();
        assert_eq!(pool.members[0].vmid, Some(100));
    }
}
