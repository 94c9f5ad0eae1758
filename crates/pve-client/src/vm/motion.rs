//! Moving a VM or its disks: `POST .../migrate` (`qmigrate`, or
//! `hamigrate` for an HA-managed VM, which only asks the HA manager) and
//! `POST .../move_disk` (`qmmove`), after qemu-server's `migrate_vm` and
//! `move_vm_disk`.

use reqwest::Method;

use super::api::vm_path;
use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::upid::Upid;

/// `POST /nodes/{node}/qemu/{vmid}/migrate`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrateVm {
    /// Target node.
    pub target: String,
    /// Live migration; PVE refuses to migrate a running VM without it.
    pub online: bool,
    /// Copy disks on node-local storage along (needed for a live
    /// migration of a VM with local disks; an offline migration copies
    /// them anyway).
    pub with_local_disks: bool,
}

impl MigrateVm {
    fn to_params(&self) -> Params {
        let mut params = Params::new().text("target", &self.target);
        if self.online {
            params = params.flag("online", true);
        }
        if self.with_local_disks {
            params = params.flag("with-local-disks", true);
        }
        params
    }
}

/// `POST /nodes/{node}/qemu/{vmid}/move_disk` to another storage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MoveDisk {
    /// The drive key (`scsi0`).
    pub disk: String,
    /// Target storage.
    pub storage: String,
    /// Delete the source volume after a successful copy (otherwise it
    /// stays as `unusedN`).
    pub delete: bool,
    /// The config digest the move was decided from.
    pub digest: Option<String>,
}

impl MoveDisk {
    fn to_params(&self) -> Params {
        Params::new()
            .text("disk", &self.disk)
            .text("storage", &self.storage)
            .flag("delete", self.delete)
            .opt("digest", self.digest.as_deref())
    }
}

impl Client {
    /// `POST .../migrate`; returns the `qmigrate` task (`hamigrate` when
    /// the VM is HA-managed: the HA manager then migrates it in a task of
    /// its own).
    pub async fn migrate_vm(&self, node: &str, vmid: u32, req: &MigrateVm) -> Result<Upid> {
        self.start_task(
            Method::POST,
            vm_path("/nodes/{node}/qemu/{vmid}/migrate", node, vmid),
            req.to_params(),
        )
        .await
    }

    /// `POST .../move_disk`; returns the `qmmove` task.
    pub async fn move_disk(&self, node: &str, vmid: u32, req: &MoveDisk) -> Result<Upid> {
        self.start_task(
            Method::POST,
            vm_path("/nodes/{node}/qemu/{vmid}/move_disk", node, vmid),
            req.to_params(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_as_pve_takes_them() {
        let m = MigrateVm {
            target: "pve2".into(),
            online: true,
            with_local_disks: true,
        };
        assert_eq!(
            m.to_params().to_form(),
            "target=pve2&online=1&with-local-disks=1"
        );
        let offline = MigrateVm {
            target: "pve2".into(),
            ..MigrateVm::default()
        };
        assert_eq!(offline.to_params().to_form(), "target=pve2");
        let d = MoveDisk {
            disk: "scsi0".into(),
            storage: "ceph".into(),
            delete: true,
            digest: Some("abc".into()),
        };
        assert_eq!(
            d.to_params().to_form(),
            "disk=scsi0&storage=ceph&delete=1&digest=abc"
        );
    }
}
