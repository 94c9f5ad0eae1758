//! Sharding (issue 18): three replicas of the real binary share three
//! provider configs, each on a simulator of its own, through one Lease per
//! config. While creates are in flight one config's holder is frozen
//! (SIGSTOP) past its Lease and resumed, another's is SIGKILLed and
//! restarted; during the delete a third holder is frozen past its Lease.
//!
//! Every Proxmox request names its replica (the client's `User-Agent`
//! carries the replica identity, which is also the Lease holder), and the
//! Leases are watched throughout (every holder change and renewal, with
//! the holder's own `acquireTime` and `renewTime`). Judged:
//! * every Proxmox write to a config's simulator came from the holder of
//!   that config's Lease at that moment (no two replicas writing one
//!   config in overlapping terms, no write from a paused or replaced
//!   holder after another acquired), and within a Lease duration of that
//!   holder's last renewal seen (no write after its Lease ran out);
//! * every request names a replica;
//! * exactly one VM per resource, all Ready; nothing left after the delete.
//!
//! Each config also has a ProxmoxContainer and a ProxmoxImage (a download),
//! created and deleted through the same freezes and kill: their writes are
//! judged with the VMs' (a paused replica writes nothing for any kind after
//! losing its Lease), and each is Ready, then gone with what it made on
//! Proxmox (the container, the image's file).
//!
//! Size: `CHAOS_SHARD_VMS` VMs per config (2 in `make test`, 6 in `make
//! chaos`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::fleet::{NODES, SEEDED_IMAGE};
use super::replicas::Replicas;
use super::secrets::{Credentials, TOKEN_ID};
use super::sim::Sim;
use super::traffic::RequestLog;
use super::{in_flight, k8s, setup, state};
use crate::support;

/// The provider configs, one per simulator.
const CONFIGS: [&str; 3] = ["shard-a", "shard-b", "shard-c"];
/// The provider's Lease duration (src/reconcile/runtime/shards.rs).
const LEASE: Duration = Duration::from_secs(15);
/// How long a frozen holder stays frozen: well past its Lease.
const FROZEN: Duration = Duration::from_secs(23);
const TIMEOUT: Duration = Duration::from_secs(300);

/// One observation of a config Lease.
#[derive(Clone, Debug)]
struct Seen {
    lease: String,
    holder: Option<String>,
    /// Seconds since the epoch, as the holder wrote them.
    acquired: Option<f64>,
    renewed: Option<f64>,
}

fn epoch(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime) -> f64 {
    t.0.as_millisecond() as f64 / 1000.0
}

/// Polls the config Leases every 100 ms, keeping every change.
fn watch_leases(ns: &str) -> (Arc<Mutex<Vec<Seen>>>, watch::Sender<bool>) {
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let (stop, mut stopped) = watch::channel(false);
    let api: Api<Lease> = Api::namespaced(support::client(), ns);
    let into = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut last: BTreeMap<String, (Option<String>, Option<f64>)> = BTreeMap::new();
        loop {
            let params = ListParams::default().labels("proxmox.crossplane.io/lease=config");
            if let Ok(list) = api.list(&params).await {
                for lease in list.items {
                    let name = lease.metadata.name.clone().unwrap_or_default();
                    let spec = lease.spec.unwrap_or_default();
                    let now = Seen {
                        lease: name.clone(),
                        holder: spec.holder_identity.filter(|h| !h.is_empty()),
                        acquired: spec.acquire_time.as_ref().map(epoch),
                        renewed: spec.renew_time.as_ref().map(epoch),
                    };
                    let key = (now.holder.clone(), now.renewed);
                    if last.get(&name) != Some(&key) {
                        last.insert(name, key);
                        into.lock().unwrap().push(now);
                    }
                }
            }
            tokio::select! {
                _ = stopped.changed() => return,
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    });
    (seen, stop)
}

fn lease_of(ns: &str, config: &str) -> String {
    k8s::config_lease(ns, config)
}

