//! Writes of the VM's firewall (synchronous: they start no task).

use pve_client::{Client, Guest, GuestType};

use crate::reconcile::common::firewall::RulePatch;
use crate::reconcile::vm::plan::{FirewallCall, FirewallWrite};

/// Writes the VM's firewall options or one correction of its rules.
pub(super) async fn write(client: &Client, write: &FirewallWrite) -> Result<(), pve_client::Error> {
    tracing::info!(call = ?write.call, vmid = write.vmid, "writing the VM's firewall");
    let guest = Guest {
        kind: GuestType::Qemu,
        node: write.node.clone(),
        vmid: write.vmid,
    };
    match &write.call {
        FirewallCall::Options {
            set,
            delete,
            digest,
        } => {
            client
                .set_guest_firewall_options(&guest, set, delete, digest.as_deref())
                .await
        }
        FirewallCall::Rules(patch) => rules(client, &guest, patch).await,
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
