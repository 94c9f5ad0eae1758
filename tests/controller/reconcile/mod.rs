//! Shared helpers for the controller's integration tests: a real
//! kube-apiserver (tests/support), an in-process pve-sim, and the
//! controller started in-process for one namespace.
//!
//! [`Env::start`] gives each test its own namespace with the CRDs, a
//! pve-sim, a credentials Secret and a ProviderConfig `pve` pinned to the
//! sim's fingerprint, and a running controller scoped to the namespace (so
//! tests of the suite run side by side). The sim's request log is the
//! referee for what the controller sent to Proxmox.

pub mod configs;
pub mod containers;
pub mod logs;
pub mod manifests;
pub mod schema;
pub mod sim;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Secret};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use provider_proxmox::api::{ProxmoxVM, condition::Condition};
use provider_proxmox::reconcile::{Runtime, Settings};
use serde_json::{Value, json};
use tokio::sync::{RwLockReadGuard, oneshot};
use tokio::task::JoinHandle;

use crate::support;
pub use sim::Sim;

/// Generous deadline for anything a test waits for (a loaded 2-core machine).
pub const DEADLINE: Duration = Duration::from_secs(180);

/// How a test's environment is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// pve-sim time scale (0.01: a 30 s import takes 0.3 s).
    pub time_scale: f64,
    /// Merged into the ProviderConfig's spec.
    pub provider: Value,
    /// pve-sim's nodes (the first holds template 9000).
    pub nodes: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            time_scale: 0.01,
            provider: json!({}),
            nodes: vec!["pve".into()],
        }
    }
}

/// A controller running in-process.
pub struct Controller {
    stop: Option<oneshot::Sender<()>>,
    join: JoinHandle<Result<(), provider_proxmox::reconcile::Error>>,
    /// Its metrics, to read directly.
    pub metrics: std::sync::Arc<provider_proxmox::reconcile::runtime::metrics::Metrics>,
    /// Where it serves /metrics, /healthz, /readyz, if asked to.
    pub addr: Option<std::net::SocketAddr>,
}

impl Controller {
    /// Starts a controller with `settings` and the given Kubernetes client.
    pub async fn start(kube: kube::Client, settings: Settings) -> Self {
        let runtime = Runtime::new(kube, settings)
            .await
            .expect("the controller binds its listener");
        let metrics = runtime.metrics();
        let addr = runtime.metrics_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let join = tokio::spawn(runtime.run(async move {
            let _ = stopped.await;
        }));
        Self {
            stop: Some(stop),
            join,
            metrics,
            addr,
        }
    }

    /// Stops it gracefully and waits until it has.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(60), &mut self.join)
            .await
            .expect("the controller stops within a minute")
            .expect("the controller task does not panic")
            .expect("the controller ends without error");
    }

    /// Kills it: the task is aborted wherever it is (mid-pass included).
    pub async fn kill(self) {
        self.join.abort();
        let _ = self.join.await;
    }
}

/// One test's world.
pub struct Env {
    pub ns: support::TestNamespace,
    pub sim: Sim,
    pub controller: Option<Controller>,
    /// The real CRDs, held in place while the test runs ([`schema`]).
    crds: Option<RwLockReadGuard<'static, ()>>,
}

impl Env {
    /// Namespace, CRDs, pve-sim, Secret + ProviderConfig, controller.
    pub async fn start(prefix: &str) -> Self {
        Self::start_with(prefix, Options::default()).await
    }

    pub async fn start_with(prefix: &str, options: Options) -> Self {
        let mut env = Self::without_controller(prefix, options).await;
        env.controller = Some(Controller::start(support::client(), env.settings()).await);
        env
    }

    /// Like [`Env::start_with`], but the test starts controllers itself.
    pub async fn without_controller(prefix: &str, options: Options) -> Self {
        provider_proxmox::install_crypto_provider();
        logs::capture();
        let crds = schema::strict().await;
        support::install_crds(support::repo_root().join("crds")).await;
        let ns = support::namespace(prefix).await;
        let sim = Sim::start_on(options.time_scale, options.nodes.clone()).await;
        let env = Self {
            ns,
            sim,
            controller: None,
            crds: Some(crds),
        };
        env.apply(&manifests::credentials()).await;
        env.apply(&manifests::provider_config(&env.sim, &options.provider))
            .await;
        env
    }

    /// Lets go of the real CRDs, so that this test may take them
    /// [`schema::loose`]; [`Env::hold_crds`] holds them again.
    pub fn release_crds(&mut self) {
        self.crds = None;
    }

