//! What the simulator's records say about an actor: its Proxmox requests
//! per phase and node, its tasks' concurrency per node, and how long it
//! took to send the next step after a task ended.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::sim::{Request, Task};
use crate::stats::{Dist, peak_per_second};

/// The node a request is about (`/nodes/{node}/...`), else `cluster`.
pub fn node_of(path: &str) -> &str {
    path.strip_prefix("/nodes/")
        .and_then(|rest| rest.split('/').next())
        .filter(|n| !n.is_empty())
        .unwrap_or("cluster")
}

/// The VMID a request is about (`.../qemu/{vmid}...`).
fn vmid_of(path: &str) -> Option<&str> {
    let rest = &path[path.find("/qemu/")? + "/qemu/".len()..];
    rest.split('/').next().filter(|v| !v.is_empty())
}

/// Proxmox requests in one phase.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RequestStats {
    pub total: u64,
    pub seconds: f64,
    /// The most requests in one second, per node (`cluster` for
    /// `/cluster/...` and `/version`).
    pub peak_per_second: BTreeMap<String, u64>,
    /// `GET /nodes/{node}/tasks/{upid}/status` → count.
    pub by_route: BTreeMap<String, u64>,
    /// Answers other than 2xx.
    pub errors: u64,
}

impl RequestStats {
    pub fn of(requests: &[Request], from: f64, to: f64) -> Self {
        let window: Vec<&Request> = requests
            .iter()
            .filter(|r| r.time >= from && r.time < to)
            .collect();
        let mut by_route = BTreeMap::new();
        for r in &window {
            let route = r.route.as_deref().unwrap_or(&r.path);
            *by_route.entry(format!("{} {route}", r.method)).or_insert(0) += 1;
        }
        Self {
            total: window.len() as u64,
            seconds: (to - from).max(0.0),
            peak_per_second: peak_per_second(window.iter().map(|r| (node_of(&r.path), r.time))),
            by_route,
            errors: window
                .iter()
                .filter(|r| !(200..300).contains(&r.status))
                .count() as u64,
        }
    }

    pub fn route(&self, key: &str) -> u64 {
        self.by_route.get(key).copied().unwrap_or(0)
    }

    /// The highest per-node peak.
    pub fn peak(&self) -> u64 {
        self.peak_per_second.values().copied().max().unwrap_or(0)
    }
}

/// The most tasks of `task_type` running at once, per node (a task without
/// an end runs on).
pub fn max_concurrent(tasks: &[Task], task_type: &str) -> BTreeMap<String, usize> {
    let mut edges: BTreeMap<&str, Vec<(f64, i32)>> = BTreeMap::new();
    for t in tasks.iter().filter(|t| t.task_type == task_type) {
        let node = edges.entry(&t.node).or_default();
        node.push((t.started, 1));
        node.push((t.ended.unwrap_or(f64::INFINITY), -1));
    }
    edges
        .into_iter()
        .map(|(node, mut e)| {
            // At equal times an end frees the slot before a start takes it.
            e.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let (mut now, mut max) = (0i32, 0i32);
            for (_, d) in e {
                now += d;
                max = max.max(now);
            }
            (node.to_owned(), max.max(0) as usize)
        })
        .collect()
}

/// For every task that ended inside a window, the time until the actor's
/// next write (POST/PUT/DELETE) about the same VM, if that came inside the
/// same window: how long the client took to notice the end and act.
pub fn next_step_latency(
    tasks: &[Task],
    requests: &[Request],
    windows: &[(f64, f64)],
) -> Option<Dist> {
    let mut writes: HashMap<&str, Vec<f64>> = HashMap::new();
    for r in requests.iter().filter(|r| r.method != "GET") {
        if let Some(vmid) = vmid_of(&r.path) {
            writes.entry(vmid).or_default().push(r.time);
        }
    }
    for times in writes.values_mut() {
        times.sort_by(f64::total_cmp);
    }
    let within = |t: f64| windows.iter().find(|(a, b)| t >= *a && t < *b).copied();
    let latencies = tasks
        .iter()
        .filter_map(|t| {
            let ended = t.ended?;
            let (_, to) = within(ended)?;
            let times = writes.get(t.id.as_str())?;
            let next = times[times.partition_point(|&x| x <= ended)..].first()?;
            (*next < to).then(|| next - ended)
        })
        .collect();
    Dist::of(latencies)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(node: &str, kind: &str, id: &str, started: f64, ended: Option<f64>) -> Task {
        Task {
            upid: format!("UPID:{node}:{started}"),
            node: node.into(),
            task_type: kind.into(),
            id: id.into(),
            user: "root@pam!p".into(),
            started,
            ended,
            exitstatus: ended.map(|_| "OK".into()),
        }
    }

    fn request(method: &str, path: &str, time: f64) -> Request {
        Request {
            seq: 0,
            time,
            method: method.into(),
            path: path.into(),
            route: None,
            params: BTreeMap::new(),
            status: 200,
            user: None,
        }
    }

    #[test]
    fn paths_name_their_node_and_vm() {
        assert_eq!(node_of("/nodes/pve2/qemu/101/config"), "pve2");
        assert_eq!(node_of("/cluster/nextid"), "cluster");
        assert_eq!(vmid_of("/nodes/pve2/qemu/101/status/start"), Some("101"));
        assert_eq!(vmid_of("/nodes/pve2/qemu"), None);
    }

    #[test]
    fn concurrency_counts_overlaps_per_node_only() {
        let tasks = [
            task("a", "qmcreate", "1", 0.0, Some(3.0)),
            task("a", "qmcreate", "2", 1.0, Some(4.0)),
            task("a", "qmcreate", "3", 3.0, Some(6.0)), // starts as 1 ends
            task("a", "qmstart", "1", 1.5, Some(2.0)),
            task("b", "qmcreate", "4", 2.0, None),
        ];
        let max = max_concurrent(&tasks, "qmcreate");
        assert_eq!(max["a"], 2);
        assert_eq!(max["b"], 1);
    }

    #[test]
    fn latency_is_task_end_to_next_write_in_the_same_window() {
        let tasks = [
            task("a", "qmcreate", "101", 0.0, Some(3.0)),
            task("a", "qmstart", "101", 4.0, Some(4.5)),
        ];
        let requests = [
            request("GET", "/nodes/a/qemu/101/status/current", 3.2),
            request("PUT", "/nodes/a/qemu/101/resize", 3.5),
            request("POST", "/nodes/a/qemu/101/status/shutdown", 100.0),
        ];
        let d = next_step_latency(&tasks, &requests, &[(0.0, 10.0), (99.0, 200.0)]).unwrap();
        // The start's next write is in another window: not counted.
        assert_eq!(d.n, 1);
        assert!((d.max - 0.5).abs() < 1e-9);
    }
}
