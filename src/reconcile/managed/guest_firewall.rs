//! A guest's own firewall, read and written for the VM and the container
//! alike: its options and rules, the security groups and IP sets of its
//! namespace that the spec's rules name, and one write
//! ([`crate::reconcile::common::firewall`] decides it).

use std::collections::BTreeMap;

use kube::Api;
use pve_client::ipset::Scope;
use pve_client::{Client, Guest};

use crate::api::firewall::{GuestFirewall, GuestIPSet};
use crate::api::{Condition, ProxmoxIPSet, ProxmoxSecurityGroup};
use crate::reconcile::common::firewall::{FirewallCall, FirewallView, RulePatch, Unusable};
use crate::reconcile::common::guest_objects::{AliasCall, IpSetCall};
use crate::reconcile::common::ip_set::Set;
use crate::reconcile::error::is_not_found;
use crate::reconcile::managed::{firewall_wake, ip_sets};

/// Why the firewall could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Proxmox did not answer.
    Proxmox(pve_client::Error),
    /// Kubernetes could not be asked.
    Kube(kube::Error),
}

/// Reads the firewall of `guest` (two requests: options and rules; with
/// `aliases` in the spec one more, with `ipSets` one more and one per set
/// it has) and resolves what `spec` names in `namespace` (one Kubernetes
/// read per object named).
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
    let aliases = match spec.aliases {
        Some(_) => Some(
            client
                .guest_aliases(guest)
                .await
                .map_err(ReadError::Proxmox)?,
        ),
        None => None,
    };
    let ip_sets_own = match &spec.ip_sets {
        Some(wanted) => Some(own_sets(client, guest, wanted).await?),
        None => None,
    };
    Ok(FirewallView {
        options,
        rules,
        groups,
        ip_sets,
        aliases,
        ip_sets_own,
    })
}

/// The guest's own IP sets, with the entries of those `wanted` names (a
/// set the spec does not have is only deleted: its entries are not read).
async fn own_sets(
    client: &Client,
    guest: &Guest,
    wanted: &[GuestIPSet],
) -> Result<BTreeMap<String, Set>, ReadError> {
    let scope = Scope::Guest(guest);
    let listed = client.ip_sets(scope).await.map_err(ReadError::Proxmox)?;
    let mut out = BTreeMap::new();
    for set in listed {
        let entries = if wanted.iter().any(|w| w.name == set.name) {
            client
                .ip_set_entries(scope, &set.name)
                .await
                .map_err(ReadError::Proxmox)?
        } else {
            vec![]
        };
        out.insert(set.name, Set::observed(set.comment, entries));
    }
    Ok(out)
}

/// A referenced object's Proxmox name once it is Ready, else why not.
fn usable(
    kind: &str,
    namespace: &str,
    name: &str,
    seen: Option<(Vec<Condition>, Option<String>)>,
) -> Result<String, Unusable> {
    let Some((conditions, proxmox)) = seen else {
        return Err(Unusable::Missing(format!(
            "{kind} {namespace}/{name} does not exist"
        )));
    };
    firewall_wake::usable(&conditions, proxmox.as_ref())
        .ok_or_else(|| Unusable::NotReady(format!("{kind} {namespace}/{name} is not Ready")))
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
        FirewallCall::Alias(call) => alias(client, guest, call).await,
        FirewallCall::IpSet(call) => ip_set(client, guest, call).await,
    }
}

async fn alias(client: &Client, guest: &Guest, call: &AliasCall) -> Result<(), pve_client::Error> {
    match call {
        AliasCall::Create(a) => {
            client
                .create_guest_alias(guest, &a.name, &a.cidr, a.comment.as_deref())
                .await
        }
        AliasCall::Update { alias: a, digest } => {
            let alias = (a.name.as_str(), a.cidr.as_str(), a.comment.as_deref());
            client
                .set_guest_alias(guest, alias, digest.as_deref())
                .await
        }
        AliasCall::Delete { name, digest } => {
            client
                .delete_guest_alias(guest, name, digest.as_deref())
                .await
        }
    }
}

async fn ip_set(client: &Client, guest: &Guest, call: &IpSetCall) -> Result<(), pve_client::Error> {
    let scope = Scope::Guest(guest);
    match call {
        IpSetCall::Create { name, comment } => client.create_ip_set(scope, name, comment).await,
        IpSetCall::Patch { name, patch } => ip_sets::send(client, scope, name, patch).await,
        IpSetCall::Delete { name } => client.delete_ip_set(scope, name).await,
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
