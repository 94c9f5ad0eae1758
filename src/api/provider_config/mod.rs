//! `ProviderConfig` (namespaced) and `ClusterProviderConfig`: where the
//! Proxmox API is and how to talk to it.
//!
//! Both kinds share [`ProviderSettings`]. A namespaced `ProviderConfig` reads
//! Secrets from its own namespace only (a CEL rule refuses
//! `secretRef.namespace`), so it cannot reach another tenant's credentials; a
//! `ClusterProviderConfig` must name the namespace.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rules::{SECRET_NAME, SECRET_NAME_MESSAGE, TAGS, TAGS_MESSAGE};

mod go_duration;
mod status;
mod timing;

pub use status::{ConfigReason, ProviderConfigStatus};
pub use timing::{DurationError, Timing, go_duration};

/// Secret key holding an API token ID, `USER@REALM!TOKENID`.
pub const SECRET_KEY_TOKEN_ID: &str = "tokenId";
/// Secret key holding the API token's secret (a UUID).
pub const SECRET_KEY_TOKEN_SECRET: &str = "secret";
/// Secret key holding a user name, `USER@REALM`.
pub const SECRET_KEY_USERNAME: &str = "username";
/// Secret key holding that user's password.
pub const SECRET_KEY_PASSWORD: &str = "password";
/// Default key of a CA bundle in a Secret.
pub const SECRET_KEY_CA: &str = "ca.crt";

/// A Go duration as the API server's pattern admits it (`3s`, `1m30s`,
/// `500ms`); CEL rules bound each field's range.
const GO_DURATION: &str = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$";

/// Declares one provider config kind. The two kinds differ only in name,
/// scope, description and where their Secrets may live; everything users
/// see in `kubectl get` is written once, here.
macro_rules! provider_config_kind {
    (
        $(#[$doc:meta])*
        $spec:ident: kind = $kind:tt, plural = $plural:tt, [$($scope:tt)*] doc = $crd_doc:tt,
        rules = [$($rules:tt)*]
    ) => {
        $(#[$doc])*
        // The printer columns repeat `type_ = "string"`, which clippy
        // mistakes for a duplicated attribute.
        #[allow(clippy::duplicated_attributes)]
        #[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
        #[kube(
            group = "proxmox.m.crossplane.io",
            version = "v1alpha1",
            kind = $kind,
            plural = $plural,
            $($scope)*
            status = "ProviderConfigStatus",
            derive = "PartialEq",
            category = "crossplane",
            category = "provider",
            category = "proxmox",
            doc = $crd_doc,
            printcolumn(
                name = "READY",
                type_ = "string",
                json_path = ".status.conditions[?(@.type=='Ready')].status"
            ),
            printcolumn(name = "USERS", type_ = "integer", json_path = ".status.users"),
            printcolumn(name = "VERSION", type_ = "string", json_path = ".status.version"),
            printcolumn(
                name = "HOLDER",
                type_ = "string",
                json_path = ".status.holder",
                priority = 1
            ),
            printcolumn(name = "ENDPOINT", type_ = "string", json_path = ".spec.endpoint"),
            printcolumn(
                name = "AGE",
                type_ = "date",
                json_path = ".metadata.creationTimestamp"
            ),
            printcolumn(
                name = "REASON",
                type_ = "string",
                json_path = ".status.conditions[?(@.type=='Ready')].reason",
                priority = 1
            ),
            printcolumn(
                name = "MESSAGE",
                type_ = "string",
                json_path = ".status.conditions[?(@.type=='Ready')].message",
                priority = 1
            )
        )]
        #[x_kube($($rules)*)]
        pub struct $spec {
            /// Endpoint, credentials and tuning.
            #[serde(flatten)]
            pub settings: ProviderSettings,
        }
    };
}

provider_config_kind! {
    /// Proxmox VE API endpoint, credentials and tuning for a namespace.
    ProviderConfigSpec: kind = "ProviderConfig", plural = "providerconfigs", [namespaced,]
    doc = "Proxmox VE API endpoint and credentials for ProxmoxVMs in the same namespace.",
    rules = [
        validation = Rule::new("!has(self.credentials.secretRef.__namespace__)")
            .message("a namespaced ProviderConfig reads its Secret from its own namespace: remove credentials.secretRef.namespace (or use a ClusterProviderConfig)"),
        validation = Rule::new("!has(self.tls) || !has(self.tls.caBundleSecretRef) || !has(self.tls.caBundleSecretRef.__namespace__)")
            .message("a namespaced ProviderConfig reads its Secret from its own namespace: remove tls.caBundleSecretRef.namespace")
    ]
}

