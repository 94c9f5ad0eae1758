//! The image plan, table by table.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::names;
use super::plan::{self, Call, CallKind, Input, Plan, Site, Step, Target, Timing, Users, World};
use crate::api::ProxmoxImage;
use crate::api::condition::{ConditionType, find};
use crate::api::image::LocationPhase;
use crate::reconcile::common::finalizer::FINALIZER;
use crate::reconcile::common::provider::ProviderState;
use crate::reconcile::common::tasks::{TaskOutcome, TaskState};
use pve_client::Upid;

const NOW: i64 = 1_800_000_000;
const SUM: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn now() -> Timestamp {
    Timestamp::from_second(NOW).unwrap()
}

fn timing() -> Timing {
    Timing {
        poll: Duration::from_secs(3),
        resync: Duration::from_secs(60),
        task_timeout: Duration::from_secs(600),
    }
}

fn image(for_provider: Value, status: Value) -> ProxmoxImage {
    serde_json::from_value(json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": "noble", "namespace": "ns", "uid": "u1", "generation": 2,
                     "finalizers": [FINALIZER]},
        "spec": {"forProvider": for_provider},
        "status": status,
    }))
    .unwrap()
}

fn url_spec() -> Value {
    json!({
        "source": {"url": "https://images.example/noble.img", "checksum": SUM,
                   "checksumAlgorithm": "sha256"},
        "content": "import",
    })
}

fn volume(img: &ProxmoxImage) -> String {
    names::source(&img.spec.for_provider, "ns", "noble")
        .unwrap()
        .1
        .unwrap()
}

/// A status saying this image's own task wrote `v` at these nodes.
fn made(nodes: &[&str], v: &str) -> Value {
    let locations: Vec<Value> = nodes
        .iter()
        .map(|n| json!({"node": n, "storage": "local", "phase": "Ready", "made": [v]}))
        .collect();
    json!({"atProvider": {"locations": locations}})
}

/// The same image with this status.
fn with_status(img: &ProxmoxImage, status: Value) -> ProxmoxImage {
    let mut img = img.clone();
    img.status = serde_json::from_value(status).unwrap();
    img
}

fn file(img: &ProxmoxImage) -> String {
    volume(img).rsplit('/').next().unwrap().to_owned()
}

fn upid(node: &str, type_: &str, id: &str) -> Upid {
    Upid::parse(&format!(
        "UPID:{node}:00001234:00005678:6B49D200:{type_}:{id}:root@pam:"
    ))
    .unwrap()
}

/// A status saying the image wrote down, at NOW, that it was sending its
/// download at these nodes (and recorded no task: a lost status write).
fn sending(nodes: &[&str]) -> Value {
    let locations: Vec<Value> = nodes
        .iter()
        .map(|n| {
            json!({"node": n, "storage": "local", "phase": "Downloading",
                        "sending": "2027-01-15T08:00:00Z"})
        })
        .collect();
    json!({"atProvider": {"locations": locations}})
}

/// A site whose tasks' logs say they download `url` into the image's file.
fn with_logs(mut site: Site, img: &ProxmoxImage, url: &str) -> Site {
    if let Site::Seen {
        active,
        finished,
        logs,
        ..
    } = &mut site
    {
        for t in active.iter().chain(finished.iter()) {
            logs.insert(
                t.to_string(),
                format!("downloading {url} to /var/lib/vz/import/{}", file(img)),
            );
        }
    }
    site
}

const URL: &str = "https://images.example/noble.img";

fn seen(files: &[(&str, u64)], task: Option<TaskState>, active: Vec<Upid>) -> Site {
    Site::Seen {
        files: files
            .iter()
            .map(|(v, s)| ((*v).to_owned(), *s))
            .collect::<BTreeMap<_, _>>(),
        task,
        active,
        finished: vec![],
        logs: BTreeMap::new(),
        room: None,
    }
}

fn at(node: &str, site: Site) -> (Target, Site) {
    (
        Target {
            node: node.into(),
            shared: false,
        },
        site,
    )
}

fn run(img: &ProxmoxImage, world: World, users: Users) -> Plan {
    let input = Input {
        image: img,
        namespace: "ns",
        name: "noble",
        now: now(),
        user: "root@pam",
        timing: timing(),
        world,
        users,
    };
    plan::plan(&input)
}

fn reason(p: &Plan, type_: ConditionType) -> (String, String) {
    let c = find(&p.status.conditions, type_).expect("the condition");
    (format!("{:?}", c.status), c.reason.clone())
}

fn calls(p: &Plan) -> Vec<Call> {
    match &p.step {
        Step::Calls(c) => c.clone(),
        Step::Finalizer(_) => vec![],
    }
}

#[test]
fn the_finalizer_comes_before_any_download() {
    let mut img = image(url_spec(), json!({}));
    img.metadata.finalizers = None;
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[], None, vec![]))]),
        Users::default(),
    );
    assert_eq!(p.step, Step::Finalizer(true));
}

