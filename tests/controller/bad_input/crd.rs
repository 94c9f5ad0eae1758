//! Writing objects around the schema, as with an older or looser CRD
//! installed: the CRDs are swapped for copies that accept any object, the
//! objects are written, and the real CRDs are restored. The CRDs are the
//! cluster's, so this holds them [`schema::loose`] meanwhile, and tests
//! that rely on the real ones wait (see `reconcile::schema`).

use std::time::Duration;

use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::refused;
use crate::reconcile::{Env, schema};
use crate::support;

/// Writes `objects` into `env`'s namespace while the CRDs accept anything,
/// then restores the real ones, which `env` holds again afterwards.
pub async fn write_around_the_schema(env: &mut Env, objects: &[Value]) {
    env.release_crds();
    let only_us = schema::loose().await;
    let namespace = &env.ns.name().to_owned();
    let probe = refused::vm_with(json!({"memory": 4096}));
    support::apply_objects(&crds(true), None).await;
    until_verdict(&probe, namespace, true).await;
    let objects: Vec<DynamicObject> = objects
        .iter()
        .map(|o| serde_json::from_value(o.clone()).expect("a Kubernetes object"))
        .collect();
    support::apply_objects(&objects, Some(namespace)).await;
    support::apply_objects(&crds(false), None).await;
    until_verdict(&probe, namespace, false).await;
    drop(only_us);
    env.hold_crds().await;
}

/// The repository's CRDs, or copies whose schema accepts any object.
fn crds(loose: bool) -> Vec<DynamicObject> {
    support::read_manifests(&support::repo_root().join("crds"))
        .into_iter()
        .map(|(_, mut crd)| {
            if loose && let Some(versions) = crd.data["spec"]["versions"].as_array_mut() {
                for v in versions {
                    v["schema"]["openAPIV3Schema"] =
                        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
                }
            }
            crd
        })
        .filter(|crd| {
            crd.types
                .as_ref()
                .is_some_and(|t| t.kind == "CustomResourceDefinition")
        })
        .collect()
}

/// Waits until the API server serves the schema just applied: `probe` is
/// accepted (loose) or refused (strict).
async fn until_verdict(probe: &Value, namespace: &str, accepted: bool) {
    let what = if accepted {
        "the loose CRD"
    } else {
        "the real CRD"
    };
    support::poll(
        &format!("{what} to be served"),
        Duration::from_secs(60),
        || async {
            match refused::dry_run(probe, namespace).await {
                Ok(()) if accepted => Ok(()),
                Err(_) if !accepted => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}
