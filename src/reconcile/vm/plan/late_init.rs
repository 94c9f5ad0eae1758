//! `LateInitialize`: the spec fields the user left unset, filled from what
//! the VM shows (`status.atProvider`), as crossplane-runtime's late
//! initialisation does. Only when the policies name `LateInitialize`
//! (see [`crate::api::managed::ManagedSpec::late_initializes`]); a field the
//! user set is never overwritten, and a field the spec's schema defaults
//! (`cpu.cores`, `memory`, `powerState`) counts as set.
//!
//! The result is a JSON merge patch of `spec.forProvider`, which the pass
//! sends with a field manager of its own
//! ([`crate::api::managed::LATE_INIT_MANAGER`]), so a GitOps tool's apply
//! neither owns nor removes what was filled in.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::api::vm::{VmObserved, VmParameters};

/// The unset fields of `spec` that `seen` can fill, as a merge patch of
/// `spec.forProvider`; `None` when there is none.
pub fn fields(spec: &VmParameters, seen: &VmObserved) -> Option<Value> {
    let mut patch = Map::new();
    let mut put = |key: &str, unset: bool, seen: Option<Value>| {
        if let (true, Some(seen)) = (unset, seen) {
            patch.insert(key.to_owned(), seen);
        }
    };
    put(
        "name",
        spec.name.is_none(),
        seen.name.as_ref().map(|n| json!(n)),
    );
    // A disk of the spec needs a size (it is neither imported nor
    // downloaded), a card a bridge: the list is filled whole or not at all.
    put(
        "disks",
        spec.disks.is_empty(),
        (!seen.disks.is_empty() && seen.disks.iter().all(|d| d.size.is_some()))
            .then(|| value(&seen.disks)),
    );
    put(
        "networks",
        spec.networks.is_empty(),
        (!seen.networks.is_empty() && seen.networks.iter().all(|n| n.bridge.is_some()))
            .then(|| value(&seen.networks)),
    );
    put(
        "cloudInit",
        spec.cloud_init.is_none() && spec.custom_cloud_init.is_none(),
        seen.cloud_init.as_ref().map(value),
    );
    put(
        "agent",
        spec.agent.is_none(),
        seen.agent.as_ref().map(value),
    );
    put(
        "tags",
        spec.tags.is_empty(),
        (!seen.tags.is_empty()).then(|| value(&seen.tags)),
    );
    put(
        "description",
        spec.description.is_none(),
        seen.description.as_ref().map(|d| json!(d)),
    );
    put(
        "onBoot",
        spec.on_boot.is_none(),
        seen.on_boot.map(|b| json!(b)),
    );
    put(
        "scsiController",
        spec.scsi_controller.is_none(),
        seen.scsi_controller.as_ref().map(value),
    );
    let cpu = seen.cpu.as_ref();
    let mut cpu_patch = Map::new();
    if let (None, Some(model)) = (&spec.cpu.type_, cpu.and_then(|c| c.type_.as_ref())) {
        cpu_patch.insert("type".into(), json!(model));
    }
    if let (None, Some(numa)) = (spec.cpu.numa, cpu.and_then(|c| c.numa)) {
        cpu_patch.insert("numa".into(), json!(numa));
    }
    if !cpu_patch.is_empty() {
        patch.insert("cpu".into(), Value::Object(cpu_patch));
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

fn value(v: &impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vm::{GuestAgent, NetworkModel, ObservedCpu, ObservedDisk, ObservedNetwork};

    fn spec(fields: Value) -> VmParameters {
        serde_json::from_value(fields).expect("a spec")
    }

    fn seen() -> VmObserved {
        VmObserved {
            name: Some("legacy".into()),
            cpu: Some(ObservedCpu {
                cores: 4,
                sockets: 1,
                type_: Some("host".into()),
                numa: None,
            }),
            memory: Some("4Gi".into()),
            disks: vec![ObservedDisk {
                slot: "scsi0".into(),
                storage: "local-lvm".into(),
                size: Some("32Gi".into()),
            }],
            networks: vec![ObservedNetwork {
                slot: "net0".into(),
                model: NetworkModel::Virtio,
                bridge: Some("vmbr0".into()),
                vlan_tag: None,
                mac: Some("BC:24:11:00:00:01".into()),
                firewall: false,
            }],
            agent: Some(GuestAgent { enabled: true }),
            tags: vec!["legacy".into()],
            description: Some("hand made".into()),
            on_boot: Some(true),
            ..VmObserved::default()
        }
    }

    #[test]
    fn only_unset_fields_are_filled() {
        let cases = [
            (
                "an empty spec takes every field the VM shows",
                json!({}),
                Some(json!({
                    "name": "legacy",
                    "disks": [{"slot": "scsi0", "storage": "local-lvm", "size": "32Gi"}],
                    "networks": [{"slot": "net0", "model": "virtio", "bridge": "vmbr0", "mac": "BC:24:11:00:00:01", "firewall": false}],
                    "agent": {"enabled": true},
                    "tags": ["legacy"],
                    "description": "hand made",
                    "onBoot": true,
                    "cpu": {"type": "host"},
                })),
            ),
            (
                "set fields are kept, even when they differ",
                json!({
                    "name": "renamed", "tags": ["mine"], "description": "mine",
                    "onBoot": false, "cpu": {"cores": 4, "type": "kvm64"},
                    "agent": {"enabled": false},
                    "disks": [{"slot": "scsi0", "storage": "ceph", "size": "64Gi"}],
                    "networks": [{"slot": "net0", "bridge": "vmbr1"}],
                }),
                None,
            ),
            (
                "memory and cores are schema defaults: never filled",
                json!({"name": "x", "tags": ["t"], "description": "d", "onBoot": true,
                       "agent": {"enabled": true}, "cpu": {"type": "host"},
                       "disks": [{"slot": "scsi0", "storage": "s", "size": "1Gi"}],
                       "networks": [{"slot": "net0", "bridge": "vmbr0"}]}),
                None,
            ),
        ];
        for (name, given, want) in cases {
            assert_eq!(fields(&spec(given), &seen()), want, "{name}");
        }
    }

    #[test]
    fn lists_the_spec_could_not_take_are_left_out() {
        let mut seen = seen();
        seen.disks[0].size = None;
        seen.networks[0].bridge = None;
        let patch = fields(&spec(json!({})), &seen).expect("other fields");
        assert!(patch.get("disks").is_none(), "a disk without a size");
        assert!(patch.get("networks").is_none(), "a card without a bridge");
        assert_eq!(patch["name"], "legacy");
    }
}
