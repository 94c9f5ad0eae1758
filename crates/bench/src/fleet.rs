//! The `fleet` variant: the run's N VMs as clones of one ProxmoxImage's
//! template on each node, instead of one import each.
//!
//! The image (a URL the simulator "downloads", with its checksum) is
//! applied together with the VMs, as `kubectl apply -f fleet/` would; the
//! provider downloads it once per node, imports it into a template VM per
//! node, and clones that for every VM placed there. The image is deleted
//! together with the VMs and followed until it is gone: its templates and
//! files are deleted only once nothing uses them, which the figures check
//! from the simulator's task records.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use pve_sim::Durations;
use pve_sim::control::urls::{DEFAULT_SIZE, url_checksums};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::clock::now;
use crate::ideal::{Chain, even};
use crate::run::{Run, SimVm};
use crate::sim::Task;
use crate::workload::{self, Tracker};

/// The ProxmoxImage of a fleet run.
pub const IMAGE: &str = "fleet";
/// What the simulator downloads (it never touches the network: an
/// unregistered URL is a 600 MiB image whose SHA-256 is that of the URL).
pub const IMAGE_URL: &str = "http://127.0.0.1/images/ubuntu-24.04-server-cloudimg-amd64.qcow2";
/// The label of the run's own ProxmoxVMs (the templates, made by the
/// provider, do not carry it).
pub const WORKLOAD_LABEL: &str = "bench.proxmox.crossplane.io/workload";
/// The label selector of the run's VMs.
pub const SELECTOR: &str = "bench.proxmox.crossplane.io/workload=fleet";

/// The fleet's provider config limits: a linked clone is a second of
/// metadata work, so a fleet is bounded by the clone slots and the request
/// budget, not by storage. What a user with a fleet would raise.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetLimits {
    pub requests_per_second: u32,
    pub max_concurrent_clones_per_node: u32,
}

impl FleetLimits {
    /// `spec.limits` of the ClusterProviderConfig.
    pub fn spec(self) -> Value {
        json!({
            "requestsPerSecond": self.requests_per_second,
            "maxConcurrentClonesPerNode": self.max_concurrent_clones_per_node,
        })
    }
}

/// The ProxmoxImage: the URL downloaded into `local` on every node, a
/// template per node on `local-lvm` (LVM-thin: linked clones).
pub fn image_manifest(namespace: &str, config: &str, nodes: &[String]) -> Value {
    let checksums = url_checksums(IMAGE_URL);
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": IMAGE, "namespace": namespace},
        "spec": {
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": config},
            "forProvider": {
                "source": {
                    "url": IMAGE_URL,
                    "checksum": checksums.get("sha256"),
                    "checksumAlgorithm": "sha256",
                },
                "content": "import",
                "storage": "local",
                "nodes": nodes,
                "template": {"storage": "local-lvm", "linked": true},
            },
        },
    })
}

/// ProxmoxVM `name` of a fleet: the ordinary run's VM
/// ([`workload::manifest`]) cloned from the image instead of importing.
pub fn vm_manifest(name: &str, namespace: &str, config: &str, nodes: &[String]) -> Value {
    let mut vm = workload::manifest(name, namespace, config, nodes);
    vm["metadata"]["labels"] = json!({ WORKLOAD_LABEL: "fleet" });
    let p = &mut vm["spec"]["forProvider"];
    p["clone"] = json!({"image": IMAGE, "full": false});
    // The template's disk, grown as the ordinary run grows its import.
    p["disks"] = json!([{
        "slot": "scsi0",
        "storage": "local-lvm",
        "size": format!("{}Gi", workload::DISK_SIZE_GIB),
    }]);
    vm
}

/// When the image got where.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ImageTimes {
    pub applied: f64,
    /// Its `Ready` condition first True.
    pub ready_at: Option<f64>,
    pub delete_at: Option<f64>,
    /// Gone from the API server (its templates and files deleted).
    pub gone_at: Option<f64>,
}

fn images(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<provider_proxmox::api::ProxmoxImage>(&()),
    )
}

/// Applies the image; then follows it: when it is first Ready, and, once
/// the tracker's VMs are being deleted, deletes it and waits (at most
/// `delete_timeout`) until it is gone.
pub async fn apply_and_follow(
    admin: &kube::Client,
    namespace: &str,
    manifest: Value,
    tracker: Tracker,
    delete_timeout: Duration,
) -> anyhow::Result<tokio::task::JoinHandle<ImageTimes>> {
    let api = images(admin, namespace);
    let object: DynamicObject = serde_json::from_value(manifest).context("the image manifest")?;
    api.create(&PostParams::default(), &object)
        .await
        .context("creating the ProxmoxImage")?;
    let mut times = ImageTimes {
        applied: now(),
        ..ImageTimes::default()
    };
    Ok(tokio::spawn(async move {
        loop {
            if times.ready_at.is_none()
                && api
                    .get(IMAGE)
                    .await
                    .is_ok_and(|o| condition_true(&o.data, "Ready"))
            {
                times.ready_at = Some(now());
            }
            if tracker.deleting() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if api.delete(IMAGE, &DeleteParams::default()).await.is_ok() {
            times.delete_at = Some(now());
        }
        let deadline = now() + delete_timeout.as_secs_f64();
        while now() < deadline {
            if let Err(kube::Error::Api(e)) = api.get(IMAGE).await
                && e.code == 404
            {
                times.gone_at = Some(now());
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        times
    }))
}

fn condition_true(object: &Value, type_: &str) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == type_ && c["status"] == "True")
        })
}

