//! The CRDs' CEL rules, evaluated client-side (kube's `cel` feature, enabled
//! for tests only) on the generated schemas: each rule compiles, stays within
//! the API server's cost budget, accepts good manifests and refuses bad ones
//! with the message a person will read. The real API server checks the same
//! rules (and the OpenAPI patterns, enums and bounds) in the integration tests,
//! and it is the authority: kube-cel knows functions kube-apiserver 1.36 does
//! not (it accepted `quantity(...).sign()`, which the server refuses).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::cel::{ScopeContext, Validator, WarningKind, analyze_rule, compile_schema};
use serde_json::{Value, json};

use crate::api::{
    ClusterProviderConfig, ProviderConfig, ProxmoxContainer, ProxmoxImage, ProxmoxVM,
};

pub(super) fn schema_of(crd: CustomResourceDefinition) -> Value {
    let schema = crd.spec.versions[0]
        .schema
        .clone()
        .and_then(|s| s.open_api_v3_schema)
        .expect("derived CRDs have a schema");
    serde_json::to_value(schema).unwrap()
}

/// The messages of every rule that refuses `object` (given `old` for updates).
pub(super) fn refusals(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    match Validator::new().validate(schema, object, old) {
        Ok(()) => vec![],
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

/// Asserts a case's verdict: accepted (`want` is `None`), or refused with a
/// message that contains `want`.
pub(super) fn assert_verdict(name: &str, got: &[String], want: Option<&str>) {
    match want {
        None => assert!(got.is_empty(), "{name}: refused: {got:?}"),
        Some(msg) => assert!(
            got.iter().any(|g| g.contains(msg)),
            "{name}: want a refusal containing {msg:?}, got {got:?}"
        ),
    }
}

pub(super) fn vm(for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxVM",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"forProvider": for_provider},
    })
}

pub(super) fn good_disk() -> Value {
    json!({
        "slot": "scsi0",
        "storage": "local-lvm",
        "size": "20Gi",
        "image": {
            "url": "https://images.example/jammy.img",
            "checksum": "a".repeat(64),
            "checksumAlgorithm": "sha256",
        },
    })
}

/// Walks every node of a schema, calling `f` on nodes that carry rules.
fn each_rule_node(node: &Value, path: &str, f: &mut dyn FnMut(&str, &Value)) {
    if node.get("x-kubernetes-validations").is_some() {
        f(path, node);
    }
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            each_rule_node(child, &format!("{path}.{name}"), f);
        }
    }
    if let Some(items) = node.get("items") {
        each_rule_node(items, &format!("{path}[]"), f);
    }
}

#[test]
fn every_rule_compiles_and_fits_the_cost_budget() {
    let crds = [
        ProxmoxVM::crd(),
        ProxmoxImage::crd(),
        ProxmoxContainer::crd(),
        ProviderConfig::crd(),
        ClusterProviderConfig::crd(),
    ];
    let mut rules = 0;
    for crd in crds {
        let schema = schema_of(crd);
        each_rule_node(&schema, "", &mut |path, node| {
            let compiled = compile_schema(node);
            let errors = compiled.compilation_errors();
            assert!(errors.is_empty(), "{path}: {errors:?}");
            for rule in node["x-kubernetes-validations"].as_array().unwrap() {
                rules += 1;
                let text = rule["rule"].as_str().unwrap();
                assert!(
                    rule.get("message").is_some(),
                    "{path}: `{text}` has no message"
                );
                // The scope check does not know comprehension variables
                // (`self.all(d, ...)`), so only cost and bounds count here.
                let warnings: Vec<_> = analyze_rule(text, &compiled, ScopeContext::CrdValidation)
                    .into_iter()
                    .filter(|w| w.kind != WarningKind::WrongScope)
                    .collect();
                assert!(warnings.is_empty(), "{path}: `{text}`: {warnings:?}");
            }
        });
    }
    assert!(
        rules > 30,
        "only {rules} rules found: did the schema walk break?"
    );
}

mod container;
mod hardware;
mod image;
mod provider_config;
mod vm;
