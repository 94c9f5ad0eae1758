//! The container plan, table by table: resource + observation → step.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use pve_client::lxc::ContainerConfig;
use serde_json::{Value, json};

use super::plan::{Container, Observation, Outcome, Seen, Step, TaskSeen, at_rest, plan, settle};
use crate::api::condition::{ConditionStatus, ConditionType, Reason, find};
use crate::api::container::ContainerTaskAction;
use crate::api::{ProxmoxContainer, ProxmoxContainerStatus};
use crate::reconcile::common::grants::{Placement, VmidGrant};
use crate::reconcile::common::owner::marker_line_of;
use crate::reconcile::common::provider::ProviderState;
use crate::reconcile::identity::Identity;

const UID: &str = "u-1";

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn ct(spec: Value, annotations: Value, status: Value) -> ProxmoxContainer {
    let mut for_provider = json!({
        "node": "pve",
        "template": {"volume": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"},
        "rootfs": {"storage": "local-lvm", "size": "4Gi"},
        "networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr0", "ip": "dhcp"}],
    });
    for (k, v) in spec.as_object().unwrap() {
        if v.is_null() {
            for_provider.as_object_mut().unwrap().remove(k);
        } else {
            for_provider[k] = v.clone();
        }
    }
    serde_json::from_value(json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxContainer",
        "metadata": {
            "name": "app", "namespace": "ns", "uid": UID, "generation": 1,
            "finalizers": ["finalizer.managedresource.crossplane.io"],
            "annotations": annotations,
        },
        "spec": {"forProvider": for_provider},
        "status": status,
    }))
    .unwrap()
}

fn id() -> Identity {
    Identity {
        namespace: "ns".into(),
        name: "app".into(),
        uid: UID.into(),
    }
}

fn recorded() -> Value {
    json!({"crossplane.io/external-name": "120"})
}

/// A VMID the provider allocated and recorded, its create not yet seen.
fn allocated() -> Value {
    json!({"crossplane.io/external-name": "120", "crossplane.io/external-create-pending": "2027-01-15T08:00:00Z"})
}

/// A container at the VMID with another description.
fn described(description: &str) -> Container {
    let Container::Present(mut seen) = ours(false, &[]) else {
        unreachable!()
    };
    seen.config
        .raw
        .insert("description".into(), description.to_owned());
    Container::Present(seen)
}

fn foreign() -> Container {
    described(&marker_line_of(
        "ProxmoxContainer",
        "other",
        "app",
        "another-uid",
    ))
}

fn unmarked() -> Container {
    described("made by hand")
}

fn obs(container: Container) -> Observation {
    Observation {
        container,
        ..Observation::unobserved(Duration::from_secs(60))
    }
}

