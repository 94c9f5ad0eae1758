//! The VM's own firewall (options and rules), and the security groups and
//! IP sets of its namespace that the spec's rules name.

use std::collections::BTreeMap;

use kube::Api;
use pve_client::{Client, Guest, GuestType};

use super::Failure;
use crate::api::condition::{ConditionStatus, ConditionType, find};
use crate::api::firewall::GuestFirewall;
use crate::api::{Condition, ProxmoxIPSet, ProxmoxSecurityGroup};
use crate::reconcile::error::is_not_found;
use crate::reconcile::vm::plan::FirewallView;

/// Reads the firewall of VM `vmid` on `node` (two requests: options and
/// rules) and resolves what `spec` names in `namespace` (one Kubernetes
/// read per object named).
pub(super) async fn firewall_view(
    (kube, client): (&kube::Client, &Client),
    (node, vmid): (&str, u32),
    spec: &GuestFirewall,
    namespace: &str,
) -> Result<FirewallView, Failure> {
    let guest = Guest {
        kind: GuestType::Qemu,
        node: node.to_owned(),
        vmid,
    };
    let options = client.guest_firewall_options(&guest).await?;
    let rules = client.guest_firewall_rules(&guest).await?;
    let groups_api: Api<ProxmoxSecurityGroup> = Api::namespaced(kube.clone(), namespace);
    let mut groups = BTreeMap::new();
    for name in spec.security_groups() {
        let seen = match groups_api.get_opt(name).await {
            Ok(found) => found.map(|g| {
                let status = g.status.unwrap_or_default();
                (status.conditions, status.at_provider.name)
            }),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(Failure::Kube(e.into())),
        };
        groups.insert(
            name.to_owned(),
            usable("ProxmoxSecurityGroup", namespace, name, seen),
        );
    }
    let sets_api: Api<ProxmoxIPSet> = Api::namespaced(kube.clone(), namespace);
    let mut ip_sets = BTreeMap::new();
    for name in spec.ip_sets() {
        let seen = match sets_api.get_opt(name).await {
            Ok(found) => found.map(|s| {
                let status = s.status.unwrap_or_default();
                (status.conditions, status.at_provider.name)
            }),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(Failure::Kube(e.into())),
        };
        ip_sets.insert(
            name.to_owned(),
            usable("ProxmoxIPSet", namespace, name, seen),
        );
    }
    Ok(FirewallView {
        options,
        rules,
        groups,
        ip_sets,
    })
}

/// A referenced object's Proxmox name once it is Ready, else why not.
fn usable(
    kind: &str,
    namespace: &str,
    name: &str,
    seen: Option<(Vec<Condition>, Option<String>)>,
) -> Result<String, String> {
    let Some((conditions, proxmox)) = seen else {
        return Err(format!("{kind} {namespace}/{name} does not exist"));
    };
    let ready =
        find(&conditions, ConditionType::Ready).is_some_and(|c| c.status == ConditionStatus::True);
    match (ready, proxmox) {
        (true, Some(proxmox)) => Ok(proxmox),
        (true, None) | (false, _) => Err(format!("{kind} {namespace}/{name} is not Ready")),
    }
}
