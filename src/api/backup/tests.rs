//! ProxmoxBackup's CEL rules, evaluated client-side on the generated schema.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::ProxmoxBackup;
use crate::api::validation_tests::{assert_verdict, refusals, schema_of};

fn backup(extra: Value) -> Value {
    let mut p = json!({"guestRef": {"kind": "ProxmoxVM", "name": "web"}, "storage": "local"});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxBackup",
        "metadata": {"name": "web-now", "namespace": "default"},
        "spec": {"forProvider": p},
    })
}

#[test]
fn proxmox_backup_rules() {
    let schema = schema_of(ProxmoxBackup::crd());
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("a VM backup", backup(json!({})), None),
        (
            "every field",
            backup(json!({
                "mode": "stop", "compress": "zstd", "protected": true,
                "notesTemplate": "{{guestname}} before the upgrade\\nby the platform team \\\\o/",
            })),
            None,
        ),
        (
            "a container backup",
            backup(json!({"guestRef": {"kind": "ProxmoxContainer", "name": "db"}})),
            None,
        ),
        (
            "a storage that is no storage ID",
            backup(json!({"storage": "local lvm"})),
            Some("storage must be a Proxmox storage ID"),
        ),
        (
            "a backslash Proxmox refuses in the notes",
            backup(json!({"notesTemplate": "C:\\temp"})),
            Some("notesTemplate may use a backslash only as"),
        ),
        (
            "a lone backslash at the end of the notes",
            backup(json!({"notesTemplate": "end\\"})),
            Some("notesTemplate may use a backslash only as"),
        ),
        (
            "the owner marker in the notes",
            backup(json!({"notesTemplate": "Managed by crossplane-provider-proxmox: x"})),
            Some("notesTemplate must not contain the owner marker"),
        ),
    ];
    for (name, object, want) in cases {
        assert_verdict(name, &refusals(&schema, &object, None), want);
    }
}

#[test]
fn proxmox_backup_keeps_what_made_the_archive() {
    let schema = schema_of(ProxmoxBackup::crd());
    let old = backup(json!({"mode": "snapshot", "protected": false}));
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "protection changed",
            backup(json!({"mode": "snapshot", "protected": true})),
            None,
        ),
        (
            "mode changed",
            backup(json!({"mode": "stop", "protected": false})),
            Some("mode cannot be changed"),
        ),
        (
            "storage changed",
            backup(json!({"mode": "snapshot", "storage": "nfs", "protected": false})),
            Some("storage cannot be changed"),
        ),
    ];
    for (name, object, want) in cases {
        assert_verdict(name, &refusals(&schema, &object, Some(&old)), want);
    }
}