/// A container as the provider created it: the spec's values, our marker.
pub(super) fn ours(running: bool, extra: &[(&str, &str)]) -> Container {
    let marker = marker_line_of("ProxmoxContainer", "ns", "app", UID);
    let mut raw: std::collections::BTreeMap<String, String> = [
        ("cores", "1"),
        ("memory", "512"),
        ("swap", "512"),
        ("hostname", "app"),
        ("unprivileged", "1"),
        ("rootfs", "local-lvm:vm-120-disk-0,size=4G"),
        (
            "net0",
            "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp,type=veth",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    raw.insert("description".into(), marker);
    for (k, v) in extra {
        raw.insert((*k).to_owned(), (*v).to_owned());
    }
    Container::Present(Seen {
        node: "pve".into(),
        config: ContainerConfig {
            digest: Some("d1".into()),
            raw,
        },
        running,
    })
}

fn kind(step: &Step) -> &'static str {
    match step {
        Step::Idle => "idle",
        Step::AddFinalizer => "add-finalizer",
        Step::RemoveFinalizer => "remove-finalizer",
        Step::LateInitialize(_) => "late-initialize",
        Step::RecordVmid(_) => "record-vmid",
        Step::ForgetVmid(_) => "forget-vmid",
        Step::Pull { .. } => "pull",
        Step::Create { .. } => "create",
        Step::Restore { .. } => "restore",
        Step::Configure { .. } => "configure",
        Step::Firewall { .. } => "firewall",
        Step::Start { .. } => "start",
        Step::Shutdown { .. } => "shutdown",
        Step::Stop { .. } => "stop",
        Step::Destroy { .. } => "destroy",
        Step::MovePool { .. } => "move-pool",
    }
}

fn deleting(mut c: ProxmoxContainer) -> ProxmoxContainer {
    c.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    c
}

fn task(action: &str, type_: &str) -> Value {
    json!({"atProvider": {"task": {
        "upid": format!("UPID:pve:00001234:00005678:6B49D200:{type_}:120:root@pam:"),
        "action": action, "type": type_, "node": "pve",
        "startedAt": "2027-01-15T08:00:00Z", "deadline": "2027-01-15T08:30:00Z",
        "summary": type_,
    }}})
}

#[test]
fn the_way_to_a_container_step_by_step() {
    let no_finalizer = {
        let mut c = ct(json!({}), json!({}), json!({}));
        c.metadata.finalizers = None;
        c
    };
    let with_oci = json!({"template": {"oci": {"reference": "docker.io/library/alpine:3.20", "storage": "local"}}});
    let cases: Vec<(&str, ProxmoxContainer, Observation, &str)> = vec![
        (
            "a new resource gets the finalizer first",
            no_finalizer,
            obs(Container::Unknown),
            "add-finalizer",
        ),
        (
            "a VMID named in the spec is recorded before anything else",
            ct(json!({"vmid": 150}), json!({}), json!({})),
            obs(Container::Unknown),
            "record-vmid",
        ),
        (
            "an allocated VMID is recorded",
            ct(json!({}), json!({}), json!({})),
            Observation {
                vmid: Some(VmidGrant::Reserved(123)),
                ..obs(Container::Unknown)
            },
            "record-vmid",
        ),
        (
            "no VMID free: nothing is created",
            ct(json!({}), json!({}), json!({})),
            Observation {
                vmid: Some(VmidGrant::Unavailable("full".into())),
                ..obs(Container::Unknown)
            },
            "idle",
        ),
        (
            "absent with a VMID: created",
            ct(json!({}), recorded(), json!({})),
            obs(Container::Absent),
            "create",
        ),
        (
            "absent without a node: created where placement says",
            ct(json!({"node": null}), recorded(), json!({})),
            Observation {
                placement: Some(Placement::Chosen {
                    node: "pve2".into(),
                    why: "most free memory".into(),
                }),
                ..obs(Container::Absent)
            },
            "create",
        ),
        (
            "an OCI image not pulled yet is pulled first",
            ct(with_oci.clone(), recorded(), json!({})),
            Observation {
                template_present: Some(false),
                ..obs(Container::Absent)
            },
            "pull",
        ),
        (
            "an OCI image pulled: created from it",
            ct(with_oci, recorded(), json!({})),
            Observation {
                template_present: Some(true),
                ..obs(Container::Absent)
            },
            "create",
        ),
        (
            "a missing password Secret holds the create",
            ct(
                json!({"passwordSecretRef": {"name": "pw", "key": "password"}}),
                recorded(),
                json!({}),
            ),
            Observation {
                password: Some(Err((Reason::SecretNotFound, "Secret pw not found".into()))),
                ..obs(Container::Absent)
            },
            "idle",
        ),
        (
            "a recorded task still running: nothing else is dispatched",
            ct(json!({}), recorded(), task("Create", "vzcreate")),
            Observation {
                task: Some(TaskSeen::Running),
                ..obs(Container::Absent)
            },
            "idle",
        ),
        (
            "a task of the VMID the node lists (a lost status write): waited for",
            ct(json!({}), recorded(), json!({})),
            Observation {
                busy: Some("vzcreate of 120".into()),
                ..obs(Container::Absent)
            },
            "idle",
        ),
        (
            "a config locked by a create no status recorded: waited for",
            ct(json!({}), recorded(), json!({})),
            obs(Container::Present(Seen {
                node: "pve".into(),
                config: ContainerConfig {
                    digest: None,
                    raw: [("lock".to_owned(), "create".to_owned())].into(),
                },
                running: false,
            })),
            "idle",
        ),
        (
            "ours and stopped: started",
            ct(json!({}), recorded(), json!({})),
            obs(ours(false, &[])),
            "start",
        ),
        (
            "ours, running, powerState Stopped: shut down",
            ct(json!({"powerState": "Stopped"}), recorded(), json!({})),
            obs(ours(true, &[])),
            "shutdown",
        ),
        (
            "ours, as the spec says: nothing to do",
            ct(json!({}), recorded(), json!({})),
            obs(ours(true, &[])),
            "idle",
        ),
        (
            "drift comes before the power state",
            ct(json!({}), recorded(), json!({})),
            obs(ours(false, &[("memory", "2048")])),
            "configure",
        ),
        (
            "a VM with the VMID the spec names: never touched, said",
            ct(json!({"vmid": 120}), recorded(), json!({})),
            obs(Container::Taken("VMID 120 belongs to a VM".into())),
            "idle",
        ),
        (
            "a VM took the allocated VMID first: forgotten, another allocated",
            ct(json!({}), allocated(), json!({})),
            obs(Container::Taken("VMID 120 belongs to a VM".into())),
            "forget-vmid",
        ),
        (
            "another resource's container took the allocated VMID: forgotten",
            ct(json!({}), allocated(), json!({})),
            obs(foreign()),
            "forget-vmid",
        ),
        (
            "another resource's container at a VMID a person named: left, said",
            ct(json!({}), recorded(), json!({})),
            obs(foreign()),
            "idle",
        ),
        (
            "an unmarked container at the allocated VMID: left, said (it may be ours, edited)",
            ct(json!({}), recorded(), json!({})),
            obs(unmarked()),
            "idle",
        ),
        (
            "without Create an allocated VMID is not given up",
            ct(json!({}), recorded(), json!({}))
                .tap_policies(json!(["Observe", "Update", "Delete"])),
            obs(Container::Taken("VMID 120 belongs to a VM".into())),
            "idle",
        ),
        (
            "paused: nothing",
            ct(json!({}), recorded(), json!({})).tap_policies(json!([])),
            obs(ours(false, &[])),
            "idle",
        ),
        (
            "paused by the annotation: nothing",
            ct(json!({}), recorded(), json!({})).tap_paused(),
            obs(ours(false, &[("memory", "2048")])),
            "idle",
        ),
        (
            "paused while deleted: the deletion waits (neither destroyed nor orphaned)",
            deleting(ct(json!({}), recorded(), json!({}))).tap_policies(json!([])),
            obs(ours(false, &[])),
            "idle",
        ),
        (
            "Observe only: drift and power are left alone",
            ct(json!({}), recorded(), json!({})).tap_policies(json!(["Observe"])),
            obs(ours(false, &[("memory", "2048")])),
            "idle",
        ),
    ];
    for (name, c, o, want) in cases {
        let p = plan(&c, &id(), &o, now());
        assert_eq!(kind(&p.step), want, "{name}: {:?}", p.step);
    }
}

trait TapPolicies {
    fn tap_policies(self, policies: Value) -> Self;
    fn tap_paused(self) -> Self;
}

impl TapPolicies for ProxmoxContainer {
    fn tap_policies(mut self, policies: Value) -> Self {
        self.spec.managed.management_policies = serde_json::from_value(policies).unwrap();
        self
    }
    fn tap_paused(mut self) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(crate::api::meta::PAUSED.into(), "true".into());
        self
    }
}