#[test]
fn a_missing_file_is_downloaded_once_per_node_and_a_present_one_is_ready() {
    let img = image(url_spec(), json!({}));
    let v = volume(&img);
    let img = with_status(&img, made(&["pve1"], &v));
    let world = World::Seen(vec![
        at("pve1", seen(&[(v.as_str(), 42)], None, vec![])),
        at("pve2", seen(&[], None, vec![])),
    ]);
    let p = run(&img, world, Users::default());
    let c = calls(&p);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].node, "pve2");
    let CallKind::Download {
        file,
        content,
        checksum,
        ..
    } = &c[0].what
    else {
        panic!("a download: {c:?}")
    };
    assert_eq!(file, &file_of(&v));
    assert_eq!(*content, "import");
    assert_eq!(checksum.as_ref().map(|c| c.0.as_str()), Some(SUM));
    let locs = &p.status.at_provider.locations;
    assert_eq!(locs[0].phase, LocationPhase::Ready);
    assert_eq!(locs[0].size, Some(42));
    assert_eq!(locs[1].phase, LocationPhase::Downloading);
    assert_eq!(p.status.at_provider.summary.as_deref(), Some("1/2 ready"));
    assert_eq!(p.status.at_provider.volume.as_deref(), Some(v.as_str()));
    assert_eq!(
        reason(&p, ConditionType::Ready),
        ("False".into(), "Creating".into())
    );
    assert_eq!(
        reason(&p, ConditionType::Synced),
        ("True".into(), "DownloadingImage".into())
    );
    assert_eq!(p.status.observed_generation, Some(2));
}

fn file_of(v: &str) -> String {
    v.rsplit('/').next().unwrap().to_owned()
}

#[test]
fn every_location_ready_makes_the_image_ready() {
    let img = image(url_spec(), json!({}));
    let v = volume(&img);
    let img = with_status(&img, made(&["pve1", "pve2"], &v));
    let world = World::Seen(vec![
        at("pve1", seen(&[(v.as_str(), 1)], None, vec![])),
        at("pve2", seen(&[(v.as_str(), 1)], None, vec![])),
    ]);
    let p = run(&img, world, Users::default());
    assert!(calls(&p).is_empty());
    assert_eq!(
        reason(&p, ConditionType::Ready),
        ("True".into(), "Available".into())
    );
    assert_eq!(
        reason(&p, ConditionType::Synced),
        ("True".into(), "ReconcileSuccess".into())
    );
    assert_eq!(p.status.at_provider.summary.as_deref(), Some("2/2 ready"));
    assert_eq!(p.requeue, Some(timing().resync));
}

#[test]
fn with_a_template_ready_waits_for_the_templates_too() {
    let mut spec = url_spec();
    spec["template"] = json!({"storage": "local-lvm"});
    let pending = image(
        spec.clone(),
        json!({"atProvider": {"templates": [
        {"node": "pve1", "name": "noble-pve1", "ready": false}]}}),
    );
    let v = volume(&pending);
    let ours = |img: &ProxmoxImage| {
        let mut img = img.clone();
        let made = with_status(&img, made(&["pve1"], &v)).status.unwrap();
        img.status.as_mut().unwrap().at_provider.locations = made.at_provider.locations;
        img
    };
    let pending = ours(&pending);
    let world = || World::Seen(vec![at("pve1", seen(&[(v.as_str(), 1)], None, vec![]))]);
    let p = run(&pending, world(), Users::default());
    assert_eq!(
        reason(&p, ConditionType::Ready),
        ("False".into(), "Creating".into())
    );
    let done = image(
        spec,
        json!({"atProvider": {"templates": [
        {"node": "pve1", "name": "noble-pve1", "ready": true}]}}),
    );
    let p = run(&ours(&done), world(), Users::default());
    assert_eq!(
        reason(&p, ConditionType::Ready),
        ("True".into(), "Available".into())
    );
    // The fleet controller's fields are left as they were.
    assert_eq!(p.status.at_provider.templates.len(), 1);
}

#[test]
fn a_download_found_running_after_a_lost_status_write_is_adopted_not_sent_again() {
    let img = image(url_spec(), sending(&["pve1"]));
    let running = upid("pve1", "download", &file(&img));
    let site = with_logs(seen(&[], None, vec![running.clone()]), &img, URL);
    let p = run(&img, World::Seen(vec![at("pve1", site)]), Users::default());
    assert!(calls(&p).is_empty(), "{:?}", calls(&p));
    let loc = &p.status.at_provider.locations[0];
    assert_eq!(
        loc.task.as_ref().map(|t| t.upid.clone()),
        Some(running.to_string())
    );
    assert_eq!(loc.sending, None, "recorded: nothing left to find again");
    assert!(p.events.iter().any(|e| e.reason == "TaskAdopted"));
}

