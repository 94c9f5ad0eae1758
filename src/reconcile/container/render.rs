//! The spec as Proxmox values: the create call, and the managed config keys
//! an existing container is compared with (drift). Pure; the strings are
//! pve-client's types' (`ContainerNet`, `Features`, `Tags`).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use pve_client::lxc::{
    ContainerConfig, ContainerNet, ContainerUpdate, ContainerVolume, CreateContainer, Features,
    OciPull,
};
use pve_client::vm::Tags;

use crate::api::container::{ContainerParameters, ContainerTemplate, OciImage};
use crate::api::quantity::Quantity;
use crate::reconcile::common::owner::{description, marker_line_of, user_part};
use crate::reconcile::identity::Identity;

/// A spec value that cannot be carried out (a quantity the API server let
/// through but that is not a size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn bytes(field: &str, q: &Quantity) -> Result<u64, Invalid> {
    q.bytes().map_err(|e| Invalid {
        field: field.to_owned(),
        message: e.to_string(),
    })
}

/// Whole MiB, rounded up (what Proxmox counts memory and swap in).
fn mib(field: &str, q: &Quantity) -> Result<u64, Invalid> {
    Ok(bytes(field, q)?.div_ceil(1 << 20))
}

/// Whole GiB, rounded up (what a new container volume is allocated in).
fn gib(field: &str, q: &Quantity) -> Result<u64, Invalid> {
    Ok(bytes(field, q)?.div_ceil(1 << 30))
}

/// The index of a `netN` / `mpN` slot (validated by the schema).
fn index(slot: &str, prefix: &str) -> Option<u32> {
    slot.strip_prefix(prefix)?.parse().ok()
}

/// The OCI pull a template needs, if it is an image.
pub fn oci_pull(oci: &OciImage) -> OciPull {
    // The reference's last path part (`alpine:3.20`, for people) and 12 hex
    // digits of a SHA-256 of the whole reference: PVE normalises it to
    // `alpine_3.20-<hash>.tar`, the same file for every container of that
    // reference, and never the file of the same name and tag from another
    // registry or repository (issue 31: team-b's docker.io/library/alpine
    // was created from team-a's pull of evil.example/team-a/alpine).
    let last = oci.reference.rsplit('/').next().unwrap_or(&oci.reference);
    let digest = Sha256::digest(oci.reference.as_bytes());
    let hash: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let filename = format!("{last}-{hash}");
    OciPull {
        reference: oci.reference.clone(),
        filename,
    }
}

/// The template volume the container is created from.
pub fn template_volume(template: &ContainerTemplate) -> Option<String> {
    match (&template.volume, &template.oci) {
        (Some(volume), _) => Some(volume.clone()),
        (None, Some(oci)) => Some(oci_pull(oci).volume(&oci.storage)),
        (None, None) => None,
    }
}

/// This resource's owner marker line.
pub fn marker(id: &Identity) -> String {
    marker_line_of("ProxmoxContainer", &id.namespace, &id.name, &id.uid)
}

/// The description the container carries: the notes and the owner marker.
pub fn wanted_description(spec: &ContainerParameters, id: &Identity) -> String {
    description(spec.description.as_deref(), &marker(id))
}

fn nets(spec: &ContainerParameters) -> BTreeMap<u32, ContainerNet> {
    spec.networks
        .iter()
        .filter_map(|n| {
            Some((
                index(&n.slot, "net")?,
                ContainerNet {
                    name: n.name.clone(),
                    bridge: Some(n.bridge.clone()),
                    tag: n.vlan,
                    ip: n.ip.clone(),
                    gw: n.gateway.clone(),
                    ip6: n.ip6.clone(),
                    firewall: n.firewall.then_some(true),
                },
            ))
        })
        .collect()
}

fn features(spec: &ContainerParameters) -> Features {
    Features {
        nesting: spec.features.nesting,
        keyctl: spec.features.keyctl,
        fuse: spec.features.fuse,
    }
}

/// The create call (without the password, which the pass adds from its
/// Secret so that the plan never holds it).
pub fn create(
    spec: &ContainerParameters,
    id: &Identity,
    vmid: u32,
    ostemplate: String,
) -> Result<CreateContainer, Invalid> {
    let mut mount_points = BTreeMap::new();
    for mp in &spec.mount_points {
        let Some(i) = index(&mp.slot, "mp") else {
            continue;
        };
        mount_points.insert(
            i,
            ContainerVolume {
                storage: mp.storage.clone(),
                size_gib: gib(&format!("mountPoints[{}].size", mp.slot), &mp.size)?,
                path: Some(mp.path.clone()),
            },
        );
    }
    let dns = spec.dns.as_ref();
    Ok(CreateContainer {
        vmid,
        ostemplate,
        rootfs: Some(ContainerVolume {
            storage: spec.rootfs.storage.clone(),
            size_gib: gib("rootfs.size", &spec.rootfs.size)?,
            path: None,
        }),
        mount_points,
        hostname: Some(hostname(spec, id)),
        cores: Some(spec.cpu.cores),
        memory: Some(mib("memory", &spec.memory)?),
        swap: Some(mib("swap", &spec.swap)?),
        unprivileged: spec.unprivileged,
        features: features(spec),
        nets: nets(spec),
        nameserver: dns
            .filter(|d| !d.nameservers.is_empty())
            .map(|d| d.nameservers.join(" ")),
        searchdomain: dns.and_then(|d| d.search_domain.clone()),
        ssh_public_keys: spec.ssh_keys.clone(),
        password: None,
        onboot: spec.start_on_boot.then_some(true),
        tags: Tags::new(spec.tags.iter().cloned()),
        description: Some(wanted_description(spec, id)),
        pool: spec.pool.clone(),
    })
}