#[test]
fn deleting_destroys_only_what_is_ours() {
    let cases: Vec<(&str, ProxmoxContainer, Observation, &str)> = vec![
        (
            "running: stopped first",
            deleting(ct(json!({}), recorded(), json!({}))),
            obs(ours(true, &[])),
            "stop",
        ),
        (
            "stopped: destroyed",
            deleting(ct(json!({}), recorded(), json!({}))),
            obs(ours(false, &[])),
            "destroy",
        ),
        (
            "gone: the finalizer goes",
            deleting(ct(json!({}), recorded(), json!({}))),
            obs(Container::Absent),
            "remove-finalizer",
        ),
        (
            "no VMID ever recorded: the finalizer goes",
            deleting(ct(json!({}), json!({}), json!({}))),
            obs(Container::Unknown),
            "remove-finalizer",
        ),
        (
            "without Delete: orphaned",
            deleting(ct(json!({}), recorded(), json!({})))
                .tap_policies(json!(["Observe", "Create", "Update"])),
            obs(ours(false, &[])),
            "remove-finalizer",
        ),
        (
            "while its destroy runs: waited for",
            deleting(ct(json!({}), recorded(), task("Destroy", "vzdestroy"))),
            Observation {
                task: Some(TaskSeen::Running),
                ..obs(ours(false, &[]))
            },
            "idle",
        ),
    ];
    for (name, c, o, want) in cases {
        let p = plan(&c, &id(), &o, now());
        assert_eq!(kind(&p.step), want, "{name}: {:?}", p.step);
    }
    // Someone else's container, or one without a marker, is never destroyed.
    // Live, another resource's takes an allocated VMID from this one (it is
    // forgotten, another allocated); an unmarked one is only said.
    for (description, live_step) in [
        (
            Some(marker_line_of("ProxmoxContainer", "ns", "other", "u-2")),
            "forget-vmid",
        ),
        (Some("hand-made".to_owned()), "idle"),
        (None, "idle"),
    ] {
        let mut seen = ours(false, &[]);
        if let Container::Present(s) = &mut seen {
            match &description {
                Some(d) => s.config.raw.insert("description".into(), d.clone()),
                None => s.config.raw.remove("description"),
            };
        }
        let c = deleting(ct(json!({}), recorded(), json!({})));
        let p = plan(&c, &id(), &obs(seen.clone()), now());
        assert_eq!(kind(&p.step), "remove-finalizer", "{description:?}");
        let live = plan(
            &ct(json!({}), allocated(), json!({})),
            &id(),
            &obs(seen),
            now(),
        );
        assert_eq!(kind(&live.step), live_step, "{description:?}");
        if live_step == "idle" {
            let synced = find(&live.status.conditions, ConditionType::Synced).unwrap();
            assert_eq!(synced.reason, "NotOwned");
        }
    }
}

