//! Sizes and references checked before a VM exists, so that a spec Proxmox
//! would take and then never start (or that would fill a storage) is
//! refused with the limit it exceeds, and nothing is created:
//!
//! * vCPUs (sockets × cores) against the node's CPUs: qemu-server refuses
//!   to start such a VM (`MAX 16 vcpus allowed per VM on this node`, in
//!   `config_to_command`);
//! * memory against the node's memory (QEMU cannot allocate it);
//! * disk sizes against the free space of storages that cannot
//!   overprovision (thick LVM); on thin storage only a Warning;
//! * each NIC's bridge against the node's bridges and VNets (Proxmox
//!   creates the VM, and its start fails: `bridge 'vmbr9' does not exist`);
//! * static addresses: the subnet's broadcast address, or a gateway that is
//!   the VM's own address;
//! * the annotations the provider reads: an invalid or clamped value is a
//!   Warning, not silence.
//!
//! The node's figures come from the shared cluster view and a per-node
//! read of its bridges ([`super::HostView`]): no request per VM.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use super::context::Ctx;
use super::decision::{Decision, Say};
use super::input::HostView;
use super::output::Idle;
use crate::api::{
    ProxmoxVM, Reason,
    meta::{self},
    provider_config::go_duration,
    quantity::human_bytes,
    vm::VmParameters,
};
use crate::reconcile::common::views::foreign_vnet;

/// The shortest poll interval an annotation may ask for.
pub(super) const MIN_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// When a create refused for a limit looks again (the node may grow, a
/// bridge may be added).
const RECHECK: Duration = Duration::from_secs(60);

/// The address problems of the spec's static IP configs, naming each field.
pub(super) fn addresses(spec: &VmParameters) -> Vec<String> {
    let mut problems = vec![];
    let Some(ci) = &spec.cloud_init else {
        return problems;
    };
    for (i, c) in ci.ip_configs.iter().enumerate() {
        let field = format!("spec.forProvider.cloudInit.ipConfigs[{i}]");
        if let Some((ip, prefix)) = c.ip.as_deref().and_then(cidr4) {
            if broadcast(ip, prefix) == Some(ip) {
                problems.push(format!(
                    "{field}.ip {:?} is the broadcast address of its subnet: give the VM a host address",
                    c.ip.as_deref().unwrap_or_default()
                ));
            }
            if c.gateway
                .as_deref()
                .and_then(|g| g.parse::<Ipv4Addr>().ok())
                == Some(ip)
            {
                problems.push(format!(
                    "{field}.gateway {ip} is the VM's own address (ip): name the router of the subnet"
                ));
            }
        }
        let own6 = c
            .ip6
            .as_deref()
            .and_then(|a| a.split_once('/'))
            .and_then(|(a, _)| a.parse::<IpAddr>().ok());
        let gateway6 = c.gateway6.as_deref().and_then(|g| g.parse::<IpAddr>().ok());
        if let (Some(own), Some(gateway)) = (own6, gateway6)
            && own == gateway
        {
            problems.push(format!(
                "{field}.gateway6 {gateway} is the VM's own address (ip6): name the router of the subnet"
            ));
        }
    }
    problems
}

/// `10.0.0.5/24` as its address and prefix length.
fn cidr4(text: &str) -> Option<(Ipv4Addr, u8)> {
    let (ip, prefix) = text.split_once('/')?;
    let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32)?;
    Some((ip.parse().ok()?, prefix))
}

/// The broadcast address of the subnet, for subnets that have one (/31
/// and /32 have none: RFC 3021).
fn broadcast(ip: Ipv4Addr, prefix: u8) -> Option<Ipv4Addr> {
    (prefix <= 30).then(|| {
        let host_bits = u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
        Ipv4Addr::from(u32::from(ip) | host_bits)
    })
}

/// Refuses the create or clone on `node` when the spec exceeds what the
/// node has: the decision names each limit, and nothing is sent.
pub(super) fn on_node(ctx: &Ctx, node: &str, clone: bool) -> Option<Decision> {
    let host = ctx.obs.host.as_ref().filter(|h| h.node == node)?;
    let mut limits = vec![];
    let vcpus = ctx.vcpus();
    if host.cpus > 0 && vcpus > host.cpus {
        limits.push(format!(
            "spec.forProvider.cpu asks for {vcpus} vCPUs (sockets {} × cores {}) but node {node} has {} CPUs: Proxmox refuses to start it (MAX {} vcpus allowed per VM on this node)",
            ctx.spec.cpu.sockets, ctx.spec.cpu.cores, host.cpus, host.cpus
        ));
    }
    let memory = ctx.memory_bytes();
    if host.memory > 0 && memory > host.memory {
        limits.push(format!(
            "spec.forProvider.memory {} is more than node {node}'s {} of memory",
            human_bytes(memory),
            human_bytes(host.memory)
        ));
    }
    if !clone {
        limits.extend(thick_storage(ctx.spec, host));
    }
    let bridges = missing_bridges(ctx.spec, host);
    let (reason, problems) = match (limits.is_empty(), bridges.is_empty()) {
        (true, true) => return None,
        (false, _) => {
            limits.extend(bridges);
            (Reason::ExceedsNodeLimits, limits)
        }
        (true, false) => (Reason::BridgeNotFound, bridges),
    };
    let what = if clone { "cloned" } else { "created" };
    let message = format!(
        "refused before the VM exists: {}; nothing is {what} until the spec fits the node",
        problems.join("; ")
    );
    let d = Decision::new(Idle::Wait, Some(RECHECK), Say::no(reason, message.clone()));
    Some(ctx.event_on_change(d, reason, reason.as_str(), message))
}

