//! A namespace of its own for every test.

use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};

use super::cluster::{client, cluster};

/// Every namespace made here carries this label, so leftovers on a shared
/// cluster can be removed with `kubectl delete ns -l <label>=true`.
pub const LABEL: &str = "test.crossplane-provider-proxmox/owned";

/// A namespace that exists until the test ends. On drop, deletion is
/// requested (best effort): with no namespace controller running, it then
/// stays `Terminating`, which is harmless for a throw-away control plane.
pub struct TestNamespace {
    name: String,
}

impl TestNamespace {
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Display for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// Creates `<prefix>-<pid>-<n>-<random>`: unique within the binary (counter),
/// across concurrent binaries on one cluster (pid) and across reruns
/// against a long-lived cluster (random).
pub async fn namespace(prefix: &str) -> TestNamespace {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let prefix: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(30)
        .collect();
    let name = format!(
        "{}-{}-{}-{:04x}",
        prefix.trim_matches('-'),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        rand::random::<u16>()
    );
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.clone());
    ns.labels_mut().insert(LABEL.into(), "true".into());
    Api::<Namespace>::all(client())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
    TestNamespace { name }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be shutting down:
        // ask from a short-lived thread with its own runtime.
        let name = self.name.clone();
        let config = cluster().config.clone();
        let deleted = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let namespaces = Api::<Namespace>::all(kube::Client::try_from(config).ok()?);
                let params = DeleteParams::background();
                let request = namespaces.delete(&name, &params);
                tokio::time::timeout(std::time::Duration::from_secs(10), request)
                    .await
                    .ok()?
                    .ok()
            })
        })
        .join();
        // Best effort by design: a namespace left behind harms no later test.
        drop(deleted);
    }
}