provider_config_kind! {
    /// Proxmox VE API endpoint, credentials and tuning for the whole cluster.
    ClusterProviderConfigSpec: kind = "ClusterProviderConfig", plural = "clusterproviderconfigs", []
    doc = "Proxmox VE API endpoint and credentials for ProxmoxVMs in any namespace.",
    rules = [
        validation = Rule::new("has(self.credentials.secretRef.__namespace__)")
            .message("a ClusterProviderConfig must name the Secret's namespace: set credentials.secretRef.namespace"),
        validation = Rule::new("!has(self.tls) || !has(self.tls.caBundleSecretRef) || has(self.tls.caBundleSecretRef.__namespace__)")
            .message("a ClusterProviderConfig must name the Secret's namespace: set tls.caBundleSecretRef.namespace")
    ]
}

/// What a config with an `http://` endpoint says without the opt-in.
pub const PLAIN_HTTP_REFUSED: &str = "endpoint is http://: every request would carry the API token or password in clear; use https://, or set tls.insecureAllowPlainHTTP: true to accept that";

/// Endpoint, credentials and tuning shared by both provider config kinds.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!self.endpoint.startsWith('http://') || (has(self.tls) && has(self.tls.insecureAllowPlainHTTP) && self.tls.insecureAllowPlainHTTP)")
        .message(PLAIN_HTTP_REFUSED)
)]
pub struct ProviderSettings {
    /// URL of the Proxmox VE API, e.g. `https://pve.example.com:8006`.
    /// `http://` only with `tls.insecureAllowPlainHTTP: true` (the token
    /// crosses the network in clear; the config then has a Warning).
    #[schemars(length(max = 2048))]
    #[x_kube(
        validation = Rule::new("self.startsWith('https://') || self.startsWith('http://')")
            .message("endpoint must be an https:// URL such as https://pve.example.com:8006"),
        validation = Rule::new("isURL(self) && url(self).getHostname() != ''")
            .message("endpoint must be a URL with a host name")
    )]
    pub endpoint: String,

    /// Where the API credentials are.
    pub credentials: Credentials,

    /// How the Proxmox server's TLS certificate is verified. Left out: the
    /// system's trusted CAs.
    #[serde(default)]
    pub tls: TlsSettings,

    /// Task polling.
    #[serde(default)]
    pub tasks: TaskSettings,

    /// How often a VM that is up to date is compared with Proxmox again
    /// (drift detection), as a Go duration. A `crossplane.io/poll-interval`
    /// annotation on a ProxmoxVM overrides it.
    #[serde(default = "default_resync_interval")]
    #[x_kube(
        validation = Rule::new("duration(self) >= duration('5s') && duration(self) <= duration('24h')")
            .message("resyncInterval must be a Go duration between 5s and 24h, such as 1m")
    )]
    #[schemars(length(max = 32), regex(pattern = GO_DURATION))]
    pub resync_interval: String,

    /// How often a ProxmoxVM that is up to date gets a full look, as a Go
    /// duration: its power state, its config and, when its spec declares
    /// one, its firewall (two to six Proxmox requests; its guest agent too
    /// when its answer is 30 minutes old).
    /// Between full looks, each `resyncInterval` is a coarse look from the
    /// cluster view the config's VMs share (one request per config, not
    /// per VM): a VM whose power state, node, lock, name, tags, pool,
    /// memory, vCPUs or boot disk size changed is looked at in full at
    /// once; drift only the full look sees (another config key, a firewall
    /// rule changed by hand, a pause) is found within this interval. Each
    /// VM has its own phase in the interval, so the full looks of many VMs
    /// are spread evenly over it.
    #[serde(default = "default_full_look_interval")]
    #[x_kube(
        validation = Rule::new("duration(self) >= duration('5s') && duration(self) <= duration('24h')")
            .message("fullLookInterval must be a Go duration between 5s and 24h, such as 20m")
    )]
    #[schemars(length(max = 32), regex(pattern = GO_DURATION))]
    pub full_look_interval: String,

    /// Limits that keep Proxmox (and its storage locks) from being swamped.
    #[serde(default)]
    pub limits: Limits,

    /// VMIDs the provider gives to ProxmoxVMs without `vmid`. Left out: the
    /// cluster's own `next-id` range (Datacenter → Options), else 100 to
    /// 999999999. VMIDs in use on the cluster or recorded in a ProxmoxVM
    /// are skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid_range: Option<VmidRange>,

    /// Which VMs the ProxmoxVMs of this config may clone
    /// (`forProvider.clone`) or import a disk of (`disks[].importFrom`
    /// naming a `vm-N-...` volume). Left out: only Proxmox templates
    /// (`template: 1`), so a tenant cannot copy the disks of a VM that is
    /// not meant to be copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_policy: Option<ClonePolicy>,

    /// What the ProxmoxContainers of this config may ask for beyond an
    /// unprivileged container (with `nesting` if they like). Left out:
    /// nothing more, so a tenant cannot have the provider's token (which
    /// Proxmox lets do what only root@pam may) create a privileged
    /// container or one with root-only features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_policy: Option<ContainerPolicy>,

    /// Where Proxmox may be told to download from (a ProxmoxImage's
    /// `source.url` and `source.oci`, a VM disk's `image.url`, a
    /// container's `template.oci`): the downloads run as the provider's
    /// token on the nodes, inside the management network. Left out:
    /// `https://` only, and no host that is an address in a loopback,
    /// link-local, private, shared (CGNAT) or unique-local range, a
    /// numeric form of one, `localhost`, a single-label name, a Proxmox
    /// node's name or the config's endpoint host. See docs/api.md for what
    /// is checked where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_policy: Option<DownloadPolicy>,
}

