//! A container is checked against its node before it is created, as a VM
//! is (issue 31): memory, cores, thick storage and bridges refuse the
//! create naming the field; thin storage it overprovisions is a Warning; a
//! password Proxmox would answer 413 is refused naming the field.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::{ct, id, now, obs, ours, recorded};
use crate::api::condition::{ConditionType, Reason, find};
use crate::reconcile::common::views::{HostView, StorageView};
use crate::reconcile::container::plan::{Container, Observation, Step, plan};

const GIB: u64 = 1 << 30;

fn host() -> HostView {
    let storage = |plugin: &str, total: u64| StorageView {
        plugin: plugin.into(),
        total,
        used: 0,
    };
    HostView {
        node: "pve".into(),
        cpus: 4,
        memory: 64 * GIB,
        storages: BTreeMap::from([
            ("local-lvm".to_owned(), storage("lvmthin", 400 * GIB)),
            ("thick".to_owned(), storage("lvm", 100 * GIB)),
        ]),
        bridges: Some(BTreeSet::from(["vmbr0".to_owned(), "vb0f1e2d".to_owned()])),
        untagged_vnets: BTreeSet::new(),
        // Another namespace's VNet, on the node.
        foreign_vnets: BTreeSet::from(["vb0f1e2d".to_owned()]),
    }
}

fn absent_on_host() -> Observation {
    Observation {
        host: Some(host()),
        ..obs(Container::Absent)
    }
}

#[test]
fn a_create_is_checked_against_the_node() {
    // (case, spec change, Synced reason when refused | None: created,
    //  a part of the message)
    let cases: Vec<(&str, serde_json::Value, Option<Reason>, &str)> = vec![
        ("fits", json!({}), None, ""),
        (
            "1 TiB memory on a 64 GiB node",
            json!({"memory": "1Ti"}),
            Some(Reason::ExceedsNodeLimits),
            "spec.forProvider.memory 1 TiB is more than node pve's 64 GiB",
        ),
        (
            "more cores than the node",
            json!({"cpu": {"cores": 8}}),
            Some(Reason::ExceedsNodeLimits),
            "spec.forProvider.cpu.cores 8",
        ),
        (
            "rootfs and a mount point beyond a thick storage",
            json!({"rootfs": {"storage": "thick", "size": "60Gi"},
                   "mountPoints": [{"slot": "mp0", "storage": "thick", "size": "60Gi", "path": "/d"}]}),
            Some(Reason::ExceedsNodeLimits),
            "spec.forProvider.rootfs and mountPoints[0] on storage thick",
        ),
        (
            "a bridge the node does not have",
            json!({"networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr9", "ip": "dhcp"}]}),
            Some(Reason::BridgeNotFound),
            "spec.forProvider.networks[0].bridge \"vmbr9\"",
        ),
        (
            "another namespace's VNet",
            json!({"networks": [{"slot": "net0", "name": "eth0", "bridge": "vb0f1e2d", "ip": "dhcp"}]}),
            Some(Reason::BridgeNotFound),
            "spec.forProvider.networks[0].bridge \"vb0f1e2d\" is the VNet of a ProxmoxVNet of another namespace",
        ),
    ];
    for (name, spec, refused, message) in cases {
        let c = ct(spec, recorded(), json!({}));
        let p = plan(&c, &id(), &absent_on_host(), now());
        let synced = find(&p.status.conditions, ConditionType::Synced).expect("Synced");
        match refused {
            None => assert!(
                matches!(p.step, Step::Create { .. }),
                "{name}: {:?}",
                p.step
            ),
            Some(reason) => {
                assert_eq!(p.step, Step::Idle, "{name}: nothing is sent");
                assert_eq!(synced.reason, reason.as_str(), "{name}");
                let text = synced.message.as_deref().unwrap_or_default();
                assert!(text.contains(message), "{name}: {text}");
            }
        }
    }
}

#[test]
fn thin_storage_overprovisioned_is_a_warning_and_the_create_goes_on() {
    let c = ct(
        json!({"rootfs": {"storage": "local-lvm", "size": "1Pi"}}),
        recorded(),
        json!({}),
    );
    let p = plan(&c, &id(), &absent_on_host(), now());
    assert!(matches!(p.step, Step::Create { .. }), "{:?}", p.step);
    let warning = find(&p.status.conditions, ConditionType::Warning).expect("a Warning");
    assert_eq!(warning.reason, Reason::Overprovisioned.as_str());
    assert!(
        warning
            .message
            .as_deref()
            .is_some_and(|m| m.contains("spec.forProvider.rootfs on storage local-lvm")),
        "{warning:?}"
    );
    let fits = plan(
        &ct(json!({}), recorded(), json!({})),
        &id(),
        &absent_on_host(),
        now(),
    );
    assert!(find(&fits.status.conditions, ConditionType::Warning).is_none());
}

#[test]
fn an_oversized_password_is_refused_naming_the_field() {
    let c = ct(
        json!({"passwordSecretRef": {"name": "pw", "key": "password"}}),
        recorded(),
        json!({}),
    );
    let o = Observation {
        password: Some(Err((
            Reason::InvalidSpec,
            "spec.forProvider.passwordSecretRef: too long".into(),
        ))),
        ..absent_on_host()
    };
    let p = plan(&c, &id(), &o, now());
    assert_eq!(p.step, Step::Idle);
    let synced = find(&p.status.conditions, ConditionType::Synced).expect("Synced");
    assert_eq!(synced.reason, Reason::InvalidSpec.as_str());
}

