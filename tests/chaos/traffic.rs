//! The simulator's request log, collected as it grows (pve-sim keeps only
//! the last 20 000 entries), and what it says about dispatches.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::sim::Sim;

/// Calls that create a VM.
pub const CREATING: [(&str, &str); 2] = [
    ("POST", "/nodes/{node}/qemu"),
    ("POST", "/nodes/{node}/qemu/{vmid}/clone"),
];

/// Calls that start a Proxmox task (the UPID comes back with a 200).
pub const TASK_STARTING: [(&str, &str); 11] = [
    CREATING[0],
    CREATING[1],
    ("POST", "/nodes/{node}/storage/{storage}/download-url"),
    ("POST", "/nodes/{node}/qemu/{vmid}/config"),
    ("PUT", "/nodes/{node}/qemu/{vmid}/resize"),
    ("DELETE", "/nodes/{node}/qemu/{vmid}"),
    ("POST", "/nodes/{node}/qemu/{vmid}/template"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/start"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/stop"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/reboot"),
];

pub fn is(entry: &Value, method: &str, route: &str) -> bool {
    entry["method"] == method && entry["route"] == route
}

/// A create or clone that started a task: `(VMID created, entry)`.
pub fn create_dispatch(entry: &Value) -> Option<u32> {
    if entry["status"] != 200 {
        return None;
    }
    let param = if is(entry, "POST", "/nodes/{node}/qemu") {
        "vmid"
    } else if is(entry, "POST", "/nodes/{node}/qemu/{vmid}/clone") {
        "newid"
    } else {
        return None;
    };
    entry["params"][param].as_str()?.parse().ok()
}

/// One line about an entry, for reports: `#812 12:00:01.23 POST /nodes/pve2/qemu vmid=104 -> 200`.
pub fn describe(entry: &Value) -> String {
    let params = entry["params"]
        .as_object()
        .map(|p| {
            ["vmid", "newid", "node", "name", "target"]
                .iter()
                .filter_map(|k| Some(format!("{k}={}", p.get(*k)?.as_str()?)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    format!(
        "#{} t={:.2} {} {} {} -> {}",
        entry["seq"],
        entry["time"].as_f64().unwrap_or_default(),
        entry["method"].as_str().unwrap_or_default(),
        entry["path"].as_str().unwrap_or_default(),
        params,
        entry["status"]
    )
}

/// The whole log, fetched in the background.
#[derive(Clone)]
pub struct RequestLog {
    entries: Arc<Mutex<Vec<Value>>>,
    /// Entries the simulator dropped before they were fetched (its log is
    /// a ring); must stay 0 for the dispatch count to be complete.
    missed: Arc<Mutex<u64>>,
    stop: watch::Sender<bool>,
}

impl RequestLog {
    /// Starts fetching every 200 ms from `sim` (shared with the task).
    pub fn start(sim: Arc<Sim>) -> Self {
        let (stop, mut stopped) = watch::channel(false);
        let log = Self {
            entries: Arc::new(Mutex::new(Vec::new())),
            missed: Arc::new(Mutex::new(0)),
            stop,
        };
        let fetcher = log.clone();
        tokio::spawn(async move {
            loop {
                fetcher.fetch(&sim).await;
                tokio::select! {
                    _ = stopped.changed() => break,
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        });
        log
    }

    async fn fetch(&self, sim: &Sim) {
        let new = sim.requests_since(self.next()).await;
        let mut all = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        // Two fetches may overlap (the last one and the background one):
        // keep only what is newer than what is stored.
        let next = all
            .last()
            .and_then(|e| e["seq"].as_u64())
            .map_or(0, |s| s + 1);
        let new: Vec<Value> = new
            .into_iter()
            .filter(|e| e["seq"].as_u64() >= Some(next))
            .collect();
        if let Some(first) = new.first().and_then(|e| e["seq"].as_u64()) {
            *self.missed.lock().unwrap_or_else(|p| p.into_inner()) += first - next;
        }
        all.extend(new);
    }

    /// Entries the simulator dropped before they could be fetched.
    pub fn missed(&self) -> u64 {
        *self.missed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sequence number the next entry will have (as far as fetched).
    pub fn next(&self) -> u64 {
        let all = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        all.last()
            .and_then(|e| e["seq"].as_u64())
            .map_or(0, |s| s + 1)
    }

    /// Everything fetched so far.
    pub fn snapshot(&self) -> Vec<Value> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Fetches the rest and stops.
    pub async fn finish(&self, sim: &Sim) -> Vec<Value> {
        let _ = self.stop.send(true);
        self.fetch(sim).await;
        self.snapshot()
    }
}
