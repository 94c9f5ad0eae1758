//! A guest's own firewall, read and written for the VM and the container
//! alike: its options and rules, the security groups and IP sets of its
//! namespace that the spec's rules name, and one write
//! ([`crate::reconcile::common::firewall`] decides it).

use std::collections::BTreeMap;

use kube::Api;
use pve_client::{Client, Guest};

use crate::api::condition::{ConditionStatus, ConditionType, find};
use crate::api::firewall::GuestFirewall;
use crate::api::{Condition, ProxmoxIPSet, ProxmoxSecurityGroup};
use crate::reconcile::common::firewall::{FirewallCall, FirewallView, RulePatch};
use crate::reconcile::error::is_not_found;

/// Why the firewall could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Proxmox did not answer.
    Proxmox(pve_client::Error),
    /// Kubernetes could not be asked.
    Kube(kube::Error),
}

/// Reads the firewall of `guest` (two requests: options and rules) and
/// resolves what `spec` names in `namespace` (one Kubernetes read per
/// object named).
pub async fn view(
    (kube, client): (&kube::Client, &Client),
    guest: &Guest,
    spec: &GuestFirewall,
    namespace: &str,
) -> Result<FirewallView, ReadError> {
    let options = client
        .guest_firewall_options(guest)
        .await
        .map_err(ReadError::Proxmox)?;
    let rules = client
        .guest_firewall_rules(guest)
        .await
        .map_err(ReadError::Proxmox)?;
    let groups_api: Api<ProxmoxSecurityGroup> = Api::namespaced(kube.clone(), namespace);
    let mut groups = BTreeMap::new();
    for name in spec.security_groups() {
        let seen = match groups_api.get_opt(name).await {
            Ok(found) => found.map(|g| {
                let status = g.status.unwrap_or_default();
                (status.conditions, status.at_provider.name)
            }),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(ReadError::Kube(e)),
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
            Err(e) => return Err(ReadError::Kube(e)),
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

/// Writes the options of `guest`'s firewall or one correction of its
/// rules (synchronous: no task).
pub async fn write(
    client: &Client,
    guest: &Guest,
    call: &FirewallCall,
) -> Result<(), pve_client::Error> {
    tracing::info!(?call, vmid = guest.vmid, "writing the guest's firewall");
    match call {
        FirewallCall::Options {
            set,
            delete,
            digest,
        } => {
            client
                .set_guest_firewall_options(guest, set, delete, digest.as_deref())
                .await
        }
        FirewallCall::Rules(patch) => rules(client, guest, patch).await,
    }
}

async fn rules(client: &Client, guest: &Guest, patch: &RulePatch) -> Result<(), pve_client::Error> {
    match patch {
        RulePatch::Prepend(rules) => {
            for rule in rules {
                client.create_guest_firewall_rule(guest, rule).await?;
            }
            Ok(())
        }
        RulePatch::Insert { at, rule } => {
            client.create_guest_firewall_rule(guest, rule).await?;
            // PVE places a new rule first; it goes before the rule now at
            // `at + 1`. No digest: the list changed with the rule just
            // placed (an edit in between is drift the next pass sees).
            if *at == 0 {
                Ok(())
            } else {
                client
                    .move_guest_firewall_rule(guest, 0, at + 1, None)
                    .await
            }
        }
        RulePatch::Set { pos, rule, digest } => {
            client
                .set_guest_firewall_rule(guest, *pos, rule, digest.as_deref().unwrap_or_default())
                .await
        }
        RulePatch::Remove { pos, digest } => {
            client
                .delete_guest_firewall_rule(guest, *pos, digest.as_deref())
                .await
        }
    }
}