async fn holder(ns: &str, config: &str) -> Option<String> {
    Api::<Lease>::namespaced(support::client(), ns)
        .get_opt(&lease_of(ns, config))
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// The slot of the live replica holding `config`, waiting for one.
async fn holder_slot(replicas: &Replicas, ns: &str, config: &str) -> (usize, String) {
    support::poll(&format!("a live holder of {config}"), TIMEOUT, || async {
        let h = holder(ns, config).await;
        match h.as_deref().and_then(|h| replicas.slot_of(h)) {
            Some(slot) => Ok((slot, h.unwrap_or_default())),
            None => Err(format!("held by {h:?}")),
        }
    })
    .await
}

fn vm_manifest(config: &str, i: usize) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxVM",
        "metadata": {"name": format!("{config}-{i}")},
        "spec": {
            "providerConfigRef": {"kind": "ProviderConfig", "name": config},
            "forProvider": {
                "memory": "512Mi",
                "cpu": {"cores": 1},
                "disks": [{"slot": "scsi0", "storage": "local-lvm", "importFrom": SEEDED_IMAGE, "size": "4Gi"}],
                "networks": [{"slot": "net0", "bridge": "vmbr0"}],
            },
        },
    })
}

/// A container of `config`, from the Debian template every simulator
/// seeds.
fn container_manifest(config: &str) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxContainer",
        "metadata": {"name": format!("{config}-ct")},
        "spec": {
            "providerConfigRef": {"kind": "ProviderConfig", "name": config},
            "forProvider": {
                "node": "pve",
                "template": {"volume": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"},
                "rootfs": {"storage": "local-lvm", "size": "4Gi"},
                "cpu": {"cores": 1},
                "memory": "512Mi",
                "networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr0", "ip": "dhcp"}],
            },
        },
    })
}

/// An image of `config`: one download per simulator (pve-sim's content is
/// the URL's bytes, so their SHA-256 is the checksum).
fn image_manifest(config: &str) -> Value {
    let url = format!("https://images.example/{config}.qcow2");
    let checksum = support::sha256_hex(&url);
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": format!("{config}-img")},
        "spec": {
            "providerConfigRef": {"kind": "ProviderConfig", "name": config},
            "forProvider": {
                "source": {"url": url, "checksum": checksum, "checksumAlgorithm": "sha256"},
                "content": "import",
                "storage": "local",
            },
        },
    })
}

/// The volumes of every node's `import` content.
async fn import_files(sim: &Sim) -> Vec<String> {
    let mut files = Vec::new();
    for node in NODES {
        let content = sim
            .api_get_retrying(&format!(
                "/nodes/{node}/storage/local/content?content=import"
            ))
            .await;
        files.extend(
            content
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["volid"].as_str().map(|v| format!("{node}:{v}"))),
        );
    }
    files.sort();
    files
}

/// Now, in seconds since the epoch.
fn now_epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The replica identity in a request's `User-Agent`.
fn agent(entry: &Value) -> Option<String> {
    let ua = entry["agent"].as_str()?;
    let inner = ua.split_once(" (")?.1.strip_suffix(')')?;
    Some(inner.to_owned())
}

/// A request that changes something.
fn is_write(entry: &Value) -> bool {
    !matches!(entry["method"].as_str(), Some("GET" | "HEAD"))
        && entry["path"].as_str() != Some("/access/ticket")
}

/// The `sending a write` lines of the replica whose Lease identity is
/// `who` (its process name and a suffix).
fn sent_writes_of(replicas: &Replicas, who: &str) -> Vec<in_flight::Sent> {
    replicas
        .logs()
        .into_iter()
        .filter(|(name, _)| who.starts_with(&format!("{name}-")))
        .flat_map(|(_, path)| in_flight::sent_writes_in(&path))
        .collect()
}