    /// Holds the real CRDs in place again (after [`Env::release_crds`]).
    pub async fn hold_crds(&mut self) {
        if self.crds.is_none() {
            self.crds = Some(schema::strict().await);
        }
    }

    /// Controller settings for this namespace.
    pub fn settings(&self) -> Settings {
        Settings {
            namespace: Some(self.ns.name().to_owned()),
            identity: format!("test-{}", self.ns.name()),
            ..Settings::default()
        }
    }

    /// Stops the running controller (gracefully).
    pub async fn stop_controller(&mut self) {
        if let Some(c) = self.controller.take() {
            c.stop().await;
        }
    }

    /// Kills the running controller.
    pub async fn kill_controller(&mut self) {
        if let Some(c) = self.controller.take() {
            c.kill().await;
        }
    }

    /// Starts a controller (admin credentials).
    pub async fn start_controller(&mut self) {
        assert!(self.controller.is_none(), "a controller already runs");
        self.controller = Some(Controller::start(support::client(), self.settings()).await);
    }

    /// Server-side applies a manifest (JSON) into the namespace.
    pub async fn apply(&self, object: &Value) {
        let object = serde_json::from_value(object.clone()).expect("a Kubernetes object");
        support::apply_objects(&[object], Some(self.ns.name())).await;
    }

    pub fn vms(&self) -> Api<ProxmoxVM> {
        Api::namespaced(support::client(), self.ns.name())
    }

    pub async fn vm(&self, name: &str) -> ProxmoxVM {
        self.vms()
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("GET ProxmoxVM {name}: {e}"))
    }

    /// Merge-patches a ProxmoxVM (as a user would with `kubectl patch`).
    pub async fn patch_vm(&self, name: &str, patch: Value) {
        self.vms()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patching ProxmoxVM {name}: {e}"));
    }

    /// Polls the ProxmoxVM until `check` accepts it.
    pub async fn wait_vm<T>(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ProxmoxVM) -> Result<T, String>,
    ) -> T {
        let vms = self.vms();
        support::poll(&format!("ProxmoxVM {name}: {what}"), DEADLINE, || {
            let vms = vms.clone();
            let check = &check;
            async move {
                let vm = vms.get(name).await.map_err(|e| format!("GET: {e}"))?;
                check(&vm).map_err(|why| format!("{why}; status: {}", brief(&vm)))
            }
        })
        .await
    }

    /// Waits until the guest's passes read three cluster views in a row
    /// with no request to its `own` routes (GET) meanwhile: coarse looks
    /// at rest. A window with a read of its own (a full look after its
    /// creation) starts over.
    pub async fn wait_coarse_looks(&self, own: &[&str]) {
        let counts = || async {
            let mut reads = 0;
            for route in own {
                reads += self.sim.count("GET", route).await;
            }
            (reads, self.sim.count("GET", "/cluster/resources").await)
        };
        let deadline = std::time::Instant::now() + DEADLINE;
        let mut start = counts().await;
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = counts().await;
            if now.0 != start.0 {
                start = now;
            } else if now.1 >= start.1 + 3 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no three coarse looks in a row: {now:?} since {start:?} (own reads, views)"
            );
        }
    }

    /// Waits for Ready=True and Synced=True.
    pub async fn wait_ready(&self, name: &str) -> ProxmoxVM {
        self.wait_vm(name, "Ready and Synced", |vm| {
            let ready = condition(vm, "Ready").is_some_and(is_true);
            let synced = condition(vm, "Synced").is_some_and(is_true);
            if ready && synced {
                Ok(vm.clone())
            } else {
                Err("not Ready and Synced yet".into())
            }
        })
        .await
    }

    /// Applies a ProxmoxVM `name` with `for_provider`, waits until it is
    /// Ready and returns its VMID.
    pub async fn create_ready(&self, name: &str, for_provider: Value) -> u32 {
        self.apply(&manifests::vm(name, for_provider)).await;
        self.wait_ready(name).await;
        self.vmid(name).await
    }

    /// Waits for the Synced condition to have `reason`.
    pub async fn wait_synced_reason(&self, name: &str, reason: &str) -> Condition {
        self.wait_vm(name, &format!("Synced reason {reason}"), |vm| {
            condition(vm, "Synced")
                .filter(|c| c.reason == reason)
                .cloned()
                .ok_or_else(|| "other reason".into())
        })
        .await
    }

    /// Waits until the ProxmoxVM is gone.
    pub async fn wait_gone(&self, name: &str) {
        let vms = self.vms();
        support::poll(&format!("ProxmoxVM {name} to be gone"), DEADLINE, || {
            let vms = vms.clone();
            async move {
                match vms.get_opt(name).await {
                    Ok(None) => Ok(()),
                    Ok(Some(vm)) => Err(format!(
                        "still there, finalizers {:?}, status {}",
                        vm.finalizers(),
                        brief(&vm)
                    )),
                    Err(e) => Err(format!("GET: {e}")),
                }
            }
        })
        .await
    }

    /// The VMID the controller recorded.
    pub async fn vmid(&self, name: &str) -> u32 {
        self.vm(name)
            .await
            .external_name()
            .and_then(|v| v.parse().ok())
            .expect("an external name")
    }

    /// Core v1 events about a ProxmoxVM: (type, reason, message, count).
    pub async fn events(&self, name: &str) -> Vec<EventRow> {
        events_in(self.ns.name(), name).await
    }

    /// Waits for an event about `name` in the namespace that `said`
    /// accepts; returns all of them then.
    pub async fn wait_event(&self, name: &str, said: impl Fn(&EventRow) -> bool) -> Vec<EventRow> {
        wait_event_in(self.ns.name(), name, said).await
    }

    /// A Secret of the namespace, if it exists.
    pub async fn secret(&self, name: &str) -> Option<Secret> {
        Api::<Secret>::namespaced(support::client(), self.ns.name())
            .get_opt(name)
            .await
            .expect("GET Secret")
    }
}