/// Issue 31's same-second case: team-b's image, applied right after
/// team-a's download of the same file name started, never sent anything,
/// so that download is not its own however close in time; nor is it raced
/// by a second download of the file. A dispatch writes `sending` down.
#[test]
fn another_images_download_of_the_file_is_waited_for_not_adopted_or_raced() {
    let mut spec = url_spec();
    spec["filename"] = json!("noble.qcow2");
    let img = image(spec, json!({}));
    // Started in the very second the image exists, the URL its own.
    let theirs = upid("pve1", "download", "noble.qcow2");
    let site = with_logs(seen(&[], None, vec![theirs.clone()]), &img, URL);
    let p = run(&img, World::Seen(vec![at("pve1", site)]), Users::default());
    assert!(
        calls(&p).is_empty(),
        "nothing sent over it: {:?}",
        calls(&p)
    );
    let loc = &p.status.at_provider.locations[0];
    assert_eq!(loc.task, None, "not adopted");
    assert_eq!(loc.phase, LocationPhase::Pending);
    let (_, message) = find(&p.status.conditions, ConditionType::Synced)
        .map(|c| (c.reason.clone(), c.message.clone().unwrap_or_default()))
        .unwrap();
    assert_eq!(reason(&p, ConditionType::Synced).1, "NotOwned");
    assert!(
        message.contains(&theirs.to_string()) && message.contains("spec.forProvider.filename"),
        "{message}"
    );
    // With nothing running, the download is sent, written down first.
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[], None, vec![]))]),
        Users::default(),
    );
    assert_eq!(calls(&p).len(), 1);
    assert_eq!(
        p.status.at_provider.locations[0].sending,
        Some(Time(now())),
        "written down before it is sent"
    );
}

fn with_task(img_status: Value) -> ProxmoxImage {
    image(url_spec(), img_status)
}

fn recorded(node: &str, upid: &Upid) -> Value {
    let v = volume(&image(url_spec(), json!({})));
    json!({"atProvider": {"locations": [{
        "node": node, "storage": "local", "phase": "Downloading",
        "task": {"upid": upid.to_string(), "action": "DownloadImage", "type": "download",
                 "node": node, "target": v, "startedAt": "2027-01-15T08:00:00Z",
                 "deadline": "2027-01-15T08:10:00Z", "summary": "download"},
    }]}})
}

#[test]
fn a_recorded_task_is_waited_for_and_its_end_recorded() {
    let u = upid("pve1", "download", "x.qcow2");
    let img = with_task(recorded("pve1", &u));
    let v = volume(&img);
    // Running: nothing sent, progress shown.
    let p = run(
        &img,
        World::Seen(vec![at(
            "pve1",
            seen(&[], Some(TaskState::Running { progress: Some(40) }), vec![]),
        )]),
        Users::default(),
    );
    assert!(calls(&p).is_empty());
    let loc = &p.status.at_provider.locations[0];
    assert_eq!(loc.task.as_ref().and_then(|t| t.progress), Some(40));
    assert_eq!(
        loc.task.as_ref().map(|t| t.summary.as_str()),
        Some("download 40%")
    );
    // Succeeded: the file is there, ready.
    let ok = TaskState::Finished(TaskOutcome::Succeeded {
        warnings: 0,
        warning_lines: vec![],
    });
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[(v.as_str(), 7)], Some(ok), vec![]))]),
        Users::default(),
    );
    let loc = &p.status.at_provider.locations[0];
    assert!(loc.task.is_none());
    assert_eq!(loc.phase, LocationPhase::Ready);
    assert_eq!(
        loc.made,
        std::slice::from_ref(&v),
        "its own task's file is recorded as its own"
    );
    assert!(p.events.iter().any(|e| e.reason == "TaskSucceeded"));
}

#[test]
fn a_failed_download_backs_off_then_is_retried() {
    let u = upid("pve1", "download", "x.qcow2");
    let img = with_task(recorded("pve1", &u));
    let failed = TaskState::Finished(TaskOutcome::Failed {
        exit_status: "checksum mismatch".into(),
        log_tail: vec!["checksum mismatch: got 'b' != expect 'a'".into()],
    });
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[], Some(failed), vec![]))]),
        Users::default(),
    );
    assert!(calls(&p).is_empty(), "not retried at once");
    let loc = &p.status.at_provider.locations[0];
    assert_eq!(loc.phase, LocationPhase::Failed);
    assert_eq!(loc.failures, Some(1));
    assert!(
        loc.message
            .as_deref()
            .unwrap()
            .contains("checksum mismatch")
    );
    assert_eq!(
        reason(&p, ConditionType::Synced),
        ("False".into(), "TaskFailed".into())
    );
    assert_eq!(p.requeue, Some(Duration::from_secs(10)));
    // After the backoff: downloaded again.
    let mut later = img.clone();
    later.status = Some(p.status.clone());
    let input = Input {
        image: &later,
        namespace: "ns",
        name: "noble",
        now: now() + Duration::from_secs(11),
        user: "root@pam",
        timing: timing(),
        world: World::Seen(vec![at("pve1", seen(&[], None, vec![]))]),
        users: Users::default(),
    };
    assert_eq!(calls(&plan::plan(&input)).len(), 1);
}

#[test]
fn import_from_is_ready_where_the_volume_exists_and_never_downloaded() {
    let img = image(
        json!({"source": {"importFrom": "local:import/noble.qcow2"}, "content": "import"}),
        json!({}),
    );
    let world = World::Seen(vec![
        at(
            "pve1",
            seen(&[("local:import/noble.qcow2", 5)], None, vec![]),
        ),
        at("pve2", seen(&[], None, vec![])),
    ]);
    let p = run(&img, world, Users::default());
    assert!(calls(&p).is_empty());
    assert_eq!(
        reason(&p, ConditionType::Synced),
        ("False".into(), "VolumeNotFound".into())
    );
    let c = find(&p.status.conditions, ConditionType::Synced).unwrap();
    assert!(c.message.as_deref().unwrap().contains("pve2"), "{c:?}");
    assert!(!p.status.at_provider.downloaded);
}