/// Where downloads may come from beyond public https hosts.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct DownloadPolicy {
    /// Allow `http://` URLs (plain HTTP: anyone on the path may change the
    /// bytes before the checksum is checked; the default is https only).
    #[serde(default)]
    pub allow_http: bool,

    /// Hosts and registries allowed although the default refuses them: a
    /// host name (compared without regard to case), an IP address, or a
    /// CIDR that the URL's literal address falls in (`10.20.0.0/16`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 253)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new("self.all(h, isIP(h) || isCIDR(h) || h.matches('^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?[.])*[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$'))")
            .message("allowedHosts are host names, IP addresses or CIDRs")
    )]
    pub allowed_hosts: Vec<String>,
}

/// What containers may ask for that Proxmox reserves to root@pam.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPolicy {
    /// Allow privileged containers (`unprivileged: false`): root in the
    /// container is root on the host. pve-container lets only root@pam
    /// create one with features, and any user with `Sys.Modify` on `/`
    /// create one at all.
    #[serde(default)]
    pub allow_privileged: bool,

    /// Container features besides `nesting` that containers may enable:
    /// pve-container lets only root@pam set them (`keyctl`, `fuse`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub allow_features: Vec<RootOnlyFeature>,
}

/// A container feature only root@pam may set.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RootOnlyFeature {
    /// The keyctl() system call.
    Keyctl,
    /// FUSE file systems.
    Fuse,
}

/// Which VMs may be cloned.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClonePolicy {
    /// VMs that are not templates but may be cloned (full clones) and
    /// have their disks imported all the same: a VM in one of these pools,
    /// with one of these tags, or with a VMID in one of these ranges (any
    /// one is enough), as the cluster's resource list
    /// (`/cluster/resources`) shows it when the copy is decided. Templates
    /// can always be cloned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_non_templates: Option<CloneSources>,
}

/// VMs named by pool, tag or VMID range.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CloneSources {
    /// Proxmox pools (`pvesh get /pools`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 64)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new("self.all(p, p.matches('^[A-Za-z0-9_][A-Za-z0-9_.-]*$'))")
            .message("pools are Proxmox pool IDs: letters, digits, _ - and ., starting with a letter, digit or _")
    )]
    pub pools: Vec<String>,
    /// Proxmox tags (compared without regard to case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 64)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new(TAGS).message(TAGS_MESSAGE)
    )]
    pub tags: Vec<String>,
    /// VMID ranges, both ends included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub vmid_ranges: Vec<VmidRange>,
}