#[test]
fn the_create_carries_the_spec_and_the_owner_marker() {
    let c = ct(
        json!({
            "memory": "1Gi", "swap": "1Mi", "cpu": {"cores": 2}, "hostname": "web",
            "mountPoints": [{"slot": "mp1", "storage": "local-lvm", "size": "1500Mi", "path": "/srv"}],
            "features": {"nesting": true, "keyctl": true},
            "sshKeys": ["ssh-ed25519 AAAA k"], "tags": ["b", "a"], "description": "notes",
            "dns": {"nameservers": ["1.1.1.1", "9.9.9.9"], "searchDomain": "example.org"},
        }),
        recorded(),
        json!({}),
    );
    // keyctl is root@pam's: the config's containerPolicy allows it here.
    let allowed = Observation {
        policy: crate::api::provider_config::ContainerPolicy {
            allow_features: vec![crate::api::provider_config::RootOnlyFeature::Keyctl],
            ..Default::default()
        },
        ..obs(Container::Absent)
    };
    let p = plan(&c, &id(), &allowed, now());
    let Step::Create { node, create } = &p.step else {
        panic!("{:?}", p.step)
    };
    assert_eq!(node, "pve");
    let form = create.to_params();
    let get = |k| form.get(k).unwrap_or_default().to_owned();
    assert_eq!(get("vmid"), "120");
    assert_eq!(get("rootfs"), "local-lvm:4");
    assert_eq!(get("mp1"), "local-lvm:2,mp=/srv", "rounded up to whole GiB");
    assert_eq!(get("memory"), "1024");
    assert_eq!(get("swap"), "1");
    assert_eq!(get("cores"), "2");
    assert_eq!(get("hostname"), "web");
    assert_eq!(get("unprivileged"), "1", "unprivileged by default");
    assert_eq!(get("features"), "keyctl=1,nesting=1");
    assert_eq!(get("nameserver"), "1.1.1.1 9.9.9.9");
    assert_eq!(get("searchdomain"), "example.org");
    assert_eq!(get("net0"), "name=eth0,bridge=vmbr0,ip=dhcp");
    assert_eq!(
        get("description"),
        format!(
            "notes\n\n{}",
            marker_line_of("ProxmoxContainer", "ns", "app", UID)
        )
    );
    assert!(
        form.get("password").is_none(),
        "the plan never holds the password"
    );
    assert_eq!(p.status.at_provider.node.as_deref(), Some("pve"));
}

#[test]
fn drift_sets_what_changed_keeps_the_mac_and_reports_what_only_root_may_change() {
    let c = ct(
        json!({"cpu": {"cores": 2}, "startOnBoot": true, "tags": ["web"],
               "features": {"nesting": true, "fuse": true},
               "networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr1", "ip": "dhcp", "vlan": 20}]}),
        recorded(),
        json!({}),
    );
    let p = plan(&c, &id(), &obs(ours(true, &[])), now());
    let Step::Configure { update, .. } = &p.step else {
        panic!("{:?}", p.step)
    };
    assert_eq!(update.set["cores"], "2");
    assert_eq!(update.set["onboot"], "1");
    assert_eq!(update.set["tags"], "web");
    assert_eq!(
        update.set["net0"],
        "name=eth0,bridge=vmbr1,hwaddr=BC:24:11:00:00:01,ip=dhcp,tag=20,type=veth"
    );
    assert!(
        !update.set.contains_key("memory"),
        "unchanged keys are not sent"
    );
    assert!(!update.set.contains_key("features"), "fuse needs root@pam");
    assert_eq!(update.digest.as_deref(), Some("d1"));
    assert_eq!(
        p.status.at_provider.unmanaged_drift.len(),
        1,
        "{:?}",
        p.status.at_provider.unmanaged_drift
    );
    // Tags removed from the spec are deleted on Proxmox.
    let bare = ct(json!({}), recorded(), json!({}));
    let p = plan(&bare, &id(), &obs(ours(true, &[("tags", "old")])), now());
    let Step::Configure { update, .. } = &p.step else {
        panic!("{:?}", p.step)
    };
    assert_eq!(update.delete, ["tags"]);
    assert!(update.set.is_empty(), "{update:?}");
}