fn oci_spec() -> Value {
    json!({"source": {"oci": "docker.io/library/alpine:3.20"}, "content": "vztmpl"})
}

/// An OCI source is pulled as a URL is downloaded: one `oci-registry-pull`
/// per node whose file is missing, a present file Ready, a pull found
/// running (a lost status write) adopted, never sent twice.
#[test]
fn oci_is_pulled_once_per_node_and_a_running_pull_is_adopted() {
    let img = image(oci_spec(), json!({}));
    let v = volume(&img);
    let name = file(&img);
    assert!(
        name.starts_with("alpine_3.20-") && name.ends_with(".tar"),
        "{name}"
    );
    let running = upid("pve3", "ociregistrypull", &name);
    let mut status = made(&["pve1"], &v);
    // pve3's pull was written down as being sent, its UPID's write lost.
    let lost = sending(&["pve3"])["atProvider"]["locations"][0].clone();
    status["atProvider"]["locations"]
        .as_array_mut()
        .unwrap()
        .push(lost);
    let img = with_status(&img, status);
    let world = World::Seen(vec![
        at("pve1", seen(&[(v.as_str(), 42)], None, vec![])),
        at("pve2", seen(&[], None, vec![])),
        at("pve3", seen(&[], None, vec![running.clone()])),
    ]);
    let p = run(&img, world, Users::default());
    let sent = calls(&p);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].node, "pve2");
    assert_eq!(
        sent[0].what,
        CallKind::Pull {
            reference: "docker.io/library/alpine:3.20".into(),
            // The reference's last part as given; PVE writes `alpine_3.20-….tar`.
            file: format!(
                "alpine:{}",
                &name["alpine_".len()..name.len() - ".tar".len()]
            ),
            volume: v.clone(),
        }
    );
    let phases: Vec<_> = p
        .status
        .at_provider
        .locations
        .iter()
        .map(|l| l.phase)
        .collect();
    assert_eq!(
        phases,
        [
            LocationPhase::Ready,
            LocationPhase::Downloading,
            LocationPhase::Downloading
        ]
    );
    assert_eq!(
        p.status.at_provider.locations[2]
            .task
            .as_ref()
            .map(|t| t.upid.clone()),
        Some(running.to_string())
    );
    assert!(p.status.at_provider.downloaded);
    assert_eq!(
        reason(&p, ConditionType::Synced),
        ("True".into(), "DownloadingImage".into())
    );
    // The dispatch recorded: the next pass waits for it.
    let p = plan::settle(
        &Input {
            image: &img,
            namespace: "ns",
            name: "noble",
            now: now(),
            user: "root@pam",
            timing: timing(),
            world: World::Seen(vec![]),
            users: Users::default(),
        },
        p.clone(),
        vec![(sent[0].clone(), Ok(upid("pve2", "ociregistrypull", &name)))],
    );
    let task = p.status.at_provider.locations[1].task.clone().unwrap();
    assert_eq!(task.type_, "ociregistrypull");
    assert_eq!(task.target.as_deref(), Some(v.as_str()));
}

#[test]
fn oci_with_a_file_name_pulls_into_that_file() {
    let mut spec = oci_spec();
    spec["filename"] = json!("alpine-base.tar");
    let img = image(spec, json!({}));
    assert_eq!(volume(&img), "local:vztmpl/alpine-base.tar");
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[], None, vec![]))]),
        Users::default(),
    );
    assert_eq!(
        calls(&p)[0].what,
        CallKind::Pull {
            reference: "docker.io/library/alpine:3.20".into(),
            file: "alpine-base".into(),
            volume: "local:vztmpl/alpine-base.tar".into(),
        }
    );
}

#[test]
fn oci_on_pve_8_says_it_needs_9_1_and_sends_nothing() {
    let img = image(oci_spec(), json!({}));
    let p = run(
        &img,
        World::OciUnsupported("Proxmox VE 8.4.14".into()),
        Users::default(),
    );
    assert!(calls(&p).is_empty());
    assert_eq!(
        reason(&p, ConditionType::Synced),
        ("False".into(), "OciNeedsPve91".into())
    );
    let c = find(&p.status.conditions, ConditionType::Synced).unwrap();
    assert!(c.message.as_deref().unwrap().contains("8.4.14"), "{c:?}");
}

#[test]
fn no_usable_config_is_said_and_nothing_sent() {
    let img = image(url_spec(), json!({}));
    let rows = [
        (
            ProviderState::NotFound {
                message: "ProviderConfig ns/pve not found".into(),
            },
            "ProviderConfigNotFound",
        ),
        (
            ProviderState::Forbidden {
                message: r#"secrets "pve" is forbidden: User "x" cannot get resource "secrets""#
                    .into(),
            },
            "Forbidden",
        ),
    ];
    for (state, want) in rows {
        let p = run(&img, World::NoConfig(state), Users::default());
        assert!(calls(&p).is_empty(), "{want}");
        assert_eq!(
            reason(&p, ConditionType::Synced),
            ("False".into(), want.into())
        );
        // Looked at again like a VM or a container naming it (creating the
        // config wakes it too); before, an image waited for a change of its
        // own and stayed ProviderConfigNotFound after the config came.
        assert_eq!(
            p.requeue,
            Some(std::time::Duration::from_secs(30)),
            "{want}: the retry every kind uses"
        );
    }
}

