//! `status.atProvider`, the GuestAgent condition and the connection details,
//! from what was observed.

use std::collections::BTreeMap;
use std::net::IpAddr;

use pve_client::vm::{Nic, net_index};

use super::context::Ctx;
use super::decision::{Out, Say};
use super::input::{AgentState, GuestInterface, ObservedVm, Power, VmConfig, VmState};
use super::owner::{Ownership, ownership};
use crate::api::{
    ProxmoxVMStatus, Reason,
    vm::{ObservedState, VmObserved},
};

/// Words for a power state.
pub(super) fn power_word(power: Power) -> &'static str {
    match power {
        Power::Running => "running",
        Power::Stopped => "stopped",
        Power::Paused => "paused",
        Power::Unknown => "in an unknown state",
    }
}

fn observed_state(power: Power) -> ObservedState {
    match power {
        Power::Running => ObservedState::Running,
        Power::Stopped => ObservedState::Stopped,
        Power::Paused => ObservedState::Paused,
        Power::Unknown => ObservedState::Unknown,
    }
}

/// Copies the observation into `status.atProvider`.
pub(super) fn observed(ctx: &Ctx, out: &mut Out) {
    let at = &mut out.status.at_provider;
    at.vmid = ctx.vmid();
    match &ctx.obs.vm {
        VmState::Unknown => {}
        VmState::Absent => {
            at.state = Some(ObservedState::Absent);
            at.lock = None;
            at.ip_address = None;
            at.ip_addresses.clear();
            at.mac_addresses.clear();
            at.pending_changes.clear();
            at.config = VmObserved::default();
            at.firewall = None;
        }
        // A VM we may not manage (another resource's, a hand-made one, or
        // one still locked by a create whose owner cannot be read yet) is
        // described by nothing in our status: its node in particular would
        // be taken for our placement.
        VmState::Present(vm) if !describes_ours(ctx, vm) => {
            at.state = None;
            at.lock = None;
            at.ip_address = None;
            at.ip_addresses.clear();
            at.mac_addresses.clear();
            at.pending_changes.clear();
            at.config = VmObserved::default();
            at.firewall = None;
        }
        VmState::Present(vm) => {
            at.node = Some(vm.node.clone());
            at.state = Some(observed_state(vm.power));
            at.lock = vm.lock.clone();
            at.mac_addresses = macs(vm);
            if let Some(config) = &vm.config {
                at.config = super::observed::config(config, vm.power);
            }
            // Every look says whether it is a template (not only a config
            // read): the pass that sees the conversion end writes it, and
            // the image's clones go on from that write.
            at.config.template = vm.template.then_some(true);
            // Read only when the spec declares a firewall: a pass that did
            // not read it keeps what was shown.
            if ctx.spec.firewall.is_none() {
                at.firewall = None;
            } else if let Some(view) = &ctx.obs.firewall {
                at.firewall = Some(super::firewall::observed(view));
            }
            let ips = match &vm.agent {
                AgentState::Interfaces(ifaces) => addresses(ifaces),
                AgentState::NotAsked | AgentState::NoAnswer(_) => vec![],
            };
            at.ip_address = ips
                .iter()
                .find(|ip| ip.contains('.'))
                .or(ips.first())
                .cloned();
            at.ip_addresses = ips;
            let say = agent_condition(vm);
            out.set_agent(ctx, say);
        }
    }
}

/// Whether the observed VM is one the status may describe: ours (our owner
/// marker), or any VM when the resource only observes.
fn describes_ours(ctx: &Ctx, vm: &ObservedVm) -> bool {
    let observing_only = !ctx.caps.create && !ctx.caps.update;
    observing_only
        || vm
            .config
            .as_ref()
            .is_some_and(|c| ownership(c, ctx.uid()) == Ownership::Ours)
}

/// MAC addresses of the `net<n>` devices in the config.
fn macs(vm: &ObservedVm) -> Vec<String> {
    let Some(config) = &vm.config else {
        return vec![];
    };
    config
        .current
        .iter()
        .filter(|(k, _)| net_index(k).is_some())
        .filter_map(|(_, v)| Some(Nic::parse(v).ok()?.mac?.to_string()))
        .collect()
}

/// Routable addresses the agent reports: no loopback, no link-local.
fn addresses(ifaces: &[GuestInterface]) -> Vec<String> {
    let mut ips: Vec<IpAddr> = ifaces
        .iter()
        .filter(|i| i.name != "lo")
        .flat_map(|i| &i.addresses)
        .filter_map(|a| a.parse::<IpAddr>().ok())
        .filter(|ip| match ip {
            IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_link_local(),
            IpAddr::V6(v6) => !v6.is_loopback() && !v6.is_unicast_link_local(),
        })
        .collect();
    // IPv4 first, then IPv6, each in the agent's order.
    ips.sort_by_key(|ip| ip.is_ipv6());
    ips.dedup();
    ips.iter().map(ToString::to_string).collect()
}

fn agent_condition(vm: &ObservedVm) -> Say {
    let enabled = vm.config.as_ref().is_some_and(VmConfig::agent_enabled);
    match &vm.agent {
        AgentState::Interfaces(ifaces) => {
            let ips = addresses(ifaces);
            let message = if ips.is_empty() {
                "the guest agent answers but reports no routable address yet".to_owned()
            } else {
                format!("the guest agent reports {}", ips.join(", "))
            };
            Say::yes(Reason::AgentResponding, message)
        }
        AgentState::NoAnswer(why) => Say::no(
            Reason::AgentNotResponding,
            format!("the guest agent does not answer: {why}"),
        ),
        AgentState::NotAsked if vm.power != Power::Running => {
            Say::no(Reason::VmNotRunning, "the VM is not running")
        }
        AgentState::NotAsked if !enabled => Say::no(
            Reason::AgentDisabled,
            "the guest agent is not enabled (spec.forProvider.agent.enabled)",
        ),
        AgentState::NotAsked => {
            Say::no(Reason::AgentNotResponding, "the guest agent was not asked")
        }
    }
}

/// The connection Secret's data, when the spec asks for one.
pub(super) fn connection(ctx: &Ctx, status: &ProxmoxVMStatus) -> Option<BTreeMap<String, String>> {
    ctx.vm.spec.write_connection_secret_to_ref.as_ref()?;
    let at = &status.at_provider;
    let mut data = BTreeMap::new();
    data.insert("vmid".to_owned(), at.vmid?.to_string());
    if let Some(node) = &at.node {
        data.insert("node".into(), node.clone());
    }
    if let Some(ip) = &at.ip_address {
        data.insert("ipAddress".into(), ip.clone());
    }
    if !at.ip_addresses.is_empty() {
        data.insert("ipAddresses".into(), at.ip_addresses.join(","));
    }
    if let Some(user) = ctx.spec.cloud_init.as_ref().and_then(|ci| ci.user.clone()) {
        data.insert("user".into(), user);
    }
    Some(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_routable_addresses_ipv4_first() {
        let ifaces = vec![
            GuestInterface {
                name: "lo".into(),
                mac: None,
                addresses: vec!["127.0.0.1".into(), "::1".into()],
            },
            GuestInterface {
                name: "eth0".into(),
                mac: Some("bc:24:11:00:00:01".into()),
                addresses: vec![
                    "fd00::5".into(),
                    "fe80::1".into(),
                    "10.0.0.5".into(),
                    "169.254.1.1".into(),
                ],
            },
        ];
        assert_eq!(addresses(&ifaces), ["10.0.0.5", "fd00::5"]);
    }
}
