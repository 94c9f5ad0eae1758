//! What a container is checked against before it exists, as a VM is
//! (`vm::plan::limits`): a spec Proxmox would take and then never start,
//! or that would fill a storage, is refused naming the field and the limit,
//! and nothing is created.
//!
//! * cores against the node's CPUs, memory against the node's memory;
//! * the root filesystem and mount points against the free space of
//!   storages that cannot overprovision (thick LVM); on thin storage a
//!   Warning ([`overprovisioned`]);
//! * each NIC's bridge against the node's bridges and VNets;
//! * and, before any of these, what the provider config's `containerPolicy`
//!   does not allow ([`not_allowed`]).

use std::collections::BTreeMap;

use crate::api::condition::Reason;
use crate::api::container::ContainerParameters;
use crate::api::provider_config::{ContainerPolicy, RootOnlyFeature};
use crate::api::quantity::human_bytes;
use crate::reconcile::common::views::HostView;

/// Why the container cannot be created on `host`'s node, or `None`.
pub(super) fn on_node(spec: &ContainerParameters, host: &HostView) -> Option<(Reason, String)> {
    let node = &host.node;
    let mut limits = vec![];
    if host.cpus > 0 && spec.cpu.cores > host.cpus {
        limits.push(format!(
            "spec.forProvider.cpu.cores {} is more than node {node}'s {} CPUs",
            spec.cpu.cores, host.cpus
        ));
    }
    let memory = spec.memory.bytes().unwrap_or_default();
    if host.memory > 0 && memory > host.memory {
        limits.push(format!(
            "spec.forProvider.memory {} is more than node {node}'s {} of memory",
            human_bytes(memory),
            human_bytes(host.memory)
        ));
    }
    for (id, (fields, wanted)) in by_storage(spec) {
        let Some(storage) = host.storages.get(id).filter(|s| s.thick()) else {
            continue;
        };
        if wanted > storage.free() {
            limits.push(format!(
                "spec.forProvider.{} on storage {id} ({}, which cannot overprovision) need {} but it has {} free of {}",
                fields.join(" and "),
                storage.plugin,
                human_bytes(wanted),
                human_bytes(storage.free()),
                human_bytes(storage.total)
            ));
        }
    }
    let bridges: Vec<String> = host
        .missing_bridges(spec.networks.iter().map(|n| (n.bridge.as_str(), n.vlan)))
        .into_iter()
        .map(|(_, why)| why)
        .collect();
    let reason = match (limits.is_empty(), bridges.is_empty()) {
        (true, true) => return None,
        (false, _) => Reason::ExceedsNodeLimits,
        (true, false) => Reason::BridgeNotFound,
    };
    limits.extend(bridges);
    Some((
        reason,
        format!(
            "refused before the container exists: {}; nothing is created until the spec fits the node",
            limits.join("; ")
        ),
    ))
}

/// The thin storages the root filesystem and mount points overprovision:
/// what the Warning says (the container works until the storage fills).
pub(super) fn overprovisioned(spec: &ContainerParameters, host: &HostView) -> Option<String> {
    let problems: Vec<String> = by_storage(spec)
        .into_iter()
        .filter_map(|(id, (fields, wanted))| {
            let storage = host.storages.get(id).filter(|s| !s.thick() && s.total > 0)?;
            (wanted > storage.free()).then(|| {
                format!(
                    "spec.forProvider.{} on storage {id} ({}) are {}, more than it has free (of {}): it overprovisions, so the container works until the storage fills up, then its writes fail",
                    fields.join(" and "),
                    storage.plugin,
                    human_bytes(wanted),
                    human_bytes(storage.total)
                )
            })
        })
        .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The volumes the spec allocates, by storage: their fields and total bytes.
fn by_storage(spec: &ContainerParameters) -> BTreeMap<&str, (Vec<String>, u64)> {
    let volumes = std::iter::once(("rootfs".to_owned(), &spec.rootfs.storage, &spec.rootfs.size))
        .chain(
            spec.mount_points
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("mountPoints[{i}]"), &m.storage, &m.size)),
        );
    let mut by_storage: BTreeMap<&str, (Vec<String>, u64)> = BTreeMap::new();
    for (field, storage, size) in volumes {
        let entry = by_storage.entry(storage.as_str()).or_default();
        entry.0.push(field);
        entry.1 = entry.1.saturating_add(size.bytes().unwrap_or_default());
    }
    by_storage
}

/// What the spec asks for that the provider config's `containerPolicy`
/// does not allow, naming each field, or `None`. pve-container lets only
/// root@pam create a privileged container with features or set features
/// other than `nesting`; the provider's token may well be root@pam's, so
/// without this any tenant could have it do so.
pub(super) fn not_allowed(spec: &ContainerParameters, policy: &ContainerPolicy) -> Option<String> {
    let mut problems = vec![];
    if !spec.unprivileged && !policy.allow_privileged {
        problems.push(
            "spec.forProvider.unprivileged is false (a privileged container: root in it is root on the host) and the provider config's containerPolicy.allowPrivileged is not true"
                .to_owned(),
        );
    }
    for (on, feature, name) in [
        (spec.features.keyctl, RootOnlyFeature::Keyctl, "keyctl"),
        (spec.features.fuse, RootOnlyFeature::Fuse, "fuse"),
    ] {
        if on && !policy.allow_features.contains(&feature) {
            problems.push(format!(
                "spec.forProvider.features.{name} is a feature only root@pam may set and the provider config's containerPolicy.allowFeatures does not list {name}"
            ));
        }
    }
    (!problems.is_empty()).then(|| format!("refused: {}; nothing is created", problems.join("; ")))
}