/// The ideal of a fleet run, nominal durations: per node the download, the
/// template's import and conversion, then the clones in rounds of the
/// clone slots, then the last clone's configuration, resize and start; and
/// no faster than the request budget lets the writes through (each VM
/// needs at least four: clone, config, resize, start).
pub fn ideal(n: usize, nodes: usize, limits: FleetLimits, time_scale: f64) -> FleetIdeal {
    let d = Durations::default();
    let scaled = |x: Duration| x.as_secs_f64() * time_scale;
    let download = DEFAULT_SIZE as f64 / d.download_bytes_per_sec as f64 * time_scale;
    // The template has no cloud-init drive: its create is the import alone.
    let chain = Chain::nominal(time_scale);
    let import = chain.create - scaled(d.disk_alloc);
    let template = scaled(d.config);
    let clone = scaled(d.linked_clone);
    let tail = scaled(d.config) + chain.resize + chain.start;
    let slots = limits.max_concurrent_clones_per_node.max(1) as usize;
    let critical = even(n, nodes)
        .into_iter()
        .filter(|&k| k > 0)
        .map(|k| download + import + template + k.div_ceil(slots) as f64 * clone + tail)
        .fold(0.0, f64::max);
    let rps = f64::from(limits.requests_per_second.max(1));
    let writes = ((4 * n) as f64 - 2.0 * rps).max(0.0) / rps;
    FleetIdeal {
        download,
        import,
        clone,
        critical_path: critical,
        writes,
        ideal: critical.max(writes),
    }
}

/// The parts of [`ideal`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FleetIdeal {
    pub download: f64,
    pub import: f64,
    pub clone: f64,
    /// The slowest node's chain.
    pub critical_path: f64,
    /// The writes through the request budget.
    pub writes: f64,
    /// The larger of the two.
    pub ideal: f64,
}

/// What a fleet run adds to its summary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fleet {
    pub limits: FleetLimits,
    pub ideal: FleetIdeal,
    /// The ordinary run's import-bound ideal for as many VMs (the target is
    /// a quarter of it).
    pub import_ideal: f64,
    pub wall_seconds: Option<f64>,
    pub image: ImageTimes,
    /// `node/file` → download tasks (1 each is the target).
    pub downloads: BTreeMap<String, usize>,
    /// Tasks by type while creating: imports (`qmcreate`), clones, template
    /// conversions.
    pub imports: usize,
    pub clones: usize,
    pub templates: usize,
    /// The most clones at once on a node.
    pub max_clones_per_node: BTreeMap<String, usize>,
    /// Deletions that came while something still used what they deleted.
    pub early_deletes: Vec<String>,
}

impl Fleet {
    pub fn of(
        run: &Run,
        image: ImageTimes,
        limits: FleetLimits,
        nodes: &[String],
        import_ideal: f64,
        time_scale: f64,
    ) -> Self {
        let count = |kind: &str| run.tasks.iter().filter(|t| t.task_type == kind).count();
        let mut downloads = BTreeMap::new();
        for t in run.tasks.iter().filter(|t| t.task_type == "download") {
            *downloads.entry(format!("{}/{}", t.node, t.id)).or_insert(0) += 1;
        }
        Self {
            limits,
            ideal: ideal(run.vms, nodes.len(), limits, time_scale),
            import_ideal,
            wall_seconds: run.phases.all_ready.map(|t| t - run.phases.start),
            downloads,
            imports: count("qmcreate"),
            clones: count("qmclone"),
            templates: count("qmtemplate"),
            max_clones_per_node: crate::referee::max_concurrent(&run.tasks, "qmclone"),
            early_deletes: early_deletes(&run.tasks, &run.sim_vms),
            image,
        }
    }

    /// Wall time over the fleet's own ideal.
    pub fn over_ideal(&self) -> Option<f64> {
        Some(self.wall_seconds? / self.ideal.ideal)
    }

    /// Wall time over the ordinary run's import-bound ideal (≤ 0.25 is the
    /// target).
    pub fn over_import_ideal(&self) -> Option<f64> {
        Some(self.wall_seconds? / self.import_ideal)
    }
}