/// A NIC of the spec on another namespace's VNet while the VM exists: no
/// change of the spec is carried out (a NIC changed onto that VNet would
/// put the VM on another team's network) until every NIC names a VNet of
/// its own namespace or a plain bridge. Ready stays as it was.
pub fn on_foreign_vnet(ctx: &Ctx) -> Option<Decision> {
    let problems: Vec<String> = (ctx.spec.networks.iter().enumerate())
        .filter(|(_, nic)| ctx.obs.foreign_vnets.contains(&nic.bridge))
        .map(|(i, nic)| foreign_vnet(i, &nic.bridge))
        .collect();
    if problems.is_empty() {
        return None;
    }
    let reason = Reason::BridgeNotFound;
    let message = format!(
        "refused: {}; nothing of the spec is changed on the VM until it names its own",
        problems.join("; ")
    );
    let d = Decision::new(Idle::Wait, Some(RECHECK), Say::no(reason, message.clone())).keep_ready();
    Some(ctx.event_on_change(d, reason, reason.as_str(), message))
}

/// Each storage that cannot overprovision, with the spec's disks on it
/// that exceed its free space together.
fn thick_storage(spec: &VmParameters, host: &HostView) -> Vec<String> {
    let mut problems = vec![];
    for (id, storage) in host.storages.iter().filter(|(_, s)| s.thick()) {
        let disks: Vec<(usize, u64)> = sized_disks(spec)
            .filter(|(_, on, _)| *on == id.as_str())
            .map(|(i, _, size)| (i, size))
            .collect();
        let wanted: u64 = disks.iter().map(|(_, size)| size).sum();
        if disks.is_empty() || wanted <= storage.free() {
            continue;
        }
        let which: Vec<String> = disks
            .iter()
            .map(|(i, size)| format!("disks[{i}] {}", human_bytes(*size)))
            .collect();
        problems.push(format!(
            "spec.forProvider.{} on storage {id} ({}, which cannot overprovision) need {} but it has {} free of {}",
            which.join(" and "),
            storage.plugin,
            human_bytes(wanted),
            human_bytes(storage.free()),
            human_bytes(storage.total)
        ));
    }
    problems
}

/// The spec's disks with a size: index, storage, bytes.
fn sized_disks(spec: &VmParameters) -> impl Iterator<Item = (usize, &str, u64)> {
    spec.disks.iter().enumerate().filter_map(|(i, d)| {
        let size = d.size.as_ref()?.bytes().ok()?;
        Some((i, d.storage.as_str(), size))
    })
}

/// The NICs whose bridge the node does not have.
fn missing_bridges(spec: &VmParameters, host: &HostView) -> Vec<String> {
    host.missing_bridges(spec.networks.iter().map(|n| (n.bridge.as_str(), n.vlan_tag)))
        .into_iter()
        .map(|(bridge, why)| {
            format!(
                "{why}: Proxmox would create the VM and refuse to start it (bridge '{bridge}' does not exist)"
            )
        })
        .collect()
}

/// Thin storages the spec's disks overprovision: what the Warning says.
pub(super) fn overprovisioned(ctx: &Ctx) -> Option<String> {
    let host = ctx.obs.host.as_ref()?;
    let problems: Vec<String> = host
        .storages
        .iter()
        .filter(|(_, s)| !s.thick() && s.total > 0)
        .filter_map(|(id, storage)| {
            let wanted: u64 = sized_disks(ctx.spec)
                .filter(|(_, on, _)| *on == id.as_str())
                .map(|(_, _, size)| size)
                .sum();
            // The message names no figure that moves while the VM is idle
            // (the free space does, with every other VM's writes): a
            // message that changed on every look would be a status write
            // every poll interval.
            (wanted > storage.free()).then(|| {
                format!(
                    "the disks on storage {id} ({}) are {}, more than it has free (of {}): it overprovisions, so the VM works until the storage fills up, then its writes fail",
                    storage.plugin,
                    human_bytes(wanted),
                    human_bytes(storage.total)
                )
            })
        })
        .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Annotations the provider reads whose value it ignores or clamps.
pub(super) fn annotations(vm: &ProxmoxVM) -> Option<String> {
    let mut problems = vec![];
    if let Some(text) = vm.annotation(meta::POLL_INTERVAL) {
        match go_duration(text) {
            None => problems.push(format!(
                "{} {text:?} is not a Go duration (such as 30s or 5m): ignored, the provider config's resync interval is used",
                meta::POLL_INTERVAL
            )),
            Some(d) if d < MIN_POLL_INTERVAL => problems.push(format!(
                "{} {text:?} is shorter than {}s: {}s is used",
                meta::POLL_INTERVAL,
                MIN_POLL_INTERVAL.as_secs(),
                MIN_POLL_INTERVAL.as_secs()
            )),
            Some(_) => {}
        }
    }
    if let Some(text) = vm.annotation(meta::PAUSED)
        && text != "true"
        && text != "false"
    {
        problems.push(format!(
            "{} {text:?} is neither \"true\" nor \"false\": only \"true\" pauses, so the resource is reconciled",
            meta::PAUSED
        ));
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_addresses_by_prefix() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        for (addr, prefix, want) in [
            ("10.0.0.5", 24, Some("10.0.0.255")),
            ("10.0.0.255", 24, Some("10.0.0.255")),
            ("10.0.1.7", 23, Some("10.0.1.255")),
            ("192.0.2.9", 30, Some("192.0.2.11")),
            ("192.0.2.9", 31, None),
            ("192.0.2.9", 32, None),
            ("10.1.2.3", 0, Some("255.255.255.255")),
        ] {
            assert_eq!(broadcast(ip(addr), prefix), want.map(ip), "{addr}/{prefix}");
        }
        assert_eq!(cidr4("10.0.0.5/33"), None);
        assert_eq!(cidr4("dhcp"), None);
    }
}
