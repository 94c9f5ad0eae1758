//! Guest snapshots: `/nodes/{node}/{qemu,lxc}/{vmid}/snapshot` (qemu-server
//! `PVE::API2::Qemu` and pve-container `PVE::API2::LXC::Snapshot`, both on
//! pve-guest-common's `AbstractConfig`). Taking, rolling back and deleting
//! a snapshot are tasks (`qmsnapshot`/`vzsnapshot`, `qmrollback`/
//! `vzrollback`, `qmdelsnapshot`/`vzdelsnapshot`) that lock the guest
//! (`snapshot`, `rollback`, `snapshot-delete`) while they run; changing a
//! snapshot's description (`PUT .../snapshot/{name}/config`) answers at
//! once. `vmstate` (the RAM) exists for VMs only: pve-container's create
//! has no such parameter.

use std::fmt;

use reqwest::Method;
use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;
use crate::upid::Upid;

/// The two kinds of guest that have snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GuestType {
    /// A VM (`qemu`).
    Qemu,
    /// A container (`lxc`).
    Lxc,
}

impl GuestType {
    /// The path segment (`qemu`, `lxc`).
    pub fn segment(self) -> &'static str {
        match self {
            Self::Qemu => "qemu",
            Self::Lxc => "lxc",
        }
    }

    /// The task type of a snapshot action on this guest type (`take`:
    /// `qmsnapshot`/`vzsnapshot`, ...).
    pub fn task_type(self, action: SnapshotTask) -> &'static str {
        match (self, action) {
            (Self::Qemu, SnapshotTask::Take) => "qmsnapshot",
            (Self::Qemu, SnapshotTask::Rollback) => "qmrollback",
            (Self::Qemu, SnapshotTask::Delete) => "qmdelsnapshot",
            (Self::Lxc, SnapshotTask::Take) => "vzsnapshot",
            (Self::Lxc, SnapshotTask::Rollback) => "vzrollback",
            (Self::Lxc, SnapshotTask::Delete) => "vzdelsnapshot",
        }
    }
}

impl fmt::Display for GuestType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.segment())
    }
}

/// The tasks a snapshot has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotTask {
    Take,
    Rollback,
    Delete,
}

/// One guest on one node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Guest {
    pub kind: GuestType,
    pub node: String,
    pub vmid: u32,
}

impl Guest {
    /// `.../snapshot` (`tail` empty), or the snapshot `name`'s own path,
    /// its `rollback` or its `config`.
    fn path(&self, tail: &str, name: &str) -> ApiPath {
        let vmid = self.vmid.to_string();
        let template = match (self.kind, tail) {
            (GuestType::Qemu, "") => "/nodes/{node}/qemu/{vmid}/snapshot",
            (GuestType::Qemu, "rollback") => {
                "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback"
            }
            (GuestType::Qemu, "config") => "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
            (GuestType::Qemu, _) => "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}",
            (GuestType::Lxc, "") => "/nodes/{node}/lxc/{vmid}/snapshot",
            (GuestType::Lxc, "rollback") => "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback",
            (GuestType::Lxc, "config") => "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config",
            (GuestType::Lxc, _) => "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}",
        };
        if tail.is_empty() {
            ApiPath::new(template, &[&self.node, &vmid])
        } else {
            ApiPath::new(template, &[&self.node, &vmid, name])
        }
    }
}

/// One entry of `GET .../snapshot`: a snapshot, or `current` (where the
/// guest is now, its `parent` the snapshot it was taken after or rolled
/// back to).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct SnapshotEntry {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parent: Option<String>,
    /// UNIX seconds.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub snaptime: Option<u64>,
    /// Whether the RAM was saved (VMs only).
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub vmstate: Option<bool>,
}

impl SnapshotEntry {
    /// `current` is where the guest is now, not a snapshot.
    pub fn is_current(&self) -> bool {
        self.name == "current"
    }
}

/// What to take.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TakeSnapshot {
    pub name: String,
    pub description: String,
    /// Save the RAM too (VMs only; never sent for a container).
    pub vmstate: bool,
}

/// Reads the `lock` of a guest config.
#[derive(Deserialize)]
struct Locked {
    #[serde(default)]
    lock: Option<String>,
}

impl Client {
    /// `GET .../snapshot`: the snapshots and `current`.
    pub async fn snapshots(&self, guest: &Guest) -> Result<Vec<SnapshotEntry>> {
        self.get(guest.path("", ""), Params::new()).await
    }

    /// The guest's config lock (`snapshot`, `rollback`, `backup`, ...), from
    /// `GET .../config`.
    pub async fn guest_lock(&self, guest: &Guest) -> Result<Option<String>> {
        let path = match guest.kind {
            GuestType::Qemu => "/nodes/{node}/qemu/{vmid}/config",
            GuestType::Lxc => "/nodes/{node}/lxc/{vmid}/config",
        };
        let config: Locked = self
            .get(
                ApiPath::new(path, &[&guest.node, &guest.vmid.to_string()]),
                Params::new(),
            )
            .await?;
        Ok(config.lock.filter(|l| !l.is_empty()))
    }

    /// `POST .../snapshot`: the `qmsnapshot`/`vzsnapshot` task.
    pub async fn take_snapshot(&self, guest: &Guest, take: &TakeSnapshot) -> Result<Upid> {
        let vmstate = (guest.kind == GuestType::Qemu && take.vmstate).then_some(true);
        let params = Params::new()
            .text("snapname", &take.name)
            .text("description", &take.description)
            .opt_flag("vmstate", vmstate);
        self.start_task(Method::POST, guest.path("", ""), params)
            .await
    }

    /// `POST .../snapshot/{name}/rollback`: the `qmrollback`/`vzrollback`
    /// task. A VM snapshot with RAM resumes running; without it the guest
    /// is left stopped (`start` is not sent: the guest's own resource
    /// brings it to its declared power state).
    pub async fn rollback_snapshot(&self, guest: &Guest, name: &str) -> Result<Upid> {
        self.start_task(Method::POST, guest.path("rollback", name), Params::new())
            .await
    }

    /// `DELETE .../snapshot/{name}`: the `qmdelsnapshot`/`vzdelsnapshot`
    /// task (its children are re-parented by Proxmox).
    pub async fn delete_snapshot(&self, guest: &Guest, name: &str) -> Result<Upid> {
        self.start_task(Method::DELETE, guest.path("one", name), Params::new())
            .await
    }

    /// `PUT .../snapshot/{name}/config`: the description, at once.
    pub async fn set_snapshot_description(
        &self,
        guest: &Guest,
        name: &str,
        description: &str,
    ) -> Result<()> {
        let params = Params::new().text("description", description);
        self.write_null(Method::PUT, guest.path("config", name), params)
            .await
    }
}