#[test]
fn a_new_source_keeps_the_old_file_until_the_new_is_ready_and_no_vm_is_being_created() {
    let old = "local:import/old-aaaaaaaaaaaa-00000000.qcow2";
    let status = json!({"atProvider": {"volume": old, "downloaded": true, "locations": [
        {"node": "pve1", "storage": "local", "phase": "Ready", "size": 1, "made": [old]}]}});
    let img = image(url_spec(), status);
    let v = volume(&img);
    // New file not there yet: downloaded, the old one kept.
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[(old, 1)], None, vec![]))]),
        Users::default(),
    );
    assert_eq!(p.status.at_provider.previous_volumes, [old]);
    assert!(matches!(
        calls(&p)[..],
        [Call {
            what: CallKind::Download { .. },
            ..
        }]
    ));
    // New file ready, but a VM is being created: kept.
    let mut next = img.clone();
    next.status = Some(p.status.clone());
    next.status.as_mut().unwrap().at_provider.locations[0].task = None;
    // Both files written by this image's own tasks.
    next.status.as_mut().unwrap().at_provider.locations[0].made = vec![old.into(), v.clone()];
    let both = || {
        World::Seen(vec![at(
            "pve1",
            seen(&[(old, 1), (v.as_str(), 2)], None, vec![]),
        )])
    };
    let creating = Users {
        containers: vec![],
        vms: vec!["web".into()],
        creating: 1,
        children: vec![],
    };
    let p = run(&next, both(), creating);
    assert!(calls(&p).is_empty(), "{:?}", calls(&p));
    // No VM being created: deleted.
    let p = run(&next, both(), Users::default());
    assert_eq!(
        calls(&p).iter().map(|c| c.what.clone()).collect::<Vec<_>>(),
        [CallKind::Delete { volume: old.into() }]
    );
}

#[test]
fn an_import_from_volume_is_never_deleted_when_the_source_changes() {
    let status = json!({"atProvider": {"volume": "local:import/theirs.qcow2", "locations": [
        {"node": "pve1", "storage": "local", "phase": "Ready", "size": 1}]}});
    let img = image(url_spec(), status);
    let p = run(
        &img,
        World::Seen(vec![at(
            "pve1",
            seen(&[("local:import/theirs.qcow2", 1)], None, vec![]),
        )]),
        Users::default(),
    );
    assert!(p.status.at_provider.previous_volumes.is_empty());
}

fn deleted(for_provider: Value, status: Value) -> ProxmoxImage {
    let mut img = image(for_provider, status);
    img.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    img
}

/// A container naming the image holds it as a VM does, and is a user.
#[test]
fn a_deleted_image_a_container_names_waits_for_it() {
    let img = deleted(oci_spec(), json!({"atProvider": {"downloaded": true}}));
    let v = volume(&img);
    let users = Users {
        containers: vec!["app".into()],
        ..Users::default()
    };
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[(v.as_str(), 1)], None, vec![]))]),
        users,
    );
    assert!(calls(&p).is_empty(), "nothing deleted: {:?}", calls(&p));
    let c = find(&p.status.conditions, ConditionType::Synced).unwrap();
    assert_eq!(c.reason, "ImageInUse");
    assert!(
        c.message
            .as_deref()
            .unwrap()
            .contains("1 ProxmoxContainer(s) refer to it: app"),
        "{c:?}"
    );
    assert_eq!(p.status.at_provider.users, Some(1));
}

#[test]
fn a_deleted_image_in_use_waits_and_says_by_whom() {
    let img = deleted(url_spec(), json!({}));
    let v = volume(&img);
    let users = Users {
        vms: vec!["a".into(), "b".into()],
        creating: 0,
        containers: vec![],
        children: vec![],
    };
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[(v.as_str(), 1)], None, vec![]))]),
        users,
    );
    assert!(calls(&p).is_empty());
    assert_eq!(
        reason(&p, ConditionType::Synced),
        ("False".into(), "ImageInUse".into())
    );
    assert_eq!(
        reason(&p, ConditionType::Ready),
        ("False".into(), "ImageInUse".into())
    );
    let c = find(&p.status.conditions, ConditionType::Synced).unwrap();
    assert!(
        c.message
            .as_deref()
            .unwrap()
            .contains("2 ProxmoxVM(s) refer to it: a, b"),
        "{c:?}"
    );
    assert!(
        p.events
            .iter()
            .any(|e| e.warning && e.reason == "ImageInUse")
    );
    assert_eq!(p.status.at_provider.users, Some(2));
    // Its template VMs hold it too.
    let children = Users {
        containers: vec![],
        vms: vec![],
        creating: 0,
        children: vec!["noble-pve1".into()],
    };
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[(v.as_str(), 1)], None, vec![]))]),
        children,
    );
    assert_eq!(
        reason(&p, ConditionType::Synced),
        ("False".into(), "ImageInUse".into())
    );
}

