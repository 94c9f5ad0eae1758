//! The headline figures of a run, per VM and per minute where that is what
//! the targets of issue 11 are stated in (the JSON result carries them as
//! they appear in the Markdown table).

use serde::{Deserialize, Serialize};

use crate::summary::Summary;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Headline {
    /// Apply → all Ready, when all became Ready.
    pub wall_seconds: Option<f64>,
    pub wall_over_ideal: Option<f64>,
    pub proxmox_creating_per_vm: f64,
    pub task_status_polls_per_vm: f64,
    pub task_list_reads_per_vm: f64,
    pub proxmox_creating_peak_per_second: u64,
    pub proxmox_idle_per_vm_per_minute: Option<f64>,
    pub proxmox_idle_peak_per_second: Option<u64>,
    pub api_creating_per_vm: Option<f64>,
    pub api_idle_per_vm_per_minute: Option<f64>,
    pub status_writes_creating_per_vm: Option<f64>,
    /// All VMs together.
    pub status_writes_idle_per_minute: Option<f64>,
    /// Of VMs whose guest agent had answered before the idle window.
    #[serde(default)]
    pub status_writes_idle_settled_per_minute: Option<f64>,
    pub cpu_idle_ms_per_vm_per_minute: Option<f64>,
    pub nextid_per_vm: f64,
    pub creates_per_vm: f64,
    pub vmids_recorded_per_vm: f64,
    pub proxmox_deleting_per_vm: Option<f64>,
}

impl Headline {
    pub fn of(s: &Summary) -> Self {
        let n = s.vms.max(1) as f64;
        let per_vm = |x: u64| x as f64 / n;
        let per_minute = |x: f64| s.idle_seconds.filter(|t| *t > 0.0).map(|t| x * 60.0 / t);
        let idle_total = s.proxmox_idle.as_ref().map(|r| r.total as f64);
        let creating = &s.proxmox_creating;
        Self {
            wall_seconds: s.created.then_some(s.create_seconds),
            wall_over_ideal: s.created.then(|| s.create_seconds / s.ideal.even),
            proxmox_creating_per_vm: per_vm(creating.total),
            task_status_polls_per_vm: per_vm(
                creating.route("GET /nodes/{node}/tasks/{upid}/status"),
            ),
            task_list_reads_per_vm: per_vm(creating.route("GET /nodes/{node}/tasks")),
            proxmox_creating_peak_per_second: creating.peak(),
            proxmox_idle_per_vm_per_minute: idle_total.and_then(per_minute).map(|x| x / n),
            proxmox_idle_peak_per_second: s.proxmox_idle.as_ref().map(|r| r.peak()),
            api_creating_per_vm: s.api_creating.as_ref().map(|a| per_vm(a.total)),
            api_idle_per_vm_per_minute: s
                .api_idle
                .as_ref()
                .and_then(|a| per_minute(a.total as f64))
                .map(|x| x / n),
            status_writes_creating_per_vm: s.api_creating.as_ref().map(|a| per_vm(a.status_writes)),
            status_writes_idle_per_minute: s
                .api_idle
                .as_ref()
                .and_then(|a| per_minute(a.status_writes as f64)),
            status_writes_idle_settled_per_minute: s
                .idle_status_writes_settled
                .and_then(|w| per_minute(w as f64)),
            cpu_idle_ms_per_vm_per_minute: s
                .process
                .cpu_seconds_idle
                .and_then(|c| per_minute(c * 1000.0))
                .map(|x| x / n),
            nextid_per_vm: per_vm(s.nextid_calls),
            creates_per_vm: per_vm(s.creates_sent),
            vmids_recorded_per_vm: per_vm(s.vmids_recorded as u64),
            proxmox_deleting_per_vm: s.proxmox_deleting.as_ref().map(|r| per_vm(r.total)),
        }
    }
}