#[test]
fn the_container_is_kept_in_the_pool_its_spec_names() {
    let in_pool = |pool: Value, member_of: Option<Option<&str>>| {
        let c = ct(json!({"pool": pool}), recorded(), json!({}));
        let o = Observation {
            pool: member_of.map(|m| m.map(str::to_owned)),
            ..obs(ours(true, &[]))
        };
        plan(&c, &id(), &o, now()).step
    };
    let moved = |allow_move| Step::MovePool {
        pool: "green".into(),
        vmid: 120,
        allow_move,
    };
    let cases = [
        (
            "in another pool: moved in one call",
            in_pool(json!("green"), Some(Some("blue"))),
            moved(true),
        ),
        (
            "in none: added",
            in_pool(json!("green"), Some(None)),
            moved(false),
        ),
        (
            "already there",
            in_pool(json!("green"), Some(Some("green"))),
            Step::Idle,
        ),
        (
            "not looked at (not listed yet)",
            in_pool(json!("green"), None),
            Step::Idle,
        ),
        (
            "no pool in the spec",
            in_pool(Value::Null, Some(Some("blue"))),
            Step::Idle,
        ),
    ];
    for (name, got, want) in cases {
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn a_started_task_is_recorded_and_its_end_observed() {
    let c = ct(json!({}), recorded(), json!({}));
    let p = plan(&c, &id(), &obs(Container::Absent), now());
    let upid = "UPID:pve:00001234:00005678:6B49D200:vzcreate:120:root@pam:";
    let settled = settle(
        p,
        &Outcome::Started {
            upid: upid.into(),
            type_: "vzcreate".into(),
        },
        now(),
        Duration::from_secs(600),
    );
    let task = settled.status.at_provider.task.clone().unwrap();
    assert_eq!(
        (task.action, task.upid.as_str()),
        (ContainerTaskAction::Create, upid)
    );
    assert!(settled.events.iter().any(|e| e.reason == "TaskStarted"));
    assert_eq!(
        task.deadline.0,
        now() + Duration::from_secs(600),
        "the deadline is the provider config's tasks.timeout"
    );

    // The next pass, the task ended: cleared, and on to the next step.
    let mut c = ct(json!({}), recorded(), json!({}));
    c.status = Some(settled.status);
    let done = plan(
        &c,
        &id(),
        &Observation {
            task: Some(TaskSeen::Succeeded),
            ..obs(ours(false, &[]))
        },
        now(),
    );
    assert!(done.status.at_provider.task.is_none());
    assert_eq!(kind(&done.step), "start");

    // It failed: reported, and not retried before the backoff.
    let failed = plan(
        &c,
        &id(),
        &Observation {
            task: Some(TaskSeen::Failed("no space".into())),
            ..obs(Container::Absent)
        },
        now(),
    );
    assert_eq!(kind(&failed.step), "idle");
    let synced = find(&failed.status.conditions, ConditionType::Synced).unwrap();
    assert_eq!(
        (synced.status, synced.reason.as_str()),
        (ConditionStatus::False, "TaskFailed")
    );
    let mut again = ct(json!({}), recorded(), json!({}));
    again.status = Some(failed.status);
    let soon = plan(&again, &id(), &obs(Container::Absent), now());
    assert_eq!(kind(&soon.step), "idle", "within the backoff");
    let later = plan(
        &again,
        &id(),
        &obs(Container::Absent),
        now() + Duration::from_secs(60),
    );
    assert_eq!(kind(&later.step), "create", "after the backoff");
}

/// A ProxmoxSnapshot's task (`vzsnapshot`, `vzrollback`, `vzdelsnapshot`)
/// locks the container: its own pass waits (Synced True, `VmLocked`),
/// sends nothing, and looks again shortly.
#[test]
fn a_snapshot_lock_is_waited_for_not_failed() {
    for lock in ["snapshot", "rollback", "snapshot-delete"] {
        let c = ct(json!({"cpu": {"cores": 2}}), recorded(), json!({}));
        let p = plan(&c, &id(), &obs(ours(true, &[("lock", lock)])), now());
        assert_eq!(kind(&p.step), "idle", "{lock}: nothing sent");
        let synced = find(&p.status.conditions, ConditionType::Synced).unwrap();
        assert_eq!(
            (synced.status, synced.reason.as_str()),
            (ConditionStatus::True, "VmLocked"),
            "{lock}"
        );
        assert!(synced.message.as_deref().unwrap_or_default().contains(lock));
    }
}

#[test]
fn ready_follows_the_container_and_carries_the_generation() {
    let c = ct(json!({}), recorded(), json!({}));
    let p = plan(&c, &id(), &obs(ours(true, &[])), now());
    let ready = find(&p.status.conditions, ConditionType::Ready).unwrap();
    assert_eq!(ready.status, ConditionStatus::True);
    assert_eq!(ready.observed_generation, Some(1));
    assert_eq!(p.status.observed_generation, Some(1));
    let refused = settle(
        p,
        &Outcome::Failed("500 boom".into()),
        now(),
        Duration::from_secs(600),
    );
    let synced = find(&refused.status.conditions, ConditionType::Synced).unwrap();
    assert_eq!(synced.status, ConditionStatus::False);
}

/// At rest (its firewall read only at full looks): Ready and Synced for
/// this generation, nothing in flight, not deleted.
#[test]
fn a_container_is_at_rest_only_when_up_to_date_for_its_generation() {
    let c = ct(json!({}), recorded(), json!({}));
    let p = plan(&c, &id(), &obs(ours(true, &[])), now());
    let with = |status: &ProxmoxContainerStatus| {
        let mut c = c.clone();
        c.status = Some(status.clone());
        c
    };
    let up_to_date = with(&p.status);
    assert!(at_rest(&up_to_date));
    assert!(!at_rest(&c), "no status yet");
    let mut changed = up_to_date.clone();
    changed.metadata.generation = Some(2);
    assert!(!at_rest(&changed), "a spec not observed yet");
    let mut busy = p.status.clone();
    busy.at_provider.task = Some(
        serde_json::from_value(task("Start", "vzstart")["atProvider"]["task"].clone()).unwrap(),
    );
    assert!(!at_rest(&with(&busy)), "a task in flight");
    let failed = settle(
        p.clone(),
        &Outcome::Failed("500 boom".into()),
        now(),
        Duration::from_secs(600),
    );
    assert!(!at_rest(&with(&failed.status)), "not Synced");
    assert!(!at_rest(&deleting(up_to_date)), "being deleted");
}

/// `template.image`: waits (ImageNotFound, ImageNotReady, the node
/// recorded so the image brings its file there), refuses an image that is
/// no container template, and creates from the image's volume once it is
/// ready on the node.
#[test]
fn a_container_from_a_proxmox_image_waits_for_it_on_its_node() {
    use crate::api::image::ImageContent;
    use crate::reconcile::common::images::NamedImage;
    let c = ct(
        json!({"template": {"image": {"name": "alpine"}}}),
        recorded(),
        json!({}),
    );
    let found = |content, ready_on: &[&str], deleting| NamedImage::Found {
        content,
        deleting,
        volume: Some("local:vztmpl/alpine_3.20-0123abcd.tar".into()),
        ready_on: ready_on.iter().map(|n| (*n).to_owned()).collect(),
        shared_ready: false,
        summary: Some("1/2 ready".into()),
    };
    let synced = |image: Option<NamedImage>| {
        let o = Observation {
            image,
            ..obs(Container::Absent)
        };
        let p = plan(&c, &id(), &o, now());
        let s = p
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == "Synced")
            .map(|c| (c.reason.clone(), c.message.clone().unwrap_or_default()));
        (p, s.unwrap_or_default())
    };
    let cases = [
        (Some(NamedImage::NotFound), "ImageNotFound"),
        (Some(NamedImage::Unknown), "ImageNotReady"),
        (
            Some(found(ImageContent::Vztmpl, &["pve2"], false)),
            "ImageNotReady",
        ),
        (
            Some(found(ImageContent::Vztmpl, &["pve"], true)),
            "ImageNotReady",
        ),
        (
            Some(found(ImageContent::Import, &["pve"], false)),
            "InvalidSpec",
        ),
    ];
    for (image, want) in cases {
        let (p, (reason, message)) = synced(image.clone());
        assert_eq!(kind(&p.step), "idle", "{image:?}");
        assert_eq!(reason, want, "{image:?}: {message}");
        assert!(message.contains("ns/alpine"), "{message}");
        assert_eq!(p.status.at_provider.node.as_deref(), Some("pve"));
    }
    let (p, _) = synced(Some(found(ImageContent::Vztmpl, &["pve"], false)));
    let Step::Create { node, create } = &p.step else {
        panic!("{:?}", p.step)
    };
    assert_eq!(node, "pve");
    assert_eq!(create.ostemplate, "local:vztmpl/alpine_3.20-0123abcd.tar");
}

mod limits;
mod names;
mod restore;
const FORBIDDEN: &str = r#"secrets "pve" is forbidden: User "system:serviceaccount:ns:provider" cannot get resource "secrets" in API group "" in the namespace "ns""#;

/// A config that is missing or cannot be used: the same condition and
/// retry as a VM's, and no finalizer written for it (the finalizer step
/// could not be carried out without a config, and came back at once).
#[test]
fn a_missing_or_unusable_config_is_reported_before_the_finalizer() {
    let mut fresh = ct(json!({}), json!({}), json!({}));
    fresh.metadata.finalizers = None;
    let cases = [
        (
            "missing",
            ProviderState::NotFound {
                message: "ClusterProviderConfig nope not found".into(),
            },
            "ProviderConfigNotFound",
        ),
        (
            "unusable",
            ProviderState::Unusable {
                message: "the credentials Secret ns/pve does not exist".into(),
            },
            "ReconcileError",
        ),
        (
            "its Secret may not be read",
            ProviderState::Forbidden {
                message: FORBIDDEN.into(),
            },
            "Forbidden",
        ),
    ];
    for (name, state, reason) in cases {
        let o = Observation {
            connection: Err(state),
            ..obs(Container::Unknown)
        };
        let p = plan(&fresh, &id(), &o, now());
        assert_eq!(p.step, Step::Idle, "{name}");
        assert_eq!(p.requeue, Duration::from_secs(30), "{name}: the VM's retry");
        let synced = find(&p.status.conditions, ConditionType::Synced).unwrap();
        assert_eq!(
            (synced.status, synced.reason.as_str()),
            (ConditionStatus::False, reason),
            "{name}"
        );
    }
    // Being deleted with nothing created: the finalizer goes.
    let mut deleting = ct(json!({}), json!({}), json!({}));
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let o = Observation {
        connection: Err(ProviderState::NotFound {
            message: "gone".into(),
        }),
        ..obs(Container::Unknown)
    };
    assert_eq!(
        plan(&deleting, &id(), &o, now()).step,
        Step::RemoveFinalizer
    );
}

#[test]
fn a_container_not_made_here_is_observed_and_taken_over_only_when_asked() {
    let adopt =
        json!({"crossplane.io/external-name": "120", "proxmox.crossplane.io/adopt": "true"});
    let cases: Vec<(&str, Value, Value, Container, &str, &str)> = vec![
        (
            "observed whatever its marker",
            json!({"managementPolicies": ["Observe"]}),
            recorded(),
            unmarked(),
            "idle",
            "ReconcileSuccess",
        ),
        (
            "observed with LateInitialize: unset fields filled first",
            json!({"managementPolicies": ["Observe", "LateInitialize"]}),
            recorded(),
            unmarked(),
            "late-initialize",
            "ReconcileSuccess",
        ),
        (
            "another's, observed",
            json!({"managementPolicies": ["Observe"]}),
            recorded(),
            foreign(),
            "idle",
            "ReconcileSuccess",
        ),
        (
            "managed without the opt-in",
            json!({}),
            recorded(),
            unmarked(),
            "idle",
            "NotOwned",
        ),
        (
            "managed with the opt-in: the marker written",
            json!({}),
            adopt.clone(),
            unmarked(),
            "configure",
            "ReconcileSuccess",
        ),
        (
            "another's marker: never, whatever the opt-in",
            json!({}),
            adopt.clone(),
            foreign(),
            "idle",
            "NotOwned",
        ),
    ];
    for (name, policies, annotations, seen, step, reason) in cases {
        let mut c = ct(json!({}), annotations, json!({}));
        if let Some(p) = policies.get("managementPolicies") {
            c.spec.managed.management_policies = serde_json::from_value(p.clone()).unwrap();
        }
        let p = plan(&c, &id(), &obs(seen), now());
        assert_eq!(kind(&p.step), step, "{name}: {:?}", p.step);
        let synced = find(&p.status.conditions, ConditionType::Synced).unwrap();
        assert_eq!(synced.reason, reason, "{name}: {:?}", synced.message);
        if let Step::LateInitialize(fields) = &p.step {
            assert_eq!(
                **fields,
                json!({"hostname": "app", "description": "made by hand"}),
                "{name}"
            );
        }
        if let Step::Configure { update, .. } = &p.step {
            assert_eq!(
                update.set.keys().collect::<Vec<_>>(),
                ["description"],
                "{name}"
            );
            assert_eq!(
                update.set["description"],
                format!(
                    "made by hand\n\n{}",
                    marker_line_of("ProxmoxContainer", "ns", "app", UID)
                ),
                "{name}"
            );
            assert_eq!(update.digest.as_deref(), Some("d1"), "{name}");
        }
        if reason == "NotOwned" {
            let message = synced.message.clone().unwrap_or_default();
            assert!(
                message.contains("proxmox.crossplane.io/adopt"),
                "{name}: {message}"
            );
            assert_eq!(p.status.at_provider.config, Default::default(), "{name}");
        }
    }
    let foreign_message = {
        let c = ct(json!({}), adopt, json!({}));
        let p = plan(&c, &id(), &obs(foreign()), now());
        find(&p.status.conditions, ConditionType::Synced)
            .and_then(|c| c.message.clone())
            .unwrap_or_default()
    };
    assert!(
        foreign_message.contains("ProxmoxContainer other/app uid=another-uid"),
        "names the marker's owner: {foreign_message}"
    );
}

/// `firewall`: options written first, then the rules (a group by its
/// Proxmox name), nothing once Proxmox holds them; a group that is not
/// Ready is waited for with nothing written and the container not
/// started; without `firewall` nothing is read or written.
#[test]
fn the_containers_firewall_is_written_before_it_starts_and_waits_for_its_group() {
    use crate::reconcile::common::firewall::{FirewallCall, FirewallView, RulePatch, Unusable};
    use pve_client::FirewallOptions;
    use pve_client::firewall::Rule;
    let spec = json!({"firewall": {"rules": [{"securityGroup": "web"}]}});
    let c = ct(spec, recorded(), json!({}));
    let view =
        |options: FirewallOptions, rules: Vec<Rule>, web: Result<String, Unusable>| FirewallView {
            options,
            rules,
            groups: [("web".to_owned(), web)].into(),
            ..FirewallView::default()
        };
    let with = |fw: FirewallView| Observation {
        firewall: Some(fw),
        ..obs(ours(false, &[]))
    };
    let ready = || Ok("web-1a2b3c4d".to_owned());
    let p = plan(
        &c,
        &id(),
        &with(view(FirewallOptions::default(), vec![], ready())),
        now(),
    );
    let Step::Firewall {
        call: FirewallCall::Options { set, .. },
        node,
        vmid,
    } = &p.step
    else {
        panic!("{:?}", p.step)
    };
    assert_eq!((node.as_str(), *vmid, set.enable), ("pve", 120, Some(true)));
    let on = FirewallOptions {
        enable: Some(true),
        ..FirewallOptions::default()
    };
    let p = plan(&c, &id(), &with(view(on.clone(), vec![], ready())), now());
    let Step::Firewall {
        call: FirewallCall::Rules(RulePatch::Prepend(rules)),
        ..
    } = &p.step
    else {
        panic!("{:?}", p.step)
    };
    assert_eq!(
        (rules[0].kind.as_str(), rules[0].action.as_str()),
        ("group", "web-1a2b3c4d")
    );
    let listed = Rule {
        kind: "group".into(),
        action: "web-1a2b3c4d".into(),
        enable: Some(1),
        ..Rule::default()
    };
    let p = plan(
        &c,
        &id(),
        &with(view(on.clone(), vec![listed], ready())),
        now(),
    );
    assert_eq!(kind(&p.step), "start", "then the power state");
    assert!(p.status.at_provider.firewall.is_some());
    let waiting = || {
        Err(Unusable::NotReady(
            "ProxmoxSecurityGroup ns/web is not Ready".into(),
        ))
    };
    let missing = || {
        Err(Unusable::Missing(
            "ProxmoxSecurityGroup ns/web does not exist".into(),
        ))
    };
    for (web, synced_then) in [
        (waiting(), ConditionStatus::True),
        (missing(), ConditionStatus::False),
    ] {
        let p = plan(
            &c,
            &id(),
            &with(view(FirewallOptions::default(), vec![], web)),
            now(),
        );
        assert_eq!(kind(&p.step), "idle", "not started without its firewall");
        let synced = find(&p.status.conditions, ConditionType::Synced).unwrap();
        assert_eq!(synced.reason, "ReferenceNotReady");
        assert_eq!(
            synced.status, synced_then,
            "waiting is not failing; missing is"
        );
        assert!(
            synced
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("spec.forProvider.firewall.rules: ProxmoxSecurityGroup ns/web")
        );
    }
    let plain = ct(json!({}), recorded(), json!({}));
    let p = plan(&plain, &id(), &obs(ours(false, &[])), now());
    assert_eq!(kind(&p.step), "start");
}