/// A downloaded file and an OCI pull's file alike.
#[test]
fn a_deleted_unused_image_deletes_its_files_then_lets_go() {
    for spec in [url_spec(), oci_spec()] {
        deleted_unused_image_deletes_its_file(spec);
    }
}

fn deleted_unused_image_deletes_its_file(spec: Value) {
    let img = deleted(spec, json!({"atProvider": {"downloaded": true}}));
    let v = volume(&img);
    let img = with_status(&img, made(&["pve1"], &v));
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[(v.as_str(), 1)], None, vec![]))]),
        Users::default(),
    );
    assert_eq!(
        calls(&p).iter().map(|c| c.what.clone()).collect::<Vec<_>>(),
        [CallKind::Delete { volume: v.clone() }]
    );
    assert_eq!(
        p.status.at_provider.locations[0].phase,
        LocationPhase::Deleting
    );
    // Gone: the finalizer goes.
    let p = run(
        &img,
        World::Seen(vec![at("pve1", seen(&[], None, vec![]))]),
        Users::default(),
    );
    assert_eq!(p.step, Step::Finalizer(false));
}

#[test]
fn a_deleted_import_from_image_deletes_nothing() {
    let img = deleted(
        json!({"source": {"importFrom": "local:import/noble.qcow2"}, "content": "import"}),
        json!({}),
    );
    let p = run(
        &img,
        World::Seen(vec![at(
            "pve1",
            seen(&[("local:import/noble.qcow2", 1)], None, vec![]),
        )]),
        Users::default(),
    );
    assert_eq!(p.step, Step::Finalizer(false));
}

#[test]
fn a_shared_storage_is_one_location() {
    let img = image(url_spec(), json!({}));
    let t = plan::targets(&img, &["pve2".into(), "pve1".into()], true);
    assert_eq!(
        t,
        [Target {
            node: "pve1".into(),
            shared: true
        }]
    );
    let t = plan::targets(&img, &["pve2".into(), "pve1".into()], false);
    assert_eq!(t.len(), 2);
    let mut named = url_spec();
    named["nodes"] = json!(["pve3"]);
    let t = plan::targets(&image(named, json!({})), &["pve1".into()], false);
    assert_eq!(
        t,
        [Target {
            node: "pve3".into(),
            shared: false
        }]
    );
}

#[test]
fn a_refused_dispatch_is_recorded_as_a_failure_and_a_started_one_as_the_task() {
    let img = image(url_spec(), json!({}));
    let input = Input {
        image: &img,
        namespace: "ns",
        name: "noble",
        now: now(),
        user: "root@pam",
        timing: timing(),
        world: World::Seen(vec![
            at("pve1", seen(&[], None, vec![])),
            at("pve2", seen(&[], None, vec![])),
        ]),
        users: Users::default(),
    };
    let p = plan::plan(&input);
    let c = calls(&p);
    let started = upid("pve1", "download", &file(&img));
    let p = plan::settle(
        &input,
        p,
        vec![
            (c[0].clone(), Ok(started.clone())),
            (c[1].clone(), Err("no space".into())),
        ],
    );
    let locs = &p.status.at_provider.locations;
    assert_eq!(
        locs[0].task.as_ref().map(|t| t.upid.clone()),
        Some(started.to_string())
    );
    assert_eq!(locs[1].phase, LocationPhase::Failed);
    assert_eq!(locs[1].failures, Some(1));
    assert!(p.events.iter().any(|e| e.reason == "TaskStarted"));
}

mod waker {
    use futures::StreamExt;
    use kube::core::DeserializeGuard;
    use kube::runtime::{reflector, watcher};
    use serde_json::json;

    use crate::api::ProxmoxVM;
    use crate::reconcile::image::ImageWaker;

    fn vm(node: Option<&str>, task_summary: &str) -> DeserializeGuard<ProxmoxVM> {
        DeserializeGuard(Ok(serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u"},
            "spec": {"forProvider": {"disks": [
                {"slot": "scsi0", "storage": "local-lvm", "image": {"name": "noble"}}]}},
            "status": {"atProvider": {"node": node, "vmid": 100, "task": {
                "upid": "UPID:pve:00001234:00005678:6B49D200:qmcreate:100:root@pam:",
                "action": "Create", "type": "qmcreate", "node": "pve",
                "startedAt": "2027-01-15T08:00:00Z", "deadline": "2027-01-15T08:10:00Z",
                "summary": task_summary}}},
        }))
        .unwrap()))
    }

    #[test]
    fn only_what_an_image_reads_of_a_vm_wakes_it() {
        let (reader, mut writer) = reflector::store();
        let (waker, mut woken) = ImageWaker::new(reader);
        let first = vm(None, "qmcreate");
        let apply = |w: &mut reflector::store::Writer<_>, obj: &DeserializeGuard<ProxmoxVM>| {
            w.apply_watcher_event(&watcher::Event::Apply(obj.clone()));
        };
        waker.see(&Ok(watcher::Event::Apply(first.clone())));
        apply(&mut writer, &first);
        let mut count = || {
            let mut n = 0;
            while let Some(Some(_)) = woken.next().now_or_never() {
                n += 1;
            }
            n
        };
        assert_eq!(count(), 1, "a new VM wakes the image it names");
        // A status write of its task's progress: nothing.
        let progress = vm(None, "qmcreate 40%");
        waker.see(&Ok(watcher::Event::Apply(progress.clone())));
        apply(&mut writer, &progress);
        assert_eq!(count(), 0, "a progress update wakes no image");
        // Placed on a node: the image brings the file there.
        let placed = vm(Some("pve2"), "qmcreate 40%");
        waker.see(&Ok(watcher::Event::Apply(placed.clone())));
        apply(&mut writer, &placed);
        assert_eq!(count(), 1, "a placement wakes the image");
        waker.see(&Ok(watcher::Event::Delete(placed)));
        assert_eq!(count(), 1, "a VM gone wakes the image");
    }

    use futures::FutureExt;
}