/// The restore call (`vzrestore`): pve-container merges the archived
/// config under the call's options, so the container carries this
/// resource's hostname, notes and owner marker from its first moment;
/// its root filesystem and mount points go to `rootfs.storage` (without
/// `storage` pve-container would use `local`). New MAC addresses: the
/// source may still run. Never `force`.
pub fn restore(
    spec: &ContainerParameters,
    id: &Identity,
    vmid: u32,
    archive: String,
) -> pve_client::vzdump::Restore {
    pve_client::vzdump::Restore {
        vmid,
        archive,
        storage: Some(spec.rootfs.storage.clone()),
        pool: spec.pool.clone(),
        unique: true,
        name: None,
        description: Some(wanted_description(spec, id)),
        hostname: Some(hostname(spec, id)),
        unprivileged: Some(spec.unprivileged),
    }
}

fn hostname(spec: &ContainerParameters, id: &Identity) -> String {
    spec.hostname.clone().unwrap_or_else(|| id.name.clone())
}

/// What an existing container needs: the keys to set (the update), and the
/// differences the provider reports without correcting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drift {
    pub update: ContainerUpdate,
    pub unmanaged: Vec<String>,
}

/// Compares the managed keys of `observed` with the spec.
pub fn drift(
    spec: &ContainerParameters,
    id: &Identity,
    observed: &ContainerConfig,
) -> Result<Drift, Invalid> {
    let mut set = BTreeMap::new();
    let mut unmanaged = Vec::new();
    let mut want = |key: &str, value: String, same: bool| {
        if !same {
            set.insert(key.to_owned(), value);
        }
    };
    let tags = Tags::new(spec.tags.iter().cloned());
    let seen_tags = Tags::parse(observed.get("tags").unwrap_or_default());
    // Empty: removed (see below).
    want("tags", tags.to_string(), tags == seen_tags);
    let num = |key: &str| observed.get(key).and_then(|v| v.parse::<u64>().ok());
    let cores = u64::from(spec.cpu.cores);
    want("cores", cores.to_string(), num("cores") == Some(cores));
    let memory = mib("memory", &spec.memory)?;
    // Absent keys are PVE's defaults: 512 MiB of memory and of swap.
    want(
        "memory",
        memory.to_string(),
        num("memory").unwrap_or(512) == memory,
    );
    let swap = mib("swap", &spec.swap)?;
    want("swap", swap.to_string(), num("swap").unwrap_or(512) == swap);
    let onboot = observed.get("onboot") == Some("1");
    want(
        "onboot",
        u8::from(spec.start_on_boot).to_string(),
        onboot == spec.start_on_boot,
    );
    let host = hostname(spec, id);
    want(
        "hostname",
        host.clone(),
        observed.get("hostname") == Some(&host),
    );
    let wanted = wanted_description(spec, id);
    let seen = observed.get("description").unwrap_or_default();
    want(
        "description",
        wanted,
        user_part(seen) == spec.description.as_deref().unwrap_or_default().trim()
            && seen.lines().last()
                == Some(&marker_line_of(
                    "ProxmoxContainer",
                    &id.namespace,
                    &id.name,
                    &id.uid,
                )),
    );
    if let Some(dns) = &spec.dns {
        let servers = dns.nameservers.join(" ");
        want(
            "nameserver",
            servers.clone(),
            observed.get("nameserver").unwrap_or_default() == servers,
        );
        if let Some(domain) = &dns.search_domain {
            want(
                "searchdomain",
                domain.clone(),
                observed.get("searchdomain") == Some(domain),
            );
        }
    }
    for (i, net) in nets(spec) {
        let key = format!("net{i}");
        let seen = observed.get(&key);
        want(
            &key,
            net.merged_with(seen),
            seen.is_some_and(|s| net.matches(s)),
        );
    }
    let wanted = features(spec);
    let seen = Features::parse(observed.get("features").unwrap_or_default());
    if wanted != seen {
        if wanted.keyctl == seen.keyctl && wanted.fuse == seen.fuse {
            // Only nesting differs: Proxmox lets VM.Allocate change it.
            want("features", wanted.to_string(), false);
        } else {
            unmanaged.push(format!(
                "features are {seen} on Proxmox, {wanted} in the spec (only root@pam may change keyctl and fuse)",
                seen = if seen.is_empty() { "none".to_owned() } else { seen.to_string() },
                wanted = if wanted.is_empty() { "none".to_owned() } else { wanted.to_string() },
            ));
        }
    }
    let root = bytes("rootfs.size", &spec.rootfs.size)?;
    if let Some(size) = observed
        .get("rootfs")
        .and_then(ContainerVolume::observed_size)
        && size < root
    {
        unmanaged.push(format!(
            "rootfs is {size} bytes, the spec asks for {root} (not resized)"
        ));
    }
    if observed.get("unprivileged") == Some("1") && !spec.unprivileged
        || observed.get("unprivileged") != Some("1") && spec.unprivileged
    {
        unmanaged.push("unprivileged differs (Proxmox cannot change it)".to_owned());
    }
    let (tags_clear, set): (Vec<_>, BTreeMap<_, _>) = {
        // An empty value is PVE's way to ask for a removal: it goes to
        // `delete` instead.
        let clear: Vec<String> = set
            .iter()
            .filter(|(_, v)| v.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        let set = set.into_iter().filter(|(_, v)| !v.is_empty()).collect();
        (clear, set)
    };
    Ok(Drift {
        update: ContainerUpdate {
            set,
            delete: tags_clear,
            digest: observed.digest.clone(),
        },
        unmanaged,
    })
}
