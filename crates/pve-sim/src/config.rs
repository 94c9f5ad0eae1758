//! Configuration of a simulator instance: nodes, credentials, permissions,
//! time scale, simulated durations and fault rates.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::error::Error;
use super::schema::format::is_realm;

/// A secret string whose `Debug`/`Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value. Callers must not log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(**redacted**)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("**redacted**")
    }
}

/// An API token the simulator accepts: `USER@REALM!TOKENID=SECRET`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiTokenSpec {
    /// `user@realm`
    pub user: String,
    /// the token name after `!`
    pub token: String,
    pub secret: Secret,
}

impl ApiTokenSpec {
    /// `user@realm!tokenid`
    pub fn full_id(&self) -> String {
        format!("{}!{}", self.user, self.token)
    }
}

impl std::str::FromStr for ApiTokenSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        // A token name never contains '=' (PVE: `[A-Za-z][A-Za-z0-9.\-_]+`),
        // so the spec splits at the first '='. (The request header is split
        // at the *last* '=' like PVE does, so a secret containing '=' can
        // never authenticate there either.)
        let bad = || {
            Error::Config(format!(
                "invalid API token spec (want USER@REALM!TOKENID=SECRET): {}",
                redact_after(s, '=')
            ))
        };
        let (id, secret) = s.split_once('=').ok_or_else(bad)?;
        let (user, token) = id.split_once('!').ok_or_else(bad)?;
        if !is_userid(user) || !is_realm(token) || secret.is_empty() {
            return Err(bad());
        }
        Ok(Self {
            user: user.to_owned(),
            token: token.to_owned(),
            secret: Secret::new(secret),
        })
    }
}

/// A user that may log in with `POST /access/ticket`: `USER@REALM:PASSWORD`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserSpec {
    pub user: String,
    pub password: Secret,
}

impl std::str::FromStr for UserSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || {
            Error::Config(format!(
                "invalid user spec (want USER@REALM:PASSWORD): {}",
                redact_after(s, ':')
            ))
        };
        let (user, password) = s.split_once(':').ok_or_else(bad)?;
        if !is_userid(user) || password.is_empty() {
            return Err(bad());
        }
        Ok(Self {
            user: user.to_owned(),
            password: Secret::new(password),
        })
    }
}

/// An ACL entry: grants roles or privileges on a path (and below) to a user
/// (`user@realm`) or an API token (`user@realm!tokenid`).
///
/// Written `SUBJECT:PATH:ROLE_OR_PRIV[,ROLE_OR_PRIV...]`, for example
/// `ci@pve!prov:/vms:PVEVMAdmin` or `ci@pve:/:PVEAuditor,Datastore.AllocateSpace`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub subject: String,
    pub path: String,
    pub roles: Vec<String>,
}

impl std::str::FromStr for Grant {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || {
            Error::Config(format!(
                "invalid grant (want SUBJECT:PATH:ROLE[,ROLE...]): {s}"
            ))
        };
        let (subject, rest) = s.split_once(':').ok_or_else(bad)?;
        let (path, roles) = rest.rsplit_once(':').ok_or_else(bad)?;
        let user = subject.split_once('!').map_or(subject, |(u, _)| u);
        if !is_userid(user) || !path.starts_with('/') || roles.is_empty() {
            return Err(bad());
        }
        let roles = roles
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_owned)
            .collect();
        let path = match path.trim_end_matches('/') {
            "" => "/",
            trimmed => trimmed,
        };
        Ok(Self {
            subject: subject.to_owned(),
            path: path.to_owned(),
            roles,
        })
    }
}

fn is_userid(s: &str) -> bool {
    match s.split_once('@') {
        Some((name, realm)) => {
            !name.is_empty()
                && !name.contains([':', '/', '!'])
                && !name.chars().any(char::is_whitespace)
                && is_realm(realm)
        }
        None => false,
    }
}

fn redact_after(s: &str, sep: char) -> String {
    match s.split_once(sep) {
        Some((head, _)) => format!("{head}{sep}**redacted**"),
        None => s.to_owned(),
    }
}

/// A per-node setting from the command line: `NODE=VALUE`, or `VALUE` for
/// every node (stored under `*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSetting {
    pub node: String,
    pub value: String,
}

