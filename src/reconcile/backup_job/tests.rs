//! The backup job's plan, table by table: drift of every managed field,
//! the VMIDs following the selector, a job without guests, ownership,
//! deletion.

use std::collections::BTreeMap;

use serde_json::json;

use super::guests::{Guest, selected};
use super::plan::{Guests, Job, JobPatch, refusal};
use crate::api::backup_job::BackupGuest;
use crate::api::meta::Capabilities;
use crate::api::{ProxmoxContainer, ProxmoxVM};
use crate::reconcile::managed::crud::{Call, Decision, Diff, Observed, plan};

const ALL: Capabilities = Capabilities {
    create: true,
    update: true,
    delete: true,
};

fn job(vmids: &[u32]) -> Job {
    Job {
        comment: "marker".into(),
        schedule: "mon..fri 02:00".into(),
        storage: Some("pbs".into()),
        mode: Some("snapshot".into()),
        compress: Some("zstd".into()),
        prune_backups: BTreeMap::from([("keep-last".into(), 3)]),
        notes_template: Some("{{guestname}}".into()),
        enabled: true,
        protected: Some(true),
        node: Some("pve".into()),
        guests: Guests::Vmids(vmids.to_vec()),
        next_run: None,
        last_run: None,
    }
}

fn ours(job: Job) -> Observed<Job> {
    Observed::Found {
        object: job,
        ours: true,
    }
}

#[test]
fn each_managed_field_drifted_is_corrected_and_a_reapply_sends_nothing() {
    let want = job(&[100, 101]);
    let mut seen = want.clone();
    seen.next_run = Some(1_700_000_000);
    assert_eq!(want.diff(&seen), None, "next-run is observed, not managed");
    type Change = fn(&mut Job);
    let rows: [(&str, Change); 11] = [
        ("comment", |j| j.comment = "someone's note".into()),
        ("schedule", |j| j.schedule = "daily".into()),
        ("storage", |j| j.storage = Some("local".into())),
        ("mode", |j| j.mode = Some("stop".into())),
        ("compress", |j| j.compress = None),
        ("pruneBackups", |j| j.prune_backups.clear()),
        ("notesTemplate", |j| j.notes_template = Some("x".into())),
        ("enabled", |j| j.enabled = false),
        ("protected", |j| j.protected = Some(false)),
        ("node", |j| j.node = Some("pve2".into())),
        ("guests", |j| j.guests = Guests::Vmids(vec![100])),
    ];
    for (field, change) in rows {
        let mut drifted = want.clone();
        change(&mut drifted);
        assert_eq!(
            plan(&want, &ours(drifted), ALL, false),
            Decision::Call(Call::Update(JobPatch {
                fields: vec![field],
                job: want.clone(),
            })),
            "{field}"
        );
    }
}

#[test]
fn a_field_the_spec_leaves_out_is_not_managed() {
    let mut want = job(&[100]);
    want.storage = None;
    want.mode = None;
    want.prune_backups.clear();
    want.protected = None;
    let seen = job(&[100]);
    assert_eq!(want.diff(&seen), None);
}

fn guest(name: &str, kind: &'static str, tier: &str, vmid: Option<u32>) -> Guest {
    Guest {
        name: name.into(),
        kind,
        labels: BTreeMap::from([("tier".into(), tier.into())]),
        vmid,
    }
}

fn web() -> BTreeMap<String, String> {
    BTreeMap::from([("tier".into(), "web".into())])
}

#[test]
fn the_vmids_follow_the_selector_as_guests_come_and_go() {
    let mut guests = vec![
        guest("web-2", "ProxmoxVM", "web", Some(102)),
        guest("db", "ProxmoxVM", "db", Some(103)),
        guest("web-ct", "ProxmoxContainer", "web", Some(101)),
        guest("web-new", "ProxmoxVM", "web", None),
    ];
    let ids = |g: &[Guest]| -> Vec<u32> { selected(&web(), g).iter().map(|g| g.vmid).collect() };
    assert_eq!(
        ids(&guests),
        [101, 102],
        "by VMID; a guest without a VMID yet is left out"
    );
    guests[3].vmid = Some(104);
    assert_eq!(ids(&guests), [101, 102, 104], "added once it has one");
    guests.remove(0);
    assert_eq!(ids(&guests), [101, 104], "a guest gone is dropped");
    assert_eq!(
        selected(&web(), &guests)[0],
        BackupGuest {
            name: "web-ct".into(),
            kind: "ProxmoxContainer".into(),
            vmid: 101
        }
    );
    let want = job(&[101, 104]);
    assert_eq!(
        plan(&want, &ours(job(&[101, 102])), ALL, false),
        Decision::Call(Call::Update(JobPatch {
            fields: vec!["guests"],
            job: want.clone()
        }))
    );
}