#[test]
fn privileged_containers_and_root_only_features_need_the_configs_policy() {
    use crate::api::provider_config::{ContainerPolicy, RootOnlyFeature};
    let allow_all = ContainerPolicy {
        allow_privileged: true,
        allow_features: vec![RootOnlyFeature::Keyctl, RootOnlyFeature::Fuse],
    };
    // (case, spec change, policy, refused naming this | None: created)
    let cases: Vec<(&str, serde_json::Value, ContainerPolicy, Option<&str>)> = vec![
        (
            "unprivileged with nesting",
            json!({"features": {"nesting": true}}),
            ContainerPolicy::default(),
            None,
        ),
        (
            "privileged",
            json!({"unprivileged": false}),
            ContainerPolicy::default(),
            Some("spec.forProvider.unprivileged is false"),
        ),
        (
            "privileged with nesting",
            json!({"unprivileged": false, "features": {"nesting": true}}),
            ContainerPolicy::default(),
            Some("containerPolicy.allowPrivileged is not true"),
        ),
        (
            "keyctl",
            json!({"features": {"keyctl": true}}),
            ContainerPolicy::default(),
            Some("spec.forProvider.features.keyctl"),
        ),
        (
            "fuse with only keyctl allowed",
            json!({"features": {"fuse": true}}),
            ContainerPolicy {
                allow_features: vec![RootOnlyFeature::Keyctl],
                ..ContainerPolicy::default()
            },
            Some("spec.forProvider.features.fuse"),
        ),
        (
            "all of it, allowed",
            json!({"unprivileged": false, "features": {"keyctl": true, "fuse": true, "nesting": true}}),
            allow_all,
            None,
        ),
    ];
    for (name, spec, policy, refused) in cases {
        let c = ct(spec, recorded(), json!({}));
        let o = Observation {
            policy,
            ..absent_on_host()
        };
        let p = plan(&c, &id(), &o, now());
        match refused {
            None => assert!(
                matches!(p.step, Step::Create { .. }),
                "{name}: {:?}",
                p.step
            ),
            Some(field) => {
                assert_eq!(p.step, Step::Idle, "{name}: nothing is sent");
                let synced = find(&p.status.conditions, ConditionType::Synced).expect("Synced");
                assert_eq!(synced.reason, Reason::NotAllowed.as_str(), "{name}");
                let text = synced.message.as_deref().unwrap_or_default();
                assert!(text.contains(field), "{name}: {text}");
            }
        }
    }
}

/// `template.oci` on Proxmox VE before 9.1: `OciNeedsPve91`, and no
/// oci-registry-pull is sent (PVE 8 has none: it answered "not
/// implemented" before issue 31).
#[test]
fn an_oci_template_on_pve_before_9_1_is_said_and_nothing_is_pulled() {
    let c = ct(
        json!({"template": {"oci": {"reference": "docker.io/library/alpine:3.21", "storage": "local"}}}),
        recorded(),
        json!({}),
    );
    let pulled = Observation {
        template_present: Some(false),
        ..absent_on_host()
    };
    let p = plan(&c, &id(), &pulled, now());
    assert!(matches!(p.step, Step::Pull { .. }), "PVE 9.1: {:?}", p.step);
    let old = Observation {
        oci_unsupported: Some("Proxmox VE 8.4.1".into()),
        ..pulled
    };
    let p = plan(&c, &id(), &old, now());
    assert_eq!(p.step, Step::Idle, "nothing is sent");
    let synced = find(&p.status.conditions, ConditionType::Synced).expect("Synced");
    assert_eq!(synced.reason, Reason::OciNeedsPve91.as_str());
    assert!(
        synced
            .message
            .as_deref()
            .is_some_and(|m| m.contains("spec.forProvider.template.oci") && m.contains("8.4.1")),
        "{synced:?}"
    );
}

/// An existing container whose spec moves a NIC onto another namespace's
/// VNet: nothing of the spec is carried out, the field named; without
/// that VNet in the list the same change would be a config write.
#[test]
fn an_existing_container_is_not_moved_onto_another_namespaces_vnet() {
    let moved = ct(
        json!({"networks": [{"slot": "net0", "name": "eth0", "bridge": "vb0f1e2d", "ip": "dhcp"}]}),
        recorded(),
        json!({}),
    );
    let foreign = Observation {
        foreign_vnets: BTreeSet::from(["vb0f1e2d".to_owned()]),
        ..obs(ours(true, &[]))
    };
    let p = plan(&moved, &id(), &foreign, now());
    assert_eq!(p.step, Step::Idle, "{:?}", p.step);
    let synced = find(&p.status.conditions, ConditionType::Synced).unwrap();
    assert_eq!(synced.reason, Reason::BridgeNotFound.as_str());
    let message = synced.message.clone().unwrap_or_default();
    assert!(
        message.contains("spec.forProvider.networks[0].bridge \"vb0f1e2d\" is the VNet of a ProxmoxVNet of another namespace"),
        "{message}"
    );
    // The same spec, the VNet not another namespace's: written.
    let p = plan(&moved, &id(), &obs(ours(true, &[])), now());
    assert!(matches!(p.step, Step::Configure { .. }), "{:?}", p.step);
}
