//! Migrations and disk moves, from the plan's steps.

use pve_client::vm::{MigrateVm, MoveDisk};
use pve_client::{Client, Upid};

/// `POST .../migrate` to `target`, live when the VM runs.
pub(super) async fn migrate(
    client: &Client,
    node: &str,
    vmid: u32,
    target: &str,
    online: bool,
) -> Result<Upid, pve_client::Error> {
    let req = MigrateVm {
        target: target.to_owned(),
        online,
        // Harmless without local disks; needed for a live migration with
        // them (an offline one copies them anyway).
        with_local_disks: true,
    };
    client.migrate_vm(node, vmid, &req).await
}

/// `POST .../move_disk` of `slot` to `storage`, deleting the old volume.
pub(super) async fn move_disk(
    client: &Client,
    node: &str,
    vmid: u32,
    slot: &str,
    storage: &str,
    digest: Option<&str>,
) -> Result<Upid, pve_client::Error> {
    let req = MoveDisk {
        disk: slot.to_owned(),
        storage: storage.to_owned(),
        delete: true,
        digest: digest.map(str::to_owned),
    };
    client.move_disk(node, vmid, &req).await
}
