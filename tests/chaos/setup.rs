//! The objects a run starts from: the credentials Secrets, the cloud-init
//! password Secret and the two ProviderConfigs (API token, login), both
//! pinned to the simulator's certificate.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::{Value, json};

use super::fleet::{CONFIGS, PASSWORD_SECRET};
use super::k8s;
use super::secrets::{Credentials, LOGIN_USER, TOKEN_ID};
use super::sim::Sim;
use crate::support;

/// Where a run keeps its logs: `target/tmp/chaos`, emptied at the start
/// of each run and left behind for reading afterwards.
pub fn run_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chaos");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("emptying {}: {e}", dir.display()));
    }
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// A Secret manifest with `data` as its `stringData`.
pub fn secret(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data})
}

/// A ProviderConfig `name` for `sim`, reading the Secret `<name>-credentials`.
pub fn provider_config(name: &str, sim: &Sim) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProviderConfig",
        "metadata": {"name": name},
        "spec": {
            "endpoint": sim.base_url,
            "credentials": {"source": "Secret", "secretRef": {"name": format!("{name}-credentials")}},
            "tls": {"fingerprint": sim.fingerprint},
            "tasks": {"pollInterval": "500ms", "timeout": "10m", "shutdownTimeout": "5s"},
            "resyncInterval": "10s",
            "limits": {"maxConcurrentRequests": 16, "requestsPerSecond": 200},
        },
    })
}

/// Applies the Secrets and ProviderConfigs into `ns`.
pub async fn configs(ns: &str, sim: &Sim, creds: &Credentials) {
    let [token, login] = CONFIGS;
    let secrets = [
        secret(
            &format!("{token}-credentials"),
            json!({"tokenId": TOKEN_ID, "secret": creds.token_secret}),
        ),
        secret(
            &format!("{login}-credentials"),
            json!({"username": LOGIN_USER, "password": creds.password}),
        ),
        secret(
            PASSWORD_SECRET,
            json!({"password": creds.cloud_init_password}),
        ),
    ];
    let secrets_api: Api<Secret> = Api::namespaced(support::client(), ns);
    for object in &secrets {
        k8s::apply(&secrets_api, object).await;
    }
    let configs = k8s::configs(ns);
    for name in CONFIGS {
        k8s::apply(&configs, &provider_config(name, sim)).await;
    }
}