impl std::str::FromStr for NodeSetting {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let (node, value) = s.split_once('=').unwrap_or(("*", s));
        if value.is_empty() || (node != "*" && !is_node_name(node)) {
            return Err(Error::Config(format!(
                "invalid node setting (want [NODE=]VALUE): {s}"
            )));
        }
        Ok(Self {
            node: node.to_owned(),
            value: value.to_owned(),
        })
    }
}

impl NodeSetting {
    /// The value as a size (`64G`, `512M`, bytes).
    pub fn size(&self) -> Result<u64, Error> {
        crate::schema::format::parse_size(&self.value)
            .filter(|s| *s > 0)
            .ok_or_else(|| Error::Config(format!("invalid size '{}'", self.value)))
    }

    /// The value as a positive count.
    pub fn count(&self) -> Result<u32, Error> {
        self.value
            .parse()
            .ok()
            .filter(|c| *c > 0)
            .ok_or_else(|| Error::Config(format!("invalid count '{}'", self.value)))
    }
}

/// Where the server certificate comes from.
#[derive(Clone, Debug, Default)]
pub enum TlsSource {
    /// Generate a "PVE Cluster Manager CA" and a leaf signed by it at start.
    #[default]
    Generate,
    /// PEM files given by the user (`--tls-cert`, `--tls-key`).
    Files { cert: PathBuf, key: PathBuf },
}

/// Durations of simulated work at time scale 1.0. Every value is multiplied
/// by [`SimConfig::time_scale`] before the simulator waits for it.
#[derive(Clone, Debug)]
pub struct Durations {
    /// Disk import / full copy speed in bytes of *virtual* size per second.
    pub import_bytes_per_sec: u64,
    /// download-url speed in bytes per second.
    pub download_bytes_per_sec: u64,
    /// Linked clone of a template.
    pub linked_clone: Duration,
    /// Allocation of an empty disk or a cloud-init drive.
    pub disk_alloc: Duration,
    pub start: Duration,
    pub stop: Duration,
    /// How long a booted guest takes to power off after an ACPI request.
    pub shutdown: Duration,
    pub destroy: Duration,
    pub resize: Duration,
    /// `POST .../config` and the template conversion.
    pub config: Duration,
    /// From `qmstart` until the guest agent answers.
    pub guest_boot: Duration,
    /// How long `/cluster/resources` shows a new VM as `status: unknown`.
    pub resources_lag: Duration,
    /// From a task's exit until the archival pass that moves it from the
    /// active task list to the archive (PVE: when the forking daemon reaps
    /// the worker, usually at once; at the latest pvestatd's next 10 s cycle).
    pub task_archive: Duration,
    /// The `lock_config` flock timeout (`got timeout` after it).
    pub flock_timeout: Duration,
    /// Delay of every 401 response.
    pub auth_failure_delay: Duration,
    /// Default shutdown timeout when the request gives none.
    pub shutdown_timeout: Duration,
    /// pveproxy's inactivity timeout on the hop to pvedaemon: a synchronous
    /// call that works longer is answered `596 Connection timed out` while
    /// the work goes on.
    pub proxy_timeout: Duration,
}

impl Default for Durations {
    fn default() -> Self {
        Self {
            // 3.5 GiB virtual in about 30 s.
            import_bytes_per_sec: 120 * MIB,
            // 600 MiB in about 12 s.
            download_bytes_per_sec: 50 * MIB,
            linked_clone: Duration::from_secs(2),
            disk_alloc: Duration::from_secs(1),
            start: Duration::from_secs(2),
            stop: Duration::from_secs(1),
            shutdown: Duration::from_secs(5),
            destroy: Duration::from_secs(2),
            resize: Duration::from_secs(1),
            config: Duration::from_secs(1),
            guest_boot: Duration::from_secs(20),
            resources_lag: Duration::from_secs(10),
            task_archive: Duration::from_secs(1),
            flock_timeout: Duration::from_secs(10),
            auth_failure_delay: Duration::from_secs(3),
            shutdown_timeout: Duration::from_secs(60),
            proxy_timeout: Duration::from_secs(30),
        }
    }
}

const MIB: u64 = 1024 * 1024;