/// Deletions of something still in use: a template destroyed before every
/// clone on its node was, or the image's file deleted before every VM was.
/// The templates are the VMs that were converted (`qmtemplate`); the clones
/// of a node are the run's VMs the simulator had there.
pub fn early_deletes(tasks: &[Task], vms: &[SimVm]) -> Vec<String> {
    let destroyed = |vmid: &str| {
        tasks
            .iter()
            .find(|t| t.task_type == "qmdestroy" && t.id == vmid)
    };
    let last_end = |of: &mut dyn Iterator<Item = &Task>| {
        of.map(|t| t.ended.unwrap_or(f64::INFINITY))
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let mut early = Vec::new();
    for template in tasks.iter().filter(|t| t.task_type == "qmtemplate") {
        let Some(gone) = destroyed(&template.id) else {
            continue;
        };
        let clones_end = last_end(
            &mut vms
                .iter()
                .filter(|v| v.node == template.node)
                .filter_map(|v| destroyed(&v.vmid.to_string())),
        );
        if gone.started < clones_end {
            early.push(format!(
                "template {} on {} destroyed {:.1} s before its last clone",
                template.id,
                template.node,
                clones_end - gone.started
            ));
        }
    }
    let vms_end = last_end(&mut vms.iter().filter_map(|v| destroyed(&v.vmid.to_string())));
    for file in tasks.iter().filter(|t| t.task_type == "imgdel") {
        if file.started < vms_end {
            early.push(format!(
                "file {} on {} deleted {:.1} s before the last VM",
                file.id,
                file.node,
                vms_end - file.started
            ));
        }
    }
    early
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(kind: &str, node: &str, id: &str, started: f64, ended: f64) -> Task {
        Task {
            upid: format!("UPID:{node}:{kind}:{id}:{started}"),
            node: node.into(),
            task_type: kind.into(),
            id: id.into(),
            user: "provider".into(),
            started,
            ended: Some(ended),
            exitstatus: Some("OK".into()),
        }
    }

    fn vm(vmid: u64, node: &str) -> SimVm {
        SimVm {
            vmid,
            name: format!("vm-{vmid}"),
            node: node.into(),
        }
    }

    #[test]
    fn a_template_destroyed_before_its_last_clone_is_reported() {
        let vms = [vm(101, "pve1"), vm(102, "pve2")];
        let mut tasks = vec![
            task("qmtemplate", "pve1", "100", 1.0, 1.1),
            task("qmdestroy", "pve1", "101", 10.0, 12.0),
            task("qmdestroy", "pve2", "102", 10.0, 30.0),
            task("qmdestroy", "pve1", "100", 13.0, 14.0),
            task("imgdel", "pve1", "local", 31.0, 31.5),
        ];
        // pve1's template after its clone (pve2's later VM is not its
        // clone), the file after every VM.
        assert!(early_deletes(&tasks, &vms).is_empty());
        tasks[3].started = 11.0;
        tasks[4].started = 20.0;
        assert_eq!(
            early_deletes(&tasks, &vms),
            [
                "template 100 on pve1 destroyed 1.0 s before its last clone",
                "file local on pve1 deleted 10.0 s before the last VM"
            ]
        );
    }

    #[test]
    fn the_fleet_ideal_is_the_slowest_node_or_the_write_budget() {
        let limits = FleetLimits {
            requests_per_second: 200,
            max_concurrent_clones_per_node: 8,
        };
        let i = ideal(1000, 4, limits, 0.1);
        // 600 MiB at 50 MiB/s, 3.5 GiB at 120 MiB/s, a tenth of each.
        assert!((i.download - 1.2).abs() < 1e-9, "{i:?}");
        assert!((i.import - 2.987).abs() < 0.001, "{i:?}");
        // 250 VMs a node in 32 rounds of 0.2 s.
        let node = 1.2 + i.import + 0.1 + 32.0 * 0.2 + 0.1 + 0.1 + 0.2;
        assert!((i.critical_path - node).abs() < 1e-9, "{i:?}");
        // 4,000 writes at 200 a second after a burst of 400: 18 s.
        assert!((i.writes - 18.0).abs() < 1e-9 && i.ideal == i.writes);
        let small = ideal(8, 4, limits, 0.1);
        assert_eq!(small.ideal, small.critical_path);
    }

    #[test]
    fn a_fleet_vm_clones_the_image_and_is_labelled() {
        let m = vm_manifest("vm-0001", "ns", "cfg", &["pve1".into()]);
        assert_eq!(m["metadata"]["labels"][WORKLOAD_LABEL], "fleet");
        let p = &m["spec"]["forProvider"];
        assert_eq!(p["clone"], json!({"image": IMAGE, "full": false}));
        assert!(p["disks"][0].get("importFrom").is_none());
        let image = image_manifest("ns", "cfg", &["pve1".into()]);
        let checksum = image["spec"]["forProvider"]["source"]["checksum"]
            .as_str()
            .unwrap();
        assert_eq!(checksum.len(), 64);
    }
}
