//! ProviderConfig and ClusterProviderConfig rules.

use serde_json::{Value, json};

use super::{assert_verdict, refusals, schema_of};
use crate::api::{ClusterProviderConfig, ProviderConfig};
use kube::CustomResourceExt;

fn provider_config(kind: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "default"},
        "spec": spec,
    })
}

#[test]
fn provider_config_rules() {
    let namespaced = schema_of(ProviderConfig::crd());
    let cluster = schema_of(ClusterProviderConfig::crd());
    let secret = |ns: Option<&str>| match ns {
        Some(ns) => json!({"secretRef": {"name": "pve", "namespace": ns}}),
        None => json!({"secretRef": {"name": "pve"}}),
    };
    let fp = ["AB"; 32].join(":");
    // (case, schema, kind, spec, None | Some(message))
    let cases: Vec<(&str, &Value, &str, Value, Option<&str>)> = vec![
        (
            "namespaced, own namespace",
            &namespaced,
            "ProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(None)}),
            None,
        ),
        (
            "namespaced naming another namespace",
            &namespaced,
            "ProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("other"))}),
            Some("reads its Secret from its own namespace"),
        ),
        (
            "cluster without namespace",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(None)}),
            Some("must name the Secret's namespace"),
        ),
        (
            "cluster with namespace and pinned fingerprint",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("crossplane-system")),
                   "tls": {"fingerprint": fp.clone()}}),
            None,
        ),
        (
            "plain http to a real host",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "http://pve.example:8006", "credentials": secret(Some("x"))}),
            Some(
                "endpoint is http://: every request would carry the API token or password in clear",
            ),
        ),
        (
            "plain http to loopback needs the opt-in too",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "http://127.0.0.1:8006", "credentials": secret(Some("x"))}),
            Some("set tls.insecureAllowPlainHTTP: true to accept that"),
        ),
        (
            "plain http with the opt-in",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "http://pve.example:8006", "credentials": secret(Some("x")),
                   "tls": {"insecureAllowPlainHTTP": true}}),
            None,
        ),
        (
            "the opt-in set to false",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "http://pve.example:8006", "credentials": secret(Some("x")),
                   "tls": {"insecureAllowPlainHTTP": false}}),
            Some("endpoint is http://"),
        ),
        (
            "another scheme",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "ftp://pve.example:8006", "credentials": secret(Some("x"))}),
            Some("endpoint must be an https:// URL"),
        ),
        (
            "short fingerprint",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("x")),
                   "tls": {"fingerprint": "AB:CD"}}),
            Some("fingerprint must be a SHA-256 fingerprint"),
        ),
        (
            "insecure and pinned",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("x")),
                   "tls": {"fingerprint": fp.clone(), "insecureSkipTLSVerify": true}}),
            Some("insecureSkipTLSVerify turns verification off"),
        ),
        (
            "poll interval too short",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("x")),
                   "tasks": {"pollInterval": "10ms"}}),
            Some("pollInterval must be a Go duration between 500ms and 5m"),
        ),
        (
            "tuned timing",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("x")),
                   "tasks": {"pollInterval": "1s", "timeout": "30m"}, "resyncInterval": "30s"}),
            None,
        ),
    ];
    for (name, schema, kind, spec, want) in cases {
        let got = refusals(schema, &provider_config(kind, spec), None);
        assert_verdict(name, &got, want);
    }
}
