//! ProxmoxBackupJobs on the real control plane and pve-sim: the job's
//! VMID list follows its selector as VMs and containers come and go (woken
//! by their watches, not by a resync), a VM of another namespace with the same
//! labels is never in it, a schedule Proxmox refuses is a condition
//! naming the field with nothing created, and deleting the job removes it.

use kube::api::DeleteParams;
use provider_proxmox::api::ProxmoxBackupJob;
use provider_proxmox::reconcile::managed::names::derived;
use serde_json::{Value, json};

use crate::firewall::{delete, wait, wait_gone, wait_ready, wait_synced};
use crate::reconcile::{Controller, DEADLINE, Env, Options, containers, manifests};
use crate::support;

fn backup_job(name: &str, schedule: &str) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxBackupJob",
        "metadata": {"name": name},
        "spec": {
            "forProvider": {
                "schedule": schedule,
                "storage": "local",
                "mode": "snapshot",
                "compress": "zstd",
                "pruneBackups": {"keepLast": 3},
                "guestSelector": {"matchLabels": {"tier": "web"}},
            },
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

fn tiered_vm(name: &str, tier: &str) -> Value {
    let mut vm = manifests::vm(name, manifests::imported(json!({})));
    vm["metadata"]["labels"] = json!({"tier": tier});
    vm
}

/// Job `id` on pve-sim.
async fn job_on_sim(env: &Env, id: &str) -> Option<pve_client::BackupJob> {
    let jobs = env.sim.client().backup_jobs().await.unwrap();
    jobs.into_iter().find(|j| j.id == id)
}

/// The VMIDs of job `id` on pve-sim, `None` when there is no such job.
async fn vmids_on_sim(env: &Env, id: &str) -> Option<Vec<u32>> {
    let job = job_on_sim(env, id).await?;
    let mut ids: Vec<u32> = job
        .vmid
        .unwrap_or_default()
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    ids.sort_unstable();
    Some(ids)
}

async fn wait_vmids(env: &Env, id: &str, want: &[u32], what: &str) {
    let want = want.to_vec();
    support::poll(what, DEADLINE, || async {
        let have = vmids_on_sim(env, id).await;
        (have.as_ref() == Some(&want))
            .then_some(())
            .ok_or_else(|| format!("{have:?}"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_follows_its_selector_in_its_namespace_only_and_goes_with_its_resource() {
    // A resync far beyond the test: the job follows the VMs because their
    // changes wake it, not because it looks again.
    let options = Options {
        provider: json!({"resyncInterval": "10m"}),
        ..Options::default()
    };
    let env = Env::start_with("backup-a", options).await;
    let ns = env.ns.name().to_owned();
    let id = derived(&ns, "nightly", 50);

    env.apply(&backup_job("nightly", "mon..fri 02:00")).await;
    let empty: ProxmoxBackupJob = wait(
        &ns,
        "nightly",
        "says it has no guest",
        |j: &ProxmoxBackupJob| {
            let ready = j
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready").cloned());
            ready
                .filter(|c| {
                    c.message
                        .as_deref()
                        .is_some_and(|m| m.contains("guestSelector matches no"))
                })
                .map(|_| j.clone())
                .ok_or_else(|| "not yet".into())
        },
    )
    .await;
    assert!(empty.status.unwrap().at_provider.guests.is_empty());
    assert_eq!(
        vmids_on_sim(&env, &id).await,
        None,
        "no guest: nothing created (Proxmox needs one)"
    );

    env.apply(&tiered_vm("web-1", "web")).await;
    env.apply(&tiered_vm("web-2", "web")).await;
    env.apply(&tiered_vm("db-1", "db")).await;
    for vm in ["web-1", "web-2", "db-1"] {
        env.wait_ready(vm).await;
    }
    let (web1, web2) = (env.vmid("web-1").await, env.vmid("web-2").await);
    let mut both = vec![web1, web2];
    both.sort_unstable();
    wait_vmids(&env, &id, &both, "the web VMs joined, not the db one").await;
    let ready: ProxmoxBackupJob = wait_ready(&ns, "nightly").await;
    let at = ready.status.unwrap().at_provider;
    assert_eq!(at.id.as_deref(), Some(id.as_str()));
    let mut names: Vec<String> = at.guests.iter().map(|g| g.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["web-1", "web-2"]);
    let next = at.next_run.expect("nextRun from the job listing");
    assert!(next.ends_with("T02:00:00Z"), "{next}");
    let job = job_on_sim(&env, &id).await.expect("the job on pve-sim");
    assert_eq!(
        (
            job.schedule.as_deref(),
            job.compress.as_deref(),
            job.prune_backups.get("keep-last")
        ),
        (Some("mon..fri 02:00"), Some("zstd"), Some(&3))
    );

    // A container joins too (woken by the container watch).
    let mut ct = containers::container("web-ct", containers::debian(json!({})));
    ct["metadata"]["labels"] = json!({"tier": "web"});
    env.apply(&ct).await;
    let ct_vmid = env.wait_container_ready("web-ct").await;
    let mut three = vec![web1, web2, ct_vmid];
    three.sort_unstable();
    wait_vmids(&env, &id, &three, "the web container joined").await;

    // Namespace B: its own ProviderConfig and controller, the same
    // Proxmox, and a VM with the same labels.
    let b = support::namespace("backup-b").await;
    let ns_b = b.name().to_owned();
    for obj in [
        manifests::credentials(),
        manifests::provider_config(&env.sim, &json!({})),
        tiered_vm("web-b", "web"),
    ] {
        support::apply_objects(&[serde_json::from_value(obj).unwrap()], Some(&ns_b)).await;
    }
    let mut settings_b = env.settings();
    settings_b.namespace = Some(ns_b.clone());
    settings_b.identity = format!("test-{ns_b}");
    let controller_b = Controller::start(support::client(), settings_b).await;
    let vm_b: provider_proxmox::api::ProxmoxVM = wait(
        &ns_b,
        "web-b",
        "a VMID",
        |vm: &provider_proxmox::api::ProxmoxVM| {
            vm.external_name()
                .map(|_| vm.clone())
                .ok_or_else(|| "no VMID yet".into())
        },
    )
    .await;
    let vmid_b: u32 = vm_b.external_name().unwrap().parse().unwrap();

    // A VM leaves: the job follows (and was computed again after B's VM
    // had its VMID, which it never takes).
    env.vms()
        .delete("web-2", &DeleteParams::default())
        .await
        .unwrap();
    let mut two = vec![web1, ct_vmid];
    two.sort_unstable();
    wait_vmids(&env, &id, &two, "web-2 left").await;
    assert!(!vmids_on_sim(&env, &id).await.unwrap().contains(&vmid_b));
    env.containers()
        .delete("web-ct", &DeleteParams::default())
        .await
        .unwrap();
    wait_vmids(&env, &id, &[web1], "the container left").await;
    // And by its label.
    env.patch_vm("web-1", json!({"metadata": {"labels": {"tier": "db"}}}))
        .await;
    support::poll(
        "the job disabled, never run without guests",
        DEADLINE,
        || async {
            match job_on_sim(&env, &id).await {
                Some(j) if j.enabled == Some(false) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    // A web VM again: enabled with it.
    env.patch_vm("db-1", json!({"metadata": {"labels": {"tier": "web"}}}))
        .await;
    let db1 = env.vmid("db-1").await;
    wait_vmids(&env, &id, &[db1], "db-1 joined by its label").await;
    let _: ProxmoxBackupJob = wait_ready(&ns, "nightly").await;

    // A schedule Proxmox refuses: said naming the field, nothing created.
    env.apply(&backup_job("bad", "25:00")).await;
    let refused = wait_synced::<ProxmoxBackupJob>(&ns, "bad", "ReconcileError").await;
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains("spec.forProvider.schedule")
            && message.contains("value '25' out of range"),
        "{message}"
    );
    assert_eq!(vmids_on_sim(&env, &derived(&ns, "bad", 50)).await, None);

    // Deleting the resources removes the jobs.
    for job in ["nightly", "bad"] {
        delete::<ProxmoxBackupJob>(&ns, job).await;
        wait_gone::<ProxmoxBackupJob>(&ns, job).await;
    }
    assert_eq!(vmids_on_sim(&env, &id).await, None, "deleted on Proxmox");
    assert!(env.sim.client().backup_jobs().await.unwrap().is_empty());

    let vms_b: kube::Api<provider_proxmox::api::ProxmoxVM> =
        kube::Api::namespaced(support::client(), &ns_b);
    vms_b
        .delete("web-b", &DeleteParams::default())
        .await
        .unwrap();
    for vm in ["web-1", "db-1"] {
        env.vms()
            .delete(vm, &DeleteParams::default())
            .await
            .unwrap();
    }
    for vm in ["web-1", "web-2", "db-1"] {
        env.wait_gone(vm).await;
    }
    env.wait_container_gone("web-ct").await;
    wait_gone::<provider_proxmox::api::ProxmoxVM>(&ns_b, "web-b").await;
    controller_b.stop().await;
}

/// The rbac tests' backup workload: a job of every guest of the
/// namespace, Ready once one has a VMID.
pub async fn workload(env: &Env) {
    let mut job = backup_job("all", "daily");
    job["spec"]["forProvider"]["guestSelector"] = json!({"matchLabels": {}});
    env.apply(&job).await;
    let _: ProxmoxBackupJob = wait_ready(env.ns.name(), "all").await;
}

/// Deletes [`workload`]'s job and waits until it is gone.
pub async fn remove(env: &Env) {
    delete::<ProxmoxBackupJob>(env.ns.name(), "all").await;
    wait_gone::<ProxmoxBackupJob>(env.ns.name(), "all").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_by_pool_names_the_pool_of_its_namespace_on_proxmox() {
    let env = Env::start("backup-pool").await;
    let ns = env.ns.name().to_owned();
    let by_pool = |name: &str, pool: &str| {
        let mut job = backup_job(name, "sat");
        let fp = &mut job["spec"]["forProvider"];
        fp.as_object_mut().unwrap().remove("guestSelector");
        fp["pool"] = json!(pool);
        job
    };
    env.apply(&crate::pools::pool("team", json!({"poolId": "team-pve"})))
        .await;
    crate::pools::wait_ready(&ns, "team").await;
    env.apply(&by_pool("weekly", "team")).await;
    let ready: ProxmoxBackupJob = wait_ready(&ns, "weekly").await;
    let id = ready.status.unwrap().at_provider.id.unwrap();
    let job = job_on_sim(&env, &id).await.expect("the job on pve-sim");
    assert_eq!(
        (job.pool.as_deref(), job.vmid.as_deref()),
        (Some("team-pve"), None),
        "the pool's Proxmox ID, no VMID list"
    );

    // A ProxmoxPool the namespace does not have: said, nothing created.
    env.apply(&by_pool("lost", "nope")).await;
    let _: ProxmoxBackupJob = wait(
        &ns,
        "lost",
        "says the pool is missing",
        |j: &ProxmoxBackupJob| {
            j.status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .and_then(|c| c.message.clone())
                .filter(|m| m.contains("no ProxmoxPool named nope"))
                .map(|_| j.clone())
                .ok_or_else(|| "not yet".into())
        },
    )
    .await;
    assert_eq!(vmids_on_sim(&env, &derived(&ns, "lost", 50)).await, None);

    for job in ["weekly", "lost"] {
        delete::<ProxmoxBackupJob>(&ns, job).await;
        wait_gone::<ProxmoxBackupJob>(&ns, job).await;
    }
    assert!(env.sim.client().backup_jobs().await.unwrap().is_empty());
    delete::<provider_proxmox::api::ProxmoxPool>(&ns, "team").await;
    wait_gone::<provider_proxmox::api::ProxmoxPool>(&ns, "team").await;
}

/// The job's last run in its status: run as the scheduler runs it (the
/// sim's control), its `vzdump` task is found in the cluster's task list
/// and named by its log, and the status shows its UPID, end and outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_last_run_is_shown_with_its_outcome() {
    let env = Env::start("backup-runs").await;
    let ns = env.ns.name().to_owned();
    let id = derived(&ns, "nightly", 50);
    env.apply(&tiered_vm("web-1", "web")).await;
    env.wait_ready("web-1").await;
    env.apply(&backup_job("nightly", "mon..fri 02:00")).await;
    let ready: ProxmoxBackupJob = wait_ready(&ns, "nightly").await;
    assert_eq!(
        ready.status.unwrap().at_provider.last_run,
        None,
        "never ran"
    );

    let upids = env.sim.run_backup_job(&id).await;
    let [upid] = upids.as_slice() else {
        panic!("one node, one task: {upids:?}");
    };
    let run = wait(
        &ns,
        "nightly",
        "shows its last run",
        |j: &ProxmoxBackupJob| {
            j.status
                .as_ref()
                .and_then(|s| s.at_provider.last_run.clone())
                .filter(|r| r.upid == *upid)
                .ok_or_else(|| format!("{:?}", j.status.as_ref().map(|s| &s.at_provider.last_run)))
        },
    )
    .await;
    assert!(run.succeeded, "{run:?}");
    assert_eq!((run.status.as_str(), run.node.as_str()), ("OK", "pve"));
    assert!(run.end_time.is_some(), "{run:?}");
    let vmid = env.vmid("web-1").await;
    assert!(
        upid.contains(&format!(":vzdump:{vmid}:root@pam:")),
        "{upid}"
    );
}
