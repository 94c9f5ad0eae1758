//! ProxmoxPool's CEL rules, evaluated client-side on the generated schema.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::ProxmoxPool;
use crate::api::validation_tests::{assert_verdict, refusals, schema_of};

fn pool(for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxPool",
        "metadata": {"name": "team-a", "namespace": "default"},
        "spec": {"forProvider": for_provider},
    })
}

#[test]
fn proxmox_pool_rules() {
    let schema = schema_of(ProxmoxPool::crd());
    let access = |entry: Value| pool(json!({"poolId": "team-a", "access": [entry]}));
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "plain",
            pool(json!({"poolId": "team-a", "comment": "Team A"})),
            None,
        ),
        (
            "a user, a group and a token",
            pool(json!({"poolId": "team-a", "access": [
                {"role": "PVEVMUser", "user": "alice@pve"},
                {"role": "PVEAuditor", "group": "devs", "propagate": false},
                {"role": "PVEPoolUser", "token": "ci@pve!deploy"},
            ]})),
            None,
        ),
        (
            "an ID starting with a digit",
            pool(json!({"poolId": "1team"})),
            Some("poolId must start with a letter"),
        ),
        (
            "a nested ID",
            pool(json!({"poolId": "team/a"})),
            Some("poolId must start with a letter and hold only"),
        ),
        (
            "the owner marker in the comment",
            pool(
                json!({"poolId": "a", "comment": "x\nManaged by crossplane-provider-proxmox: ProxmoxPool o/p uid=u"}),
            ),
            Some("comment must not contain the owner marker"),
        ),
        (
            "no subject",
            access(json!({"role": "PVEVMUser"})),
            Some("exactly one of user, group and token must be set"),
        ),
        (
            "two subjects",
            access(json!({"role": "PVEVMUser", "user": "a@pve", "group": "g"})),
            Some("exactly one of user, group and token must be set"),
        ),
        (
            "a user without a realm",
            access(json!({"role": "PVEVMUser", "user": "alice"})),
            Some("user must be name@realm"),
        ),
        (
            "a token without its ID",
            access(json!({"role": "PVEVMUser", "token": "ci@pve"})),
            Some("token must be name@realm!tokenid"),
        ),
        (
            "a role with a space",
            access(json!({"role": "PVE VMUser", "user": "a@pve"})),
            Some("role must be a Proxmox role ID"),
        ),
    ];
    for (name, object, want) in cases {
        assert_verdict(name, &refusals(&schema, &object, None), want);
    }
    let old = pool(json!({"poolId": "team-a"}));
    let renamed = pool(json!({"poolId": "team-b"}));
    assert_verdict(
        "poolId changed",
        &refusals(&schema, &renamed, Some(&old)),
        Some("poolId cannot be changed"),
    );
}