/// Whether `who` may write to the config at `t`: the last acquisition of
/// its Lease at or before `t` is `who`'s, and `who` renewed it (or
/// acquired it) less than a Lease duration before `t`.
fn violation(seen: &[Seen], who: &str, t: f64) -> Option<String> {
    let term = seen
        .iter()
        .filter(|s| s.holder.is_some() && s.acquired.is_some_and(|a| a <= t))
        .max_by(|a, b| a.acquired.partial_cmp(&b.acquired).unwrap());
    let Some(term) = term else {
        return Some("before any replica acquired the Lease".into());
    };
    if term.holder.as_deref() != Some(who) {
        return Some(format!(
            "while {:?} held the Lease (acquired at {:.3})",
            term.holder,
            term.acquired.unwrap_or_default()
        ));
    }
    let renewed = seen
        .iter()
        .filter(|s| s.holder.as_deref() == Some(who) && s.acquired == term.acquired)
        .filter_map(|s| s.renewed)
        .filter(|r| *r <= t)
        .fold(f64::MIN, f64::max);
    (t - renewed > LEASE.as_secs_f64()).then(|| {
        format!(
            "{:.1} s after its last renewal: its Lease had run out",
            t - renewed
        )
    })
}

pub async fn run() {
    provider_proxmox::install_crypto_provider();
    let per_config: usize = std::env::var("CHAOS_SHARD_VMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chaos-shards");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    support::install_crds(support::repo_root().join("crds")).await;
    let ns = support::namespace("shards").await;
    let ns = ns.name().to_owned();
    let creds = Credentials::generate();
    let mut sims = Vec::new();
    let mut logs = Vec::new();
    for (i, config) in CONFIGS.iter().enumerate() {
        let sub = dir.join(config);
        std::fs::create_dir_all(&sub).unwrap();
        let sim = Arc::new(Sim::start(&sub, &creds, 1800 + i as u64, 0.05));
        logs.push(RequestLog::start(Arc::clone(&sim)));
        let secret = setup::secret(
            &format!("{config}-credentials"),
            json!({"tokenId": TOKEN_ID, "secret": creds.token_secret}),
        );
        k8s::apply(&Api::<Secret>::namespaced(support::client(), &ns), &secret).await;
        k8s::apply(&k8s::configs(&ns), &setup::provider_config(config, &sim)).await;
        sims.push(sim);
    }
    let (seen, stop_watch) = watch_leases(&ns);
    let replicas =
        Replicas::start_slots(&support::cluster().kubeconfig, &ns, &dir, &['a', 'b', 'c']);
    for config in CONFIGS {
        holder_slot(&replicas, &ns, config).await;
    }
    let vms = k8s::vms(&ns);
    let containers = k8s::containers(&ns);
    let images = k8s::images(&ns);
    let mut seeded = BTreeMap::new();
    for (config, sim) in CONFIGS.iter().zip(&sims) {
        seeded.insert(*config, import_files(sim).await);
    }
    for config in CONFIGS {
        for i in 0..per_config {
            k8s::apply(&vms, &vm_manifest(config, i)).await;
        }
        k8s::apply(&containers, &container_manifest(config)).await;
        k8s::apply(&images, &image_manifest(config)).await;
    }
    let mut log = Vec::new();
    // While creates are in flight: freeze one holder past its Lease, then
    // kill another.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Each freeze: the holder frozen, and when the SIGSTOP was sent.
    let mut freezes: Vec<(String, f64)> = Vec::new();
    let (slot, who) = holder_slot(&replicas, &ns, CONFIGS[0]).await;
    freezes.push((who.clone(), now_epoch()));
    assert!(replicas.freeze(slot), "a replica to freeze");
    log.push(format!(
        "froze {who} (holder of {}) for {FROZEN:?}",
        CONFIGS[0]
    ));
    tokio::time::sleep(FROZEN).await;
    replicas.thaw(slot);
    let (slot, who) = holder_slot(&replicas, &ns, CONFIGS[1]).await;
    replicas.kill(slot);
    let killed_at = now_epoch();
    log.push(format!("killed {who} (holder of {})", CONFIGS[1]));
    support::poll("every ProxmoxVM Ready", TIMEOUT, || async {
        let all = k8s::list(&vms).await;
        let ready = all
            .iter()
            .filter(|vm| k8s::condition(vm, "Ready").is_some_and(|c| c["status"] == "True"))
            .count();
        if ready == all.len() && ready == per_config * CONFIGS.len() {
            Ok(())
        } else {
            Err(format!("{ready} of {} Ready", all.len()))
        }
    })
    .await;
    for (kinds, api) in [("ProxmoxContainer", &containers), ("ProxmoxImage", &images)] {
        support::poll(&format!("every {kinds} Ready"), TIMEOUT, || async {
            let all = k8s::list(api).await;
            let ready = all
                .iter()
                .filter(|o| k8s::condition(o, "Ready").is_some_and(|c| c["status"] == "True"))
                .count();
            if ready == all.len() && ready == CONFIGS.len() {
                Ok(())
            } else {
                Err(format!("{ready} of {} Ready", all.len()))
            }
        })
        .await;
    }
    let mut failures = Vec::new();
    for (config, sim) in CONFIGS.iter().zip(&sims) {
        let mut owners: BTreeMap<String, usize> = BTreeMap::new();
        for vm in state::vms(sim).await {
            if let Some((resource, _)) = vm.owner {
                *owners.entry(resource).or_default() += 1;
            }
        }
        for i in 0..per_config {
            let resource = format!("{ns}/{config}-{i}");
            let n = owners.get(&resource).copied().unwrap_or(0);
            if n != 1 {
                failures.push(format!("{resource}: {n} VMs on its simulator"));
            }
        }
        if owners.len() != per_config {
            failures.push(format!("{config}: VMs of other resources: {owners:?}"));
        }
    }
    // The delete, with a holder frozen past its Lease meanwhile.
    k8s::delete_all(&vms).await;
    k8s::delete_all(&containers).await;
    k8s::delete_all(&images).await;
    let (slot, who) = holder_slot(&replicas, &ns, CONFIGS[2]).await;
    freezes.push((who.clone(), now_epoch()));
    assert!(replicas.freeze(slot), "a replica to freeze");
    log.push(format!(
        "froze {who} (holder of {}) for {FROZEN:?} while deleting",
        CONFIGS[2]
    ));
    tokio::time::sleep(FROZEN).await;
    replicas.thaw(slot);
    support::poll(
        "every ProxmoxVM, ProxmoxContainer and ProxmoxImage gone",
        TIMEOUT,
        || async {
            match (
                k8s::list(&vms).await.len(),
                k8s::list(&containers).await.len(),
                k8s::list(&images).await.len(),
            ) {
                (0, 0, 0) => Ok(()),
                (vms, cts, imgs) => Err(format!(
                    "{vms} VMs, {cts} containers and {imgs} images left"
                )),
            }
        },
    )
    .await;
    for (config, sim) in CONFIGS.iter().zip(&sims) {
        let left: Vec<_> = state::vms(sim)
            .await
            .into_iter()
            .filter(|vm| !vm.template)
            .map(|vm| vm.describe())
            .collect();
        if !left.is_empty() {
            failures.push(format!("{config}: left after the delete: {left:?}"));
        }
        let lxc = sim.api_get_retrying("/cluster/resources?type=vm").await;
        let cts: Vec<_> = lxc
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["type"] == "lxc")
            .collect();
        if !cts.is_empty() {
            failures.push(format!(
                "{config}: containers left after the delete: {cts:?}"
            ));
        }
        // The image's downloads were made, then deleted: each node's
        // `import` content is what the simulator seeded.
        let left = import_files(sim).await;
        if left != seeded[*config] {
            failures.push(format!(
                "{config}: import content after the delete {left:?}, seeded {:?}",
                seeded[*config]
            ));
        }
    }
    // A last look at the Leases, then the judgement of every request.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = stop_watch.send(true);
    replicas.stop().await;
    let seen = seen.lock().unwrap().clone();
    // Failover, as an operator sees it: from the SIGKILL to another term of
    // the killed holder's config (the Lease's acquireTime, written by the
    // replica that took it; one machine, one clock).
    let lease = lease_of(&ns, CONFIGS[1]);
    let failover = seen
        .iter()
        .filter(|s| s.lease == lease)
        .filter_map(|s| s.acquired)
        .find(|acquired| *acquired >= killed_at)
        .map(|acquired| acquired - killed_at);
    match failover {
        Some(secs) => log.push(format!(
            "{} held again {secs:.1} s after the kill",
            CONFIGS[1]
        )),
        None => failures.push(format!("{}: no term acquired after the kill", CONFIGS[1])),
    }
    let mut writes = 0;
    let mut by_replica: BTreeMap<String, usize> = BTreeMap::new();
    let mut excused = Vec::new();
    let mut sent_by: BTreeMap<String, Vec<in_flight::Sent>> = BTreeMap::new();
    for ((config, sim), requests) in CONFIGS.iter().zip(&sims).zip(&logs) {
        let lease = lease_of(&ns, config);
        let of_config: Vec<Seen> = seen.iter().filter(|s| s.lease == lease).cloned().collect();
        let server = sim.base_url.trim_start_matches("https://").to_owned();
        let mut judged = Vec::new();
        for entry in requests.finish(sim).await {
            // The suite's own reads.
            if entry["user"].as_str() == Some("root@pam!checker") {
                continue;
            }
            let Some(who) = agent(&entry) else {
                failures.push(format!("{config}: a request without a replica: {entry}"));
                continue;
            };
            *by_replica.entry(who.clone()).or_default() += 1;
            if is_write(&entry) {
                judged.push((who, entry));
            }
        }
        writes += judged.len();
        for (who, entry) in &judged {
            let t = entry["time"].as_f64().unwrap_or_default();
            let Some(why) = violation(&of_config, who, t) else {
                continue;
            };
            let (method, path) = (
                entry["method"].as_str().unwrap_or_default(),
                entry["path"].as_str().unwrap_or_default(),
            );
            let write = in_flight::Received {
                at: t,
                method,
                path,
            };
            let frozen_at = freezes
                .iter()
                .filter(|(frozen, at)| frozen == who && *at <= t)
                .map(|(_, at)| *at)
                .max_by(f64::total_cmp);
            let let_go = frozen_at.and_then(|frozen_at| {
                let sent = sent_by
                    .entry(who.clone())
                    .or_insert_with(|| sent_writes_of(&replicas, who));
                let received: Vec<_> = judged
                    .iter()
                    .filter(|(w, _)| w == who)
                    .map(|(_, e)| in_flight::Received {
                        at: e["time"].as_f64().unwrap_or_default(),
                        method: e["method"].as_str().unwrap_or_default(),
                        path: e["path"].as_str().unwrap_or_default(),
                    })
                    .collect();
                in_flight::let_go_before_freeze(sent, &received, &server, frozen_at, write)
                    .map(|line| (frozen_at, line))
            });
            match let_go {
                Some((frozen_at, line)) => excused.push(format!(
                    "{config}: {who}'s {method} {path}, let go {:.3} s before its SIGSTOP, received {:.1} s after it",
                    frozen_at - line,
                    t - frozen_at
                )),
                None => failures.push(format!(
                    "{config}: {who} wrote #{} {method} {path} at {t:.3} {why}",
                    entry["seq"]
                )),
            }
        }
        if requests.missed() > 0 {
            failures.push(format!("{config}: {} requests missed", requests.missed()));
        }
    }
    if !excused.is_empty() {
        log.push(format!(
            "in flight when frozen (excused, see in_flight.rs): {}",
            excused.join(", ")
        ));
    }
    let terms = seen
        .iter()
        .map(|s| {
            (
                s.lease.clone(),
                s.holder.clone(),
                s.acquired.map(|a| a as i64),
            )
        })
        .collect::<std::collections::BTreeSet<_>>();
    eprintln!(
        "shards: {} VMs, {} containers and {} images on {} configs; {}; {writes} Proxmox writes judged; requests by replica {by_replica:?}; {} Lease terms seen",
        per_config * CONFIGS.len(),
        CONFIGS.len(),
        CONFIGS.len(),
        CONFIGS.len(),
        log.join("; "),
        terms.len()
    );
    assert!(writes > 0, "the run wrote nothing to Proxmox");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
