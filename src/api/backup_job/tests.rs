//! ProxmoxBackupJob's CEL rules, evaluated client-side on the generated
//! schema.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::ProxmoxBackupJob;
use crate::api::validation_tests::{assert_verdict, refusals, schema_of};

fn job(for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxBackupJob",
        "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {"forProvider": for_provider},
    })
}

#[test]
fn proxmox_backup_job_rules() {
    let schema = schema_of(ProxmoxBackupJob::crd());
    let web = json!({"matchLabels": {"tier": "web"}});
    let with = |extra: Value| {
        let mut p = json!({"schedule": "mon..fri 02:00", "guestSelector": web});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        job(p)
    };
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("a selector", with(json!({})), None),
        (
            "a pool",
            job(json!({"schedule": "daily", "pool": "team-a"})),
            None,
        ),
        (
            "everything",
            with(json!({"storage": "pbs", "mode": "stop", "compress": "zstd",
                "pruneBackups": {"keepLast": 3, "keepDaily": 7}, "notesTemplate": "{{guestname}}",
                "enabled": false, "protected": true, "node": "pve", "comment": "nightly"})),
            None,
        ),
        (
            "both selector and pool",
            with(json!({"pool": "team-a"})),
            Some("exactly one of guestSelector and pool"),
        ),
        (
            "neither",
            job(json!({"schedule": "daily"})),
            Some("exactly one of guestSelector and pool"),
        ),
        (
            "a schedule in words",
            with(json!({"schedule": "every night"})),
            None,
        ),
        (
            "a schedule with a quote",
            with(json!({"schedule": "daily'"})),
            Some("schedule must be a calendar event"),
        ),
        (
            "a blank schedule",
            with(json!({"schedule": "  "})),
            Some("schedule must be a calendar event"),
        ),
        (
            "keepAll with keepLast",
            with(json!({"pruneBackups": {"keepAll": true, "keepLast": 1}})),
            Some("keepAll cannot be set together"),
        ),
        (
            "notes without storage",
            with(json!({"notesTemplate": "x"})),
            Some("notesTemplate needs storage"),
        ),
        (
            "protected without storage",
            with(json!({"protected": true})),
            Some("protected needs storage"),
        ),
        (
            "a bad storage ID",
            with(json!({"storage": "1 bad"})),
            Some("must be a Proxmox storage ID"),
        ),
    ];
    for (name, object, want) in cases {
        assert_verdict(name, &refusals(&schema, &object, None), want);
    }
}
