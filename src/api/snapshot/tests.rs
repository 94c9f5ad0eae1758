//! ProxmoxSnapshot's CEL rules, evaluated client-side on the generated
//! schema.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::ProxmoxSnapshot;
use crate::api::validation_tests::{assert_verdict, refusals, schema_of};

fn snapshot(for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxSnapshot",
        "metadata": {"name": "before-upgrade", "namespace": "default"},
        "spec": {"forProvider": for_provider},
    })
}

#[test]
fn proxmox_snapshot_rules() {
    let schema = schema_of(ProxmoxSnapshot::crd());
    let of = |kind: &str, extra: Value| {
        let mut p = json!({"guestRef": {"kind": kind, "name": "web"}, "name": "before-upgrade"});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        snapshot(p)
    };
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("a VM snapshot", of("ProxmoxVM", json!({})), None),
        (
            "a VM snapshot with RAM, a description and a rollback request",
            of(
                "ProxmoxVM",
                json!({"vmstate": true, "description": "before the upgrade", "rollbackRequest": "2026-12-04T21:00:00Z"}),
            ),
            None,
        ),
        (
            "a container snapshot",
            of("ProxmoxContainer", json!({})),
            None,
        ),
        (
            "a container snapshot saying vmstate: false",
            of("ProxmoxContainer", json!({"vmstate": false})),
            None,
        ),
        (
            "a container snapshot with RAM",
            of("ProxmoxContainer", json!({"vmstate": true})),
            Some("vmstate (saving the RAM) exists for VMs only"),
        ),
        (
            "a name starting with a digit",
            of("ProxmoxVM", json!({"name": "1st"})),
            Some("name must start with a letter"),
        ),
        (
            "a name with a dot",
            of("ProxmoxVM", json!({"name": "v1.2"})),
            Some("name must start with a letter"),
        ),
        (
            "the reserved name current",
            of("ProxmoxVM", json!({"name": "current"})),
            Some("name cannot be current or pending"),
        ),
        (
            "the reserved name Pending",
            of("ProxmoxVM", json!({"name": "Pending"})),
            Some("name cannot be current or pending"),
        ),
        (
            "the owner marker in the description",
            of(
                "ProxmoxVM",
                json!({"description": "Managed by crossplane-provider-proxmox: x"}),
            ),
            Some("description must not contain the owner marker"),
        ),
    ];
    for (name, object, want) in cases {
        assert_verdict(name, &refusals(&schema, &object, None), want);
    }
}
