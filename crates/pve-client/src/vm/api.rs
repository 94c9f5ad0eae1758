//! VM endpoints under `/nodes/{node}/qemu`.

use reqwest::Method;
use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;
use crate::upid::Upid;
use crate::vm::config::{PendingEntry, VmConfig};
use crate::vm::params::{CloneVm, ConfigUpdate, CreateVm, DeleteOptions, ShutdownOptions};
use crate::vm::size::DiskSize;

/// `GET .../status/current`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct VmStatus {
    #[serde(deserialize_with = "lenient::u64_any")]
    pub vmid: u64,
    /// `running` or `stopped`.
    pub status: String,
    #[serde(default)]
    pub qmpstatus: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub lock: Option<String>,
    #[serde(default)]
    pub tags: Option<String>,
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub template: bool,
    /// Whether the guest agent is enabled in the config (not whether it
    /// runs).
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub agent: bool,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub pid: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub cpus: Option<f64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxdisk: Option<u64>,
}

impl VmStatus {
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }
}

pub(super) fn vm_path(template: &'static str, node: &str, vmid: u32) -> ApiPath {
    ApiPath::new(template, &[node, &vmid.to_string()])
}

impl Client {
    /// `POST /nodes/{node}/qemu`: creates a VM; returns the `qmcreate` task.
    ///
    /// The VM exists (with `lock: create`) as soon as this returns; if the
    /// task fails PVE removes it again. Disks are imported with the
    /// `import-from` drive option ([`crate::vm::Drive::import`])
    /// — never with a REST `importdisk`, which does not exist.
    pub async fn create_vm(&self, node: &str, create: &CreateVm) -> Result<Upid> {
        self.start_task(
            Method::POST,
            ApiPath::new("/nodes/{node}/qemu", &[node]),
            create.to_params(),
        )
        .await
    }

    /// `POST .../qemu/{vmid}/clone`; returns the `qmclone` task.
    pub async fn clone_vm(&self, node: &str, vmid: u32, clone: &CloneVm) -> Result<Upid> {
        self.start_task(
            Method::POST,
            vm_path("/nodes/{node}/qemu/{vmid}/clone", node, vmid),
            clone.to_params(),
        )
        .await
    }

    /// `GET .../config`, typed (with the raw map and the digest). Pending
    /// changes are merged in, as PVE does by default: this is the config
    /// the VM will have after its next restart.
    pub async fn vm_config(&self, node: &str, vmid: u32) -> Result<VmConfig> {
        self.vm_config_with(node, vmid, false).await
    }

    /// `GET .../config?current=1`: the config the running VM uses now,
    /// without pending changes.
    pub async fn vm_config_current(&self, node: &str, vmid: u32) -> Result<VmConfig> {
        self.vm_config_with(node, vmid, true).await
    }

    async fn vm_config_with(&self, node: &str, vmid: u32, current: bool) -> Result<VmConfig> {
        let params = if current {
            Params::new().flag("current", true)
        } else {
            Params::new()
        };
        let value: serde_json::Value = self
            .get(
                vm_path("/nodes/{node}/qemu/{vmid}/config", node, vmid),
                params,
            )
            .await?;
        Ok(VmConfig::from_json(&value))
    }

    /// `GET .../pending`.
    pub async fn vm_pending(&self, node: &str, vmid: u32) -> Result<Vec<PendingEntry>> {
        let items: Vec<serde_json::Value> = self
            .get(
                vm_path("/nodes/{node}/qemu/{vmid}/pending", node, vmid),
                Params::new(),
            )
            .await?;
        Ok(items.iter().filter_map(PendingEntry::from_json).collect())
    }