/// Issue 31: a file of the image's name it did not make is another's: not
/// Ready on it, not downloaded over, not deleted; its own is found by its
/// recorded task or, after a lost status write, by this provider's task for
/// exactly that file in the node's list.
#[test]
fn a_file_is_the_images_only_if_its_own_task_made_it() {
    let img = image(url_spec(), json!({}));
    let v = volume(&img);
    let name = file(&img);
    let mut named = url_spec();
    named["filename"] = json!("noble.qcow2");
    let named = image(named, json!({}));
    let nv = volume(&named);
    // The same image, having written down that it sent its download.
    let sent = with_status(&img, sending(&["pve1"]));
    let found = |running: Vec<Upid>, finished: Vec<Upid>, v: &str| {
        let site = Site::Seen {
            files: BTreeMap::from([(v.to_owned(), 5)]),
            task: None,
            active: running,
            finished,
            logs: BTreeMap::new(),
            room: None,
        };
        with_logs(site, &img, URL)
    };
    // (row, image, site, phase, Synced reason, made recorded)
    let rows: Vec<(&str, &ProxmoxImage, Site, LocationPhase, &str, bool)> = vec![
        (
            "another's file of its default name, no task of ours",
            &img,
            found(vec![], vec![], &v),
            LocationPhase::Pending,
            "NotOwned",
            false,
        ),
        (
            "another's file of the filename it names",
            &named,
            found(vec![], vec![], &nv),
            LocationPhase::Pending,
            "NotOwned",
            false,
        ),
        (
            "a task of ours for another file does not make this one ours",
            &sent,
            found(vec![], vec![upid("pve1", "download", "other.qcow2")], &v),
            LocationPhase::Pending,
            "NotOwned",
            false,
        ),
        (
            "never sent: a download of it in the very second it was created is another's",
            &img,
            found(vec![], vec![upid("pve1", "download", &name)], &v),
            LocationPhase::Pending,
            "NotOwned",
            false,
        ),
        (
            "sent: a download of it whose log names another URL is another's",
            &sent,
            with_logs(
                found(vec![], vec![upid("pve1", "download", &name)], &v),
                &img,
                "https://evil.example/noble.img",
            ),
            LocationPhase::Pending,
            "NotOwned",
            false,
        ),
        (
            "our download of it finished after a lost status write",
            &sent,
            found(vec![], vec![upid("pve1", "download", &name)], &v),
            LocationPhase::Ready,
            "ReconcileSuccess",
            true,
        ),
        (
            "our download of it still running after a lost status write",
            &sent,
            found(vec![upid("pve1", "download", &name)], vec![], &v),
            LocationPhase::Downloading,
            "DownloadingImage",
            false,
        ),
    ];
    for (row, img, site, phase, synced, own) in rows {
        let p = run(img, World::Seen(vec![at("pve1", site)]), Users::default());
        assert!(calls(&p).is_empty(), "{row}: nothing sent: {:?}", calls(&p));
        let loc = &p.status.at_provider.locations[0];
        assert_eq!(loc.phase, phase, "{row}");
        assert_eq!(reason(&p, ConditionType::Synced).1, synced, "{row}");
        assert_eq!(!loc.made.is_empty(), own, "{row}: {loc:?}");
        if synced == "NotOwned" {
            let (_, message) = find(&p.status.conditions, ConditionType::Synced)
                .map(|c| (c.reason.clone(), c.message.clone().unwrap_or_default()))
                .unwrap();
            let field = if img.spec.for_provider.filename.is_some() {
                "spec.forProvider.filename"
            } else {
                "spec.forProvider.source.url"
            };
            let volume = volume(img);
            assert!(
                message.contains(&volume) && message.contains(field),
                "{row}: names the file and the field: {message}"
            );
            assert_eq!(reason(&p, ConditionType::Ready).0, "False", "{row}");
        }
    }
}