/// Background fault rates (probability per request or per task, 0.0–1.0),
/// as set by the `--fault-*` flags. Tests usually use `/_sim/faults` rules instead.
#[derive(Clone, Debug, Default)]
pub struct FaultRates {
    pub http_500: f64,
    pub http_595: f64,
    pub http_596: f64,
    pub reset: f64,
    /// Added latency and the probability it applies.
    pub latency: Option<(Duration, f64)>,
    /// Requests whose config flock times out (`got timeout`).
    pub lock_timeout: f64,
    /// Tasks that fail with an injected error.
    pub task_failure: f64,
}

/// Everything a simulator instance needs to start.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub listen: SocketAddr,
    pub tls: TlsSource,
    /// Node names; the first one holds the seeded template VM.
    pub nodes: Vec<String>,
    /// Memory in bytes per node name (`*`: every node); default 64 GiB.
    pub node_memory: BTreeMap<String, u64>,
    /// Logical CPUs per node name (`*`: every node); default 16.
    pub node_cpus: BTreeMap<String, u32>,
    /// The PVE major version to behave as (8 or 9): HA groups (8) or rules (9).
    pub pve_version: u8,
    /// A state to start from instead of the seeded one (`--state FILE`).
    pub state: Option<crate::state::file::StateFile>,
    /// Multiplies every simulated duration (1.0 realistic, 0.01 for tests).
    pub time_scale: f64,
    pub durations: Durations,
    pub api_tokens: Vec<ApiTokenSpec>,
    pub users: Vec<UserSpec>,
    pub grants: Vec<Grant>,
    /// Groups that exist, for ACL entries (no members are modelled).
    pub groups: Vec<String>,
    /// Lifetime of login tickets (not scaled).
    pub ticket_lifetime: Duration,
    pub faults: FaultRates,
    /// Seed for fault randomness and generated identifiers.
    pub seed: u64,
}

/// The API token of the default configuration.
pub const DEFAULT_API_TOKEN: &str = "root@pam!sim=pve-sim-secret";
/// The login of the default configuration.
pub const DEFAULT_USER: &str = "root@pam:pve-sim";

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: TlsSource::Generate,
            nodes: vec!["pve".to_owned()],
            node_memory: BTreeMap::new(),
            node_cpus: BTreeMap::new(),
            pve_version: 9,
            state: None,
            time_scale: 1.0,
            durations: Durations::default(),
            api_tokens: vec![
                DEFAULT_API_TOKEN
                    .parse()
                    .expect("the default token spec is valid"),
            ],
            users: vec![
                DEFAULT_USER
                    .parse()
                    .expect("the default user spec is valid"),
            ],
            grants: Vec::new(),
            groups: Vec::new(),
            ticket_lifetime: Duration::from_secs(2 * 3600),
            faults: FaultRates::default(),
            seed: 0,
        }
    }
}

impl SimConfig {
    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.nodes.is_empty() {
            return Err(Error::Config("at least one node is required".into()));
        }
        for node in &self.nodes {
            if !is_node_name(node) {
                return Err(Error::Config(format!("invalid node name '{node}'")));
            }
        }
        if ![8, 9].contains(&self.pve_version) {
            return Err(Error::Config(format!(
                "PVE version must be 8 or 9, got {}",
                self.pve_version
            )));
        }
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return Err(Error::Config(format!(
                "time scale must be > 0, got {}",
                self.time_scale
            )));
        }
        Ok(())
    }
}

pub(crate) fn is_node_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_spec_splits_at_first_equals() {
        let t: ApiTokenSpec = "ci@pve!prov=a=b".parse().unwrap();
        assert_eq!(t.full_id(), "ci@pve!prov");
        assert_eq!(t.secret.expose(), "a=b");
        assert!("ci@pve!1x=s".parse::<ApiTokenSpec>().is_err());
        assert!("nobody!x=y".parse::<ApiTokenSpec>().is_err());
        assert!(!format!("{t:?}").contains("b\""));
    }

    #[test]
    fn grant_parses_subject_path_roles() {
        let g: Grant = "ci@pve!prov:/vms/100:PVEVMAdmin,Datastore.AllocateSpace"
            .parse()
            .unwrap();
        assert_eq!(g.subject, "ci@pve!prov");
        assert_eq!(g.path, "/vms/100");
        assert_eq!(g.roles, vec!["PVEVMAdmin", "Datastore.AllocateSpace"]);
        let root: Grant = "ci@pve:/:Administrator".parse().unwrap();
        assert_eq!(root.path, "/");
    }
}