impl CloneSources {
    /// Whether a VM with this VMID, pool and tags is among them.
    pub fn allows(&self, vmid: u32, pool: Option<&str>, tags: &[String]) -> bool {
        pool.is_some_and(|p| self.pools.iter().any(|allowed| allowed == p))
            || tags.iter().any(|t| {
                self.tags
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(t))
            })
            || self
                .vmid_ranges
                .iter()
                .any(|r| (r.min..=r.max).contains(&vmid))
    }
}

/// A range of VMIDs, both ends included.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[x_kube(validation = Rule::new("self.min <= self.max").message("vmidRange.min must not be above vmidRange.max"))]
pub struct VmidRange {
    /// The first VMID.
    #[schemars(range(min = 100, max = 999_999_999))]
    pub min: u32,
    /// The last VMID.
    #[schemars(range(min = 100, max = 999_999_999))]
    pub max: u32,
}

/// Where the API credentials are.
///
/// The Secret holds either an API token (recommended) in the keys `tokenId`
/// (`USER@REALM!TOKENID`) and `secret`, or a user in the keys `username`
/// (`USER@REALM`) and `password`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// Where the credentials come from. Only `Secret` is supported.
    #[serde(default)]
    pub source: CredentialsSource,
    /// The Secret with `tokenId` + `secret`, or `username` + `password`.
    pub secret_ref: SecretReference,
}

/// Where credentials come from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum CredentialsSource {
    /// A Kubernetes Secret.
    #[default]
    Secret,
}

/// A Secret. `namespace` is required in a ClusterProviderConfig and
/// refused in a ProviderConfig (which reads its own namespace).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
pub struct SecretReference {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(SECRET_NAME).message(SECRET_NAME_MESSAGE))]
    pub name: String,
    /// Namespace of the Secret (ClusterProviderConfig only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,
}

/// A key in a Secret; `namespace` as in [`SecretReference`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
pub struct SecretKeyReference {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(SECRET_NAME).message(SECRET_NAME_MESSAGE))]
    pub name: String,
    /// Namespace of the Secret (ClusterProviderConfig only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,
    /// Key in the Secret's data. Default `ca.crt`.
    #[serde(default = "default_ca_key")]
    #[schemars(length(max = 253))]
    pub key: String,
}

fn default_ca_key() -> String {
    SECRET_KEY_CA.into()
}

/// TLS verification of the Proxmox server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!(has(self.caBundle) && has(self.caBundleSecretRef))")
        .message("give the CA bundle inline (caBundle) or from a Secret (caBundleSecretRef), not both"),
    validation = Rule::new("!self.insecureSkipTLSVerify || (!has(self.caBundle) && !has(self.caBundleSecretRef) && !has(self.fingerprint))")
        .message("insecureSkipTLSVerify turns verification off; remove it when giving a CA bundle or a fingerprint")
)]
pub struct TlsSettings {
    /// PEM CA certificate(s) that sign the server's certificate (e.g. the
    /// cluster's `/etc/pve/pve-root-ca.pem`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    #[x_kube(validation = Rule::new("self.contains('-----BEGIN CERTIFICATE-----')")
        .message("caBundle must hold PEM certificates (-----BEGIN CERTIFICATE-----)"))]
    pub ca_bundle: Option<String>,

    /// The CA bundle from a Secret key (default key `ca.crt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle_secret_ref: Option<SecretKeyReference>,

    /// Pin the server certificate's SHA-256 fingerprint, as Proxmox shows it
    /// (`AA:BB:...`, 32 bytes). When set, the certificate must match it and
    /// nothing else is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Longer than a fingerprint, so that a wrong length gets the rule's
    // message rather than a bare "too long".
    #[schemars(length(max = 192))]
    #[x_kube(validation = Rule::new("self.matches('^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){31}$')")
        .message("fingerprint must be a SHA-256 fingerprint: 32 hex bytes separated by colons (AA:BB:...)"))]
    pub fingerprint: Option<String>,

    /// Accept any certificate. Only for tests; prefer `fingerprint`.
    #[serde(default, rename = "insecureSkipTLSVerify")]
    pub insecure_skip_tls_verify: bool,

    /// Allow an `http://` endpoint: every request then carries the API
    /// token or password unencrypted, readable by anyone on the path. Only
    /// for a simulator or a proxy on the same host; the config has a
    /// Warning condition (`InsecureTransport`) while it is set and used.
    #[serde(
        default,
        rename = "insecureAllowPlainHTTP",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_allow_plain_http: bool,
}