/// Deleting an image never deletes a file it did not make: not its
/// volume, not a previous source's.
#[test]
fn a_deleted_image_deletes_only_the_files_its_own_tasks_made() {
    let img = deleted(url_spec(), json!({}));
    let v = volume(&img);
    let old = "local:import/old-aaaaaaaaaaaa-00000000.qcow2";
    let status = json!({"atProvider": {"downloaded": true, "previousVolumes": [old],
        "locations": [{"node": "pve1", "storage": "local", "phase": "Pending"}]}});
    let img = with_status(&img, status);
    let p = run(
        &img,
        World::Seen(vec![at(
            "pve1",
            seen(&[(v.as_str(), 1), (old, 1)], None, vec![]),
        )]),
        Users::default(),
    );
    assert_eq!(p.step, Step::Finalizer(false), "{:?}", p.step);
    // Made by it: deleted.
    let mut ours = img.clone();
    ours.status.as_mut().unwrap().at_provider.locations[0].made = vec![old.into()];
    let p = run(
        &ours,
        World::Seen(vec![at(
            "pve1",
            seen(&[(v.as_str(), 1), (old, 1)], None, vec![]),
        )]),
        Users::default(),
    );
    assert_eq!(
        calls(&p).iter().map(|c| c.what.clone()).collect::<Vec<_>>(),
        [CallKind::Delete { volume: old.into() }]
    );
}

/// The same image under these management policies (and, with `paused`,
/// the `crossplane.io/paused` annotation).
fn under(img: &ProxmoxImage, policies: Value, paused: bool) -> ProxmoxImage {
    let mut img = img.clone();
    img.spec.managed.management_policies = serde_json::from_value(policies).unwrap();
    if paused {
        img.metadata.annotations = Some(BTreeMap::from([(
            crate::api::meta::PAUSED.to_owned(),
            "true".to_owned(),
        )]));
    }
    img
}

/// What a pass does, in words, for the policy table.
fn outcome(p: &Plan) -> String {
    match &p.step {
        Step::Finalizer(add) => format!("finalizer {add}"),
        Step::Calls(c) if c.is_empty() => format!(
            "nothing ({})",
            find(&p.status.conditions, ConditionType::Synced).map_or("-", |c| c.reason.as_str())
        ),
        Step::Calls(c) => c
            .iter()
            .map(|c| match &c.what {
                CallKind::Download { .. } => "download",
                CallKind::Pull { .. } => "pull",
                CallKind::Delete { .. } => "delete",
            })
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// `managementPolicies` and `crossplane.io/paused` mean for an image what
/// they mean for every kind: paused does nothing (a deletion waits too),
/// without Create nothing is downloaded, without Delete no file is deleted
/// (a deletion orphans them, an old source's file is kept).
#[test]
fn management_policies_decide_what_an_image_may_do() {
    let img = image(url_spec(), json!({}));
    let v = volume(&img);
    let absent = || World::Seen(vec![at("pve1", seen(&[], None, vec![]))]);
    let present = || World::Seen(vec![at("pve1", seen(&[(v.as_str(), 1)], None, vec![]))]);
    let ours = with_status(&img, made(&["pve1"], &v));
    let gone = deleted(url_spec(), json!({}));
    let gone = with_status(&gone, made(&["pve1"], &v));
    let old = "local:import/old-aaaaaaaaaaaa-00000000.qcow2";
    let replaced = with_status(
        &img,
        json!({"atProvider": {"volume": old, "downloaded": true, "previousVolumes": [old],
               "locations": [{"node": "pve1", "storage": "local", "phase": "Ready",
                              "made": [old, v]}]}}),
    );
    let both = || {
        World::Seen(vec![at(
            "pve1",
            seen(&[(old, 1), (v.as_str(), 1)], None, vec![]),
        )])
    };
    let cases: Vec<(&str, ProxmoxImage, World, &str)> = vec![
        (
            "all: absent is downloaded",
            img.clone(),
            absent(),
            "download",
        ),
        (
            "paused by annotation: nothing",
            under(&img, json!(["*"]), true),
            absent(),
            "nothing (ReconcilePaused)",
        ),
        (
            "paused by []: nothing",
            under(&img, json!([]), false),
            absent(),
            "nothing (ReconcilePaused)",
        ),
        (
            "paused while deleted: the deletion waits",
            under(&gone, json!([]), false),
            present(),
            "nothing (ReconcilePaused)",
        ),
        (
            "without Observe: refused",
            under(&img, json!(["Create"]), false),
            absent(),
            "nothing (InvalidSpec)",
        ),
        (
            "Observe only: absent is not downloaded",
            under(&img, json!(["Observe"]), false),
            absent(),
            "nothing (ReconcileError)",
        ),
        (
            "Observe only: its own file is observed",
            under(&ours, json!(["Observe"]), false),
            present(),
            "nothing (ReconcileSuccess)",
        ),
        (
            "all: deleted, its file deleted",
            gone.clone(),
            present(),
            "delete",
        ),
        (
            "without Delete: deleted, its file orphaned",
            under(&gone, json!(["Observe", "Create", "Update"]), false),
            present(),
            "finalizer false",
        ),
        (
            "all: an old source's file deleted",
            replaced.clone(),
            both(),
            "delete",
        ),
        (
            "without Delete: an old source's file kept",
            under(&replaced, json!(["Observe", "Create", "Update"]), false),
            both(),
            "nothing (ReconcileSuccess)",
        ),
    ];
    let mut failures = vec![];
    for (name, img, world, want) in cases {
        let got = outcome(&run(&img, world, Users::default()));
        if got != want {
            failures.push(format!("{name}: got {got}, want {want}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
mod room;
