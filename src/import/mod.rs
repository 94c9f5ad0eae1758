//! `proxmox-provider import`: observe-only manifests for the guests a
//! Proxmox cluster already runs, the first step of Crossplane's import flow
//! for many guests at once.
//!
//! One `GET /cluster/resources` lists the guests; the filters (node, pool,
//! tags, a name glob, templates or not) choose among them; each chosen
//! guest's config is read once, for its description (a guest carrying a
//! provider's owner marker is already managed by a resource, of this
//! cluster or another: it is left out and said, unless asked for) and a
//! container's root filesystem (which the ProxmoxContainer schema requires
//! and the cluster view does not show).
//! Each guest becomes one ProxmoxVM or ProxmoxContainer with
//! `managementPolicies: ["Observe"]`, its VMID as
//! `crossplane.io/external-name` and the provider config it is read
//! through: applied, it only reads the guest, and its `status.atProvider`
//! shows the configuration to copy into `spec.forProvider` before taking
//! the guest over (see docs/install.md, "Adopting existing guests").
//!
//! Deciding what is written is pure ([`select`], [`manifests`]); [`list`]
//! asks Proxmox.

use std::collections::BTreeMap;

use pve_client::cluster::{Resource, ResourceType};
use pve_client::lxc::ContainerVolume;
use pve_client::vm::Tags;
use serde_json::{Value, json};

use crate::api::ProviderConfigKind;
use crate::api::meta::EXTERNAL_NAME;
use crate::api::vm::quantity_of;
use crate::reconcile::common::owner::marker_owner;

/// What went wrong listing the guests.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Proxmox refused or could not be asked.
    #[error("{what}: {source}")]
    Proxmox {
        /// What was asked.
        what: String,
        /// The client's error (never a credential).
        source: pve_client::Error,
    },
    /// The provider config or its Secrets could not be read.
    #[error("reading {config}: {source}")]
    Kube {
        /// Which config.
        config: String,
        /// Why.
        source: crate::reconcile::Error,
    },
    /// The provider config cannot be used (missing, its Secret missing,
    /// credentials refused...), in the words a resource's condition says.
    #[error("cannot use {config}: {why}")]
    Config {
        /// Which config.
        config: String,
        /// Why.
        why: String,
    },
}

/// The client of the provider config `key`, built as the provider builds
/// it (its endpoint, credentials Secret, TLS settings), read with `kube`.
/// Nothing is written: the config is read as one already in use, so no
/// in-use finalizer is added.
pub async fn client(
    kube: kube::Client,
    key: &crate::reconcile::providers::ConfigKey,
) -> Result<pve_client::Client, Error> {
    let providers = crate::reconcile::providers::Providers::new(
        kube,
        pve_client::RequestHook::new(|_| {}),
        std::time::Duration::from_secs(60),
        None,
    );
    match providers.connect_to(key, true).await {
        Ok(Ok(connection)) => Ok(connection.client),
        Ok(Err(state)) => Err(Error::Config {
            config: key.to_string(),
            why: state
                .problem()
                .map_or_else(|| format!("{state:?}"), |(_, why)| why),
        }),
        Err(source) => Err(Error::Kube {
            config: key.to_string(),
            source,
        }),
    }
}

/// Which kinds of guests to import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kinds {
    /// VMs and containers.
    All,
    /// QEMU VMs only.
    Vms,
    /// LXC containers only.
    Containers,
}

/// The guests to import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// Only guests on this node.
    pub node: Option<String>,
    /// Only guests in this pool.
    pub pool: Option<String>,
    /// Only guests carrying every one of these tags.
    pub tags: Vec<String>,
    /// Only guests whose name matches this glob (`*` and `?`).
    pub name: Option<String>,
    /// Which kinds.
    pub kinds: Kinds,
    /// Templates too (left out by default: a template is usually a
    /// ProxmoxImage's).
    pub templates: bool,
}

/// A guest to import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guest {
    /// A container (else a VM).
    pub container: bool,
    /// Its VMID.
    pub vmid: u32,
    /// Its node.
    pub node: String,
    /// Its name, when Proxmox shows one.
    pub name: Option<String>,
    /// A container's root filesystem: storage and size in bytes.
    pub rootfs: Option<(String, u64)>,
    /// Whom its owner marker names (`ProxmoxVM team-a/web uid=...`), when
    /// its description carries one.
    pub managed_by: Option<String>,
}

/// Where the manifests point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The namespace of the resources.
    pub namespace: String,
    /// The provider config they name.
    pub config_kind: ProviderConfigKind,
    /// Its name.
    pub config_name: String,
}

/// The guests of `resources` the filter chooses, by VMID.
pub fn select(resources: &[Resource], filter: &Filter) -> Vec<Guest> {
    let mut guests: Vec<Guest> = resources
        .iter()
        .filter_map(|r| {
            let container = match (r.kind.as_str(), filter.kinds) {
                ("qemu", Kinds::All | Kinds::Vms) => false,
                ("lxc", Kinds::All | Kinds::Containers) => true,
                _ => return None,
            };
            let vmid = u32::try_from(r.vmid?).ok()?;
            let node = r.node.clone()?;
            let chosen = (filter.templates || !r.template)
                && filter.node.as_ref().is_none_or(|n| *n == node)
                && filter
                    .pool
                    .as_ref()
                    .is_none_or(|p| r.pool.as_ref() == Some(p))
                && has_tags(r.tags.as_deref(), &filter.tags)
                && filter.name.as_ref().is_none_or(|glob| {
                    r.name
                        .as_deref()
                        .is_some_and(|name| glob_matches(glob, name))
                });
            chosen.then(|| Guest {
                container,
                vmid,
                node,
                name: r.name.clone(),
                rootfs: None,
                managed_by: None,
            })
        })
        .collect();
    guests.sort_by_key(|g| g.vmid);
    guests
}