/// How Proxmox tasks are polled.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TaskSettings {
    /// How often a running task is polled, as a Go duration.
    #[serde(default = "default_poll_interval")]
    #[schemars(length(max = 32), regex(pattern = GO_DURATION))]
    #[x_kube(
        validation = Rule::new("duration(self) >= duration('500ms') && duration(self) <= duration('5m')")
            .message("pollInterval must be a Go duration between 500ms and 5m, such as 3s")
    )]
    pub poll_interval: String,

    /// How long a task may run before the resource reports `TaskTimeout`
    /// (the task is still observed afterwards).
    #[serde(default = "default_timeout")]
    #[schemars(length(max = 32), regex(pattern = GO_DURATION))]
    #[x_kube(
        validation = Rule::new("duration(self) >= duration('10s') && duration(self) <= duration('24h')")
            .message("timeout must be a Go duration between 10s and 24h, such as 10m")
    )]
    pub timeout: String,

    /// How long a graceful shutdown may take before the VM is stopped hard.
    #[serde(default = "default_shutdown_timeout")]
    #[schemars(length(max = 32), regex(pattern = GO_DURATION))]
    #[x_kube(
        validation = Rule::new("duration(self) >= duration('1s') && duration(self) <= duration('1h')")
            .message("shutdownTimeout must be a Go duration between 1s and 1h, such as 2m")
    )]
    pub shutdown_timeout: String,
}

fn default_poll_interval() -> String {
    "3s".into()
}
fn default_timeout() -> String {
    "10m".into()
}
fn default_shutdown_timeout() -> String {
    "2m".into()
}
fn default_resync_interval() -> String {
    "1m".into()
}
fn default_full_look_interval() -> String {
    "20m".into()
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            poll_interval: default_poll_interval(),
            timeout: default_timeout(),
            shutdown_timeout: default_shutdown_timeout(),
        }
    }
}

/// Limits that keep Proxmox from being swamped.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Requests to this endpoint in flight at once.
    #[serde(default = "default_max_concurrent_requests")]
    #[schemars(range(min = 1, max = 256))]
    pub max_concurrent_requests: u32,
    /// Requests per second to this endpoint (token bucket, bursts of twice
    /// as many). The default keeps 1,000 idle VMs checked every minute (about
    /// two requests each) with room for creates, well below what pveproxy
    /// and pvedaemon (3 workers each by default) serve.
    #[serde(default = "default_requests_per_second")]
    #[schemars(range(min = 1, max = 1000))]
    pub requests_per_second: u32,
    /// Creates with disk imports running at once on one node. Imports hold
    /// storage locks for minutes; too many time out.
    #[serde(default = "default_per_node")]
    #[schemars(range(min = 1, max = 64))]
    pub max_concurrent_imports_per_node: u32,
    /// Clones running at once on one node.
    #[serde(default = "default_per_node")]
    #[schemars(range(min = 1, max = 64))]
    pub max_concurrent_clones_per_node: u32,
}

fn default_max_concurrent_requests() -> u32 {
    8
}
fn default_requests_per_second() -> u32 {
    50
}
fn default_per_node() -> u32 {
    2
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent_requests: default_max_concurrent_requests(),
            requests_per_second: default_requests_per_second(),
            max_concurrent_imports_per_node: default_per_node(),
            max_concurrent_clones_per_node: default_per_node(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_to_the_documented_durations() {
        let settings: ProviderSettings = serde_json::from_value(serde_json::json!({
            "endpoint": "https://pve.example:8006",
            "credentials": {"secretRef": {"name": "pve"}},
        }))
        .unwrap();
        assert_eq!(settings.timing().unwrap(), Timing::default());
        assert_eq!(settings.limits, Limits::default());
        assert!(!settings.tls.insecure_skip_tls_verify);
    }
}