    /// `POST .../config`: asynchronous update, returns the `qmconfig` task.
    /// Prefer this for disk and hotplug work.
    pub async fn update_vm_config(
        &self,
        node: &str,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<Upid> {
        self.start_task(
            Method::POST,
            vm_path("/nodes/{node}/qemu/{vmid}/config", node, vmid),
            update.to_params(),
        )
        .await
    }

    /// `PUT .../config`: synchronous update for plain settings (no disk
    /// allocation: that can outlast PVE's 30 s proxy timeout).
    pub async fn update_vm_config_sync(
        &self,
        node: &str,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<()> {
        let _: serde_json::Value = self
            .write(
                Method::PUT,
                vm_path("/nodes/{node}/qemu/{vmid}/config", node, vmid),
                update.to_params(),
            )
            .await?;
        Ok(())
    }

    /// `PUT .../resize`: grows a disk; returns the `resize` task (PVE ≥ 8.0).
    pub async fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        disk: &str,
        size: DiskSize,
    ) -> Result<Upid> {
        self.start_task(
            Method::PUT,
            vm_path("/nodes/{node}/qemu/{vmid}/resize", node, vmid),
            Params::new().text("disk", disk).text("size", size),
        )
        .await
    }

    /// `GET /nodes/{node}/qemu`: the node's VMs, as its own config files
    /// say (a new VM is listed at once, where `/cluster/resources` waits for
    /// the next stats broadcast).
    pub async fn node_vms(&self, node: &str) -> Result<Vec<VmStatus>> {
        self.get(ApiPath::new("/nodes/{node}/qemu", &[node]), Params::new())
            .await
    }

    /// `GET .../status/current`.
    pub async fn vm_status(&self, node: &str, vmid: u32) -> Result<VmStatus> {
        self.get(
            vm_path("/nodes/{node}/qemu/{vmid}/status/current", node, vmid),
            Params::new(),
        )
        .await
    }

    /// `POST .../status/start`.
    pub async fn start_vm(&self, node: &str, vmid: u32) -> Result<Upid> {
        self.start_task(
            Method::POST,
            vm_path("/nodes/{node}/qemu/{vmid}/status/start", node, vmid),
            Params::new(),
        )
        .await
    }

    /// `POST .../status/stop` (hard stop).
    pub async fn stop_vm(&self, node: &str, vmid: u32) -> Result<Upid> {
        self.start_task(
            Method::POST,
            vm_path("/nodes/{node}/qemu/{vmid}/status/stop", node, vmid),
            Params::new(),
        )
        .await
    }

    /// `POST .../status/shutdown` (ACPI or agent; optional force stop).
    pub async fn shutdown_vm(&self, node: &str, vmid: u32, opts: ShutdownOptions) -> Result<Upid> {
        self.start_task(
            Method::POST,
            vm_path("/nodes/{node}/qemu/{vmid}/status/shutdown", node, vmid),
            Params::new()
                .opt("timeout", opts.timeout)
                .opt_flag("forceStop", opts.force_stop),
        )
        .await
    }

    /// `DELETE .../qemu/{vmid}`; returns the `qmdestroy` task.
    pub async fn delete_vm(&self, node: &str, vmid: u32, opts: DeleteOptions) -> Result<Upid> {
        let mut params = Params::new();
        if opts.purge {
            params = params.flag("purge", true);
        }
        if opts.destroy_unreferenced_disks {
            params = params.flag("destroy-unreferenced-disks", true);
        }
        self.start_task(
            Method::DELETE,
            vm_path("/nodes/{node}/qemu/{vmid}", node, vmid),
            params,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_decodes_pve_shapes() {
        let s: VmStatus = serde_json::from_value(json!({
            "vmid": 100, "status": "stopped", "qmpstatus": "stopped", "name": "VM 100",
            "lock": "create", "template": "", "agent": 1, "cpus": 1, "maxmem": 536870912,
            "ha": {"managed": 0}
        }))
        .unwrap();
        assert_eq!(s.lock.as_deref(), Some("create"));
        assert!(s.agent && !s.template && !s.is_running());
        let r: VmStatus =
            serde_json::from_value(json!({"vmid":"101","status":"running","pid":4242,"uptime":12}))
                .unwrap();
        assert!(r.is_running());
        assert_eq!(r.pid, Some(4242));
    }
}