#[test]
fn a_guest_of_another_namespace_is_never_a_candidate() {
    // The caches hand the selector only the job's namespace's guests.
    let vm = |ns: &str, name: &str| -> ProxmoxVM {
        serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProxmoxVM",
            "metadata": {"name": name, "namespace": ns, "labels": {"tier": "web"},
                "annotations": {"crossplane.io/external-name": "100"}},
            "spec": {"forProvider": {"node": "pve"}},
        }))
        .unwrap()
    };
    let (pools, _) = kube::runtime::reflector::store();
    let (vms, mut writer) = kube::runtime::reflector::store();
    let (containers, _) = kube::runtime::reflector::store();
    for v in [vm("team-a", "mine"), vm("team-b", "theirs")] {
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(
            kube::core::DeserializeGuard(Ok(v)),
        ));
    }
    let caches = super::Caches {
        pools,
        vms,
        containers,
        runs: Default::default(),
    };
    let job: crate::api::ProxmoxBackupJob = serde_json::from_value(json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProxmoxBackupJob",
        "metadata": {"name": "nightly", "namespace": "team-a"},
        "spec": {"forProvider": {"schedule": "daily", "guestSelector": {"matchLabels": {"tier": "web"}}}},
    }))
    .unwrap();
    let names: Vec<String> = caches.guests(&job).into_iter().map(|g| g.name).collect();
    assert_eq!(names, ["mine"]);
}

#[test]
fn guests_give_their_recorded_vmid_until_deleted() {
    let mut vm: ProxmoxVM = serde_json::from_value(json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProxmoxVM",
        "metadata": {"name": "web", "namespace": "ns", "labels": {"tier": "web"},
            "annotations": {"crossplane.io/external-name": "120"}},
        "spec": {"forProvider": {"node": "pve"}},
    }))
    .unwrap();
    assert_eq!(Guest::vm(&vm).unwrap().vmid, Some(120));
    vm.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    assert_eq!(Guest::vm(&vm), None, "a guest being deleted is left out");
    let ct: ProxmoxContainer = serde_json::from_value(json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProxmoxContainer",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"forProvider": {"node": "pve", "template": {"volume": "local:vztmpl/x.tar.zst"},
            "rootfs": {"storage": "local-lvm", "size": "8Gi"}}},
    }))
    .unwrap();
    assert_eq!(Guest::container(&ct).unwrap().vmid, None, "no VMID yet");
}

#[test]
fn a_job_without_guests_is_never_created_and_an_existing_one_is_disabled() {
    let why = "spec.forProvider.guestSelector matches nothing".to_owned();
    let mut want = job(&[]);
    want.guests = Guests::Nothing(why.clone());
    assert_eq!(
        plan(&want, &Observed::NotFound, ALL, false),
        Decision::Empty(why.clone()),
        "nothing is sent: Proxmox refuses a job without guests"
    );
    let mut disabled = job(&[100]);
    disabled.enabled = false;
    assert_eq!(
        plan(&want, &ours(job(&[100])), ALL, false),
        Decision::Call(Call::Update(JobPatch {
            fields: vec!["enabled"],
            job: disabled.clone()
        })),
        "disabled, its last VMIDs kept, so it never runs"
    );
    assert_eq!(
        plan(&want, &ours(disabled), ALL, false),
        Decision::Empty(why)
    );
    let back = job(&[100, 105]);
    let mut seen = job(&[100]);
    seen.enabled = false;
    assert_eq!(
        plan(&back, &ours(seen), ALL, false),
        Decision::Call(Call::Update(JobPatch {
            fields: vec!["enabled", "guests"],
            job: back.clone()
        })),
        "guests back: enabled with them in one call"
    );
}

