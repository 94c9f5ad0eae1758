//! Writes of the VM's firewall (synchronous: they start no task).

use pve_client::{Client, Guest, GuestType};

use crate::reconcile::managed::guest_firewall;
use crate::reconcile::vm::plan::FirewallWrite;

/// Writes the VM's firewall options or one correction of its rules.
pub(super) async fn write(client: &Client, write: &FirewallWrite) -> Result<(), pve_client::Error> {
    let guest = Guest {
        kind: GuestType::Qemu,
        node: write.node.clone(),
        vmid: write.vmid,
    };
    guest_firewall::write(client, &guest, &write.call).await
}