/// A core v1 event as the tests read it: (type, reason, message, count).
pub type EventRow = (String, String, String, i32);

/// Core v1 events in `namespace` about objects named `name`: (type,
/// reason, message, count).
pub async fn events_in(namespace: &str, name: &str) -> Vec<EventRow> {
    let events: Api<Event> = Api::namespaced(support::client(), namespace);
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("listing events");
    list.items
        .into_iter()
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
                e.count.unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until an event in `namespace` about `name` is one `said`
/// accepts; returns all the events about `name` then. An event is
/// published after the status write that shows what it tells, so a test
/// that saw the status must still wait for the event.
pub async fn wait_event_in(
    namespace: &str,
    name: &str,
    said: impl Fn(&EventRow) -> bool,
) -> Vec<EventRow> {
    support::poll(&format!("an event about {name}"), DEADLINE, || async {
        let events = events_in(namespace, name).await;
        if events.iter().any(&said) {
            Ok(events)
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await
}

/// The condition of a type.
pub fn condition<'a>(vm: &'a ProxmoxVM, type_: &str) -> Option<&'a Condition> {
    vm.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

pub fn is_true(c: &Condition) -> bool {
    c.status == provider_proxmox::api::ConditionStatus::True
}

/// The backoff a condition's message announces ("...; retrying in 20s"),
/// in seconds.
pub fn announced_backoff(message: &str) -> f64 {
    message
        .split_once("retrying in ")
        .and_then(|(_, rest)| rest.split_once('s'))
        .and_then(|(secs, _)| secs.parse().ok())
        .unwrap_or_else(|| panic!("a backoff in seconds: {message}"))
}

/// The status in one line, for failure messages.
pub fn brief(vm: &ProxmoxVM) -> String {
    let Some(status) = &vm.status else {
        return "(none)".into();
    };
    let conds: Vec<String> = status
        .conditions
        .iter()
        .map(|c| {
            format!(
                "{}={:?}/{}: {}",
                c.type_,
                c.status,
                c.reason,
                c.message.as_deref().unwrap_or_default()
            )
        })
        .collect();
    format!(
        "vmid {:?} state {:?} task {:?} | {}",
        status.at_provider.vmid,
        status.at_provider.state,
        status.at_provider.task.as_ref().map(|t| &t.summary),
        conds.join(" | ")
    )
}

/// A controller that may do everything but write the status of
/// `resources` (`proxmoxvms`, `proxmoximages`): every status write after a
/// dispatch is lost, as after a crash between the two.
pub async fn without_status_writes(env: &Env, resources: &[&str]) -> Controller {
    env.apply(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "no-status"},
        "rules": [
            {"apiGroups": ["proxmox.m.crossplane.io"], "resources": resources,
             "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": ["proxmox.m.crossplane.io"], "resources": ["proxmoxvms/finalizers"],
             "verbs": ["update"]},
            {"apiGroups": ["proxmox.m.crossplane.io"], "resources": ["providerconfigs"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["secrets"],
             "verbs": ["get", "list", "watch", "create", "update", "patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        ],
    }))
    .await;
    let account = support::service_account_kubeconfig(
        env.ns.name(),
        "no-status",
        support::Grant::Role("no-status"),
    )
    .await;
    Controller::start(account.client(), env.settings()).await
}