#[test]
fn another_s_job_is_never_changed_or_deleted_and_delete_removes_ours() {
    let want = job(&[100]);
    let foreign = Observed::Found {
        object: job(&[200]),
        ours: false,
    };
    assert_eq!(plan(&want, &foreign, ALL, false), Decision::NotOwned);
    assert_eq!(
        plan(&want, &foreign, ALL, true),
        Decision::Released { orphaned: true }
    );
    assert_eq!(
        plan(&want, &ours(job(&[100])), ALL, true),
        Decision::Call(Call::Delete)
    );
    assert_eq!(
        plan(&want, &Observed::NotFound, ALL, true),
        Decision::Released { orphaned: false }
    );
    assert_eq!(
        plan(&want, &Observed::NotFound, ALL, false),
        Decision::Call(Call::Create(want.clone()))
    );
}

#[test]
fn what_is_sent_and_read_back_is_the_same_job() {
    let want = job(&[100, 101]);
    let sent = super::pass::options_of(&want);
    assert_eq!(sent.vmid.as_deref(), Some("100,101"));
    assert_eq!(sent.pool, None);
    assert_eq!(sent.prune_backups.as_deref(), Some("keep-last=3"));
    let listed: pve_client::BackupJob = serde_json::from_value(json!({
        "id": "nightly-1", "comment": "marker", "schedule": "mon..fri 02:00",
        "storage": "pbs", "mode": "snapshot", "compress": "zstd",
        "prune-backups": {"keep-last": 3}, "notes-template": "{{guestname}}",
        "enabled": 1, "protected": 1, "node": "pve", "vmid": "101,100",
    }))
    .unwrap();
    assert_eq!(want.diff(&super::pass::observed_of(listed)), None);
    let mut pooled = want.clone();
    pooled.guests = Guests::Pool("team-a".into());
    let sent = super::pass::options_of(&pooled);
    assert_eq!((sent.vmid, sent.pool.as_deref()), (None, Some("team-a")));
}

#[test]
fn a_refusal_names_the_spec_field() {
    assert_eq!(
        refusal(
            "invalid request: Parameter verification failed. (schedule: invalid calendar event '25:00' - value '25' out of range)"
        ),
        "spec.forProvider.schedule: invalid request: Parameter verification failed. (schedule: invalid calendar event '25:00' - value '25' out of range)"
    );
    assert_eq!(
        refusal("forbidden: Permission check failed (/, Sys.Modify)"),
        "forbidden: Permission check failed (/, Sys.Modify)"
    );
}

fn task(upid_id: &str, start: i64, user: &str, status: Option<&str>) -> pve_client::TaskListEntry {
    pve_client::TaskListEntry {
        upid: format!("UPID:pve:0000A1B2:0001C3D4:{start:08X}:vzdump:{upid_id}:{user}:"),
        task_type: Some("vzdump".into()),
        id: Some(upid_id.into()),
        user: Some(user.into()),
        starttime: Some(start),
        endtime: status.map(|_| start + 60),
        status: status.map(str::to_owned),
    }
}

#[test]
fn a_run_is_an_ended_vzdump_of_root_newer_than_the_recorded_one() {
    use super::plan::{run_candidates, run_of};
    let tasks = vec![
        task("100", 1_000, "root@pam", Some("OK")),
        task("", 2_000, "root@pam", Some("job errors")),
        task("100", 3_000, "root@pam", None),
        task("100", 4_000, "ops@pve", Some("OK")),
        task("999", 5_000, "root@pam", Some("OK")),
    ];
    let upids = |c: Vec<&pve_client::TaskListEntry>| -> Vec<i64> {
        c.iter().filter_map(|t| t.starttime).collect()
    };
    assert_eq!(
        upids(run_candidates(&tasks, Some(&[100, 101]), None)),
        [2_000, 1_000],
        "newest first; not running, not a person's, not another guest's"
    );
    assert_eq!(
        upids(run_candidates(&tasks, None, None)),
        [5_000, 2_000, 1_000],
        "a pool's job: any guest"
    );
    let recorded = run_of(&tasks[1]).expect("a run");
    assert_eq!(
        (
            recorded.start_time,
            recorded.succeeded,
            recorded.status.as_str()
        ),
        (2_000, false, "job errors")
    );
    assert_eq!(recorded.node, "pve");
    assert!(recorded.end_time.is_some());
    assert!(
        run_candidates(&tasks, Some(&[100]), Some(&recorded)).is_empty(),
        "nothing newer than the recorded run"
    );
    assert!(run_of(&tasks[0]).is_some_and(|r| r.succeeded));
    let warned = task("100", 6_000, "root@pam", Some("WARNINGS: 2"));
    assert!(run_of(&warned).is_some_and(|r| r.succeeded));
}