fn has_tags(tags: Option<&str>, wanted: &[String]) -> bool {
    let have = Tags::parse(tags.unwrap_or_default());
    wanted.iter().all(|t| have.contains(t))
}

/// `*` any run of characters, `?` one character, anything else itself.
pub fn glob_matches(glob: &str, text: &str) -> bool {
    let (glob, text): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    // The classic two-pointer match with one backtrack point per `*`.
    let (mut g, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, t));
                g += 1;
            }
            Some(c) if *c == '?' || *c == text[t] => {
                g += 1;
                t += 1;
            }
            _ => match star {
                Some((sg, st)) => {
                    g = sg + 1;
                    t = st + 1;
                    star = Some((sg, st + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|c| *c == '*')
}

/// A Kubernetes name for a guest: its Proxmox name made a DNS label, or
/// `vm-<vmid>` / `ct-<vmid>`; `-<vmid>` is added when two guests of the same
/// kind would share one.
fn resource_names(guests: &[Guest]) -> Vec<String> {
    let base: Vec<String> = guests
        .iter()
        .map(|g| {
            let cleaned = g.name.as_deref().map(dns_label).unwrap_or_default();
            if cleaned.is_empty() {
                format!("{}-{}", if g.container { "ct" } else { "vm" }, g.vmid)
            } else {
                cleaned
            }
        })
        .collect();
    let mut count: BTreeMap<(bool, &str), usize> = BTreeMap::new();
    for (g, name) in guests.iter().zip(&base) {
        *count.entry((g.container, name.as_str())).or_default() += 1;
    }
    guests
        .iter()
        .zip(&base)
        .map(|(g, name)| {
            if count[&(g.container, name.as_str())] > 1 {
                format!("{name}-{}", g.vmid)
            } else {
                name.clone()
            }
        })
        .collect()
}

/// Lower-case letters, digits and inner dashes, at most 50 characters
/// (room for a `-<vmid>` suffix).
fn dns_label(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .collect();
    let mut out = String::new();
    for c in mapped.chars() {
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.truncate(50);
    out.trim_end_matches('-').to_owned()
}

/// The guests to write manifests for and those left out because a
/// resource already manages them (`include_managed`: none left out).
pub fn unmanaged(guests: Vec<Guest>, include_managed: bool) -> (Vec<Guest>, Vec<Guest>) {
    guests
        .into_iter()
        .partition(|g| include_managed || g.managed_by.is_none())
}

/// The manifests: a file name (`<kind>-<name>.yaml`) and one object each.
pub fn manifests(guests: &[Guest], target: &Target) -> Vec<(String, Value)> {
    let config_kind = match target.config_kind {
        ProviderConfigKind::ProviderConfig => "ProviderConfig",
        ProviderConfigKind::ClusterProviderConfig => "ClusterProviderConfig",
    };
    guests
        .iter()
        .zip(resource_names(guests))
        .map(|(g, name)| {
            let kind = if g.container {
                "ProxmoxContainer"
            } else {
                "ProxmoxVM"
            };
            let for_provider = if g.container {
                container_spec(g)
            } else {
                json!({})
            };
            let object = json!({
                "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
                "kind": kind,
                "metadata": {
                    "name": name,
                    "namespace": target.namespace,
                    "annotations": {EXTERNAL_NAME: g.vmid.to_string()},
                },
                "spec": {
                    "managementPolicies": ["Observe"],
                    "providerConfigRef": {"kind": config_kind, "name": target.config_name},
                    "forProvider": for_provider,
                },
            });
            (format!("{}-{name}.yaml", kind.to_ascii_lowercase()), object)
        })
        .collect()
}

/// What the ProxmoxContainer schema requires: the root filesystem as
/// observed, and a template, which Proxmox does not record and which is
/// only used to create a container (never for an existing one): a
/// placeholder says so.
fn container_spec(g: &Guest) -> Value {
    let (storage, bytes) = g.rootfs.clone().unwrap_or(("local-lvm".into(), 1 << 30));
    json!({
        "template": {"volume": "local:vztmpl/imported-unknown.tar.zst"},
        "rootfs": {"storage": storage, "size": quantity_of(bytes.max(1 << 30))},
    })
}

/// The manifests as one multi-document YAML stream, or each document alone.
pub fn to_yaml(object: &Value) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(object)
}

/// Lists the guests the filter chooses, reading each one's config (its
/// owner marker; a container's root filesystem).
pub async fn list(client: &pve_client::Client, filter: &Filter) -> Result<Vec<Guest>, Error> {
    let resources = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .map_err(|source| Error::Proxmox {
            what: "listing the cluster's guests".into(),
            source,
        })?;
    let mut guests = select(&resources, filter);
    for g in &mut guests {
        let what = |source| Error::Proxmox {
            what: format!("reading the config of guest {}", g.vmid),
            source,
        };
        let description = if g.container {
            let config = client
                .container_config(&g.node, g.vmid)
                .await
                .map_err(what)?;
            g.rootfs = config.get("rootfs").and_then(|r| {
                Some((
                    ContainerVolume::observed_storage(r)?,
                    ContainerVolume::observed_size(r)?,
                ))
            });
            config.get("description").map(str::to_owned)
        } else {
            client
                .vm_config(&g.node, g.vmid)
                .await
                .map_err(what)?
                .description
        };
        g.managed_by = marker_owner(description.as_deref());
    }
    Ok(guests)
}

#[cfg(test)]
mod tests;
