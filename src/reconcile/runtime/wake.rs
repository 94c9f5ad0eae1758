//! Waking a resource as soon as what it waits for happened, rather than at
//! its next timer.
//!
//! * **A task ended.** The task watcher looks at every node with tasks of
//!   ProxmoxVMs or ProxmoxContainers in flight, through the node's task list that the config's
//!   client already fetches for task observation (one request per node per
//!   list interval, a second by default, shared, with the exit statuses of
//!   the tasks that ended), and wakes each resource whose task the list
//!   shows ended (or does not show at all). So the next step follows a
//!   task's end within about a second, and a resource waiting on its task
//!   needs no pass of its own meanwhile.
//! * **A slot freed.** The scheduler hands a node's freed import or clone
//!   slot to the resource that has waited longest for one (see
//!   `schedule::slots`); the pass that freed it wakes that resource.
//! * **A template came along.** A ProxmoxVM with `template: true` that
//!   appears, changes its spec or VMID, starts or ends a task, or changes
//!   its Ready condition wakes the clones that name it and are not created
//!   yet ([`Templates`], on the VM watch): a clone waiting for its template
//!   (`WaitingForTemplate`) is cloned as soon as the conversion ended.
//! * **A Secret or ConfigMap changed.** Metadata-only watches of Secrets
//!   and ConfigMaps (never their data) wake the ProxmoxVMs of the same
//!   namespace that read one by name ([`readers`]): `customCloudInit`'s
//!   sources and the cloud-init password. A Secret created after the VM
//!   that needs it, or changed, takes effect at once.
//!
//! Every wake-up is an ordinary trigger of the controller: a pass of that
//! resource, which decides from what it then observes. A resource that is
//! never woken (the list could not be read) still has its timer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use pve_client::{ListedTask, Upid};

use crate::api::condition::{ConditionType, find};
use crate::api::vm::InFlightTask;
use crate::api::{ConditionStatus, ProxmoxContainer, ProxmoxVM};
use crate::reconcile::context::Context;
use crate::reconcile::identity::Identity;
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::vm::pass::observe::clones;

/// A reference to a ProxmoxVM, as the controller's triggers take it.
pub type VmRef = ObjectRef<DeserializeGuard<ProxmoxVM>>;

/// The reference of a ProxmoxVM found in the cache or a watch event.
pub fn vm_ref(vm: &ProxmoxVM) -> VmRef {
    let name = ObjectRef::new(&vm.name_any());
    match vm.namespace() {
        Some(namespace) => name.within(&namespace),
        None => name,
    }
}

/// How often the watcher looks. The task lists it reads are refetched at
/// most once per list interval, whatever this is.
const TICK: Duration = Duration::from_millis(250);
/// A task younger than this may not be in a list fetched before it started.
const JUST_STARTED: Duration = Duration::from_secs(2);

/// A reference to a ProxmoxContainer, as its controller's triggers take it.
pub type CtRef = ObjectRef<DeserializeGuard<ProxmoxContainer>>;

/// Asks a controller for passes: the ProxmoxVMs' (the default) or the
/// ProxmoxContainers'.
#[derive(Clone, Debug)]
pub struct Waker<
    K: kube::runtime::reflector::Lookup<DynamicType = ()> = DeserializeGuard<ProxmoxVM>,
> {
    sender: Option<UnboundedSender<ObjectRef<K>>>,
}

impl<K: kube::runtime::reflector::Lookup<DynamicType = ()>> Waker<K> {
    /// Wakes through `sender` (the controller's extra trigger stream).
    pub fn new(sender: UnboundedSender<ObjectRef<K>>) -> Self {
        Self {
            sender: Some(sender),
        }
    }

    /// A waker that wakes nothing (no controller runs).
    pub fn none() -> Self {
        Self { sender: None }
    }

    /// Asks for a pass of `vm`.
    pub fn wake(&self, vm: ObjectRef<K>) {
        if let Some(sender) = &self.sender {
            // Closed only when the controller stopped: nothing to wake.
            let _ = sender.unbounded_send(vm);
        }
    }
}

/// Runs the task watcher until `stop` resolves.
pub async fn watch_tasks(ctx: Arc<Context>, stop: impl Future<Output = ()>) {
    let mut woken: HashMap<String, Upid> = HashMap::new();
    let run = async {
        loop {
            tokio::time::sleep(TICK).await;
            look(&ctx, &mut woken).await;
        }
    };
    tokio::select! {
        () = run => {}
        () = stop => {}
    }
}

/// Who to wake.
enum Who {
    Vm(VmRef),
    Container(CtRef),
}

/// A resource whose recorded task may still run.
struct InFlight {
    who: Who,
    uid: String,
    upid: Upid,
}

/// One look: wakes the resources whose task ended.
async fn look(ctx: &Context, woken: &mut HashMap<String, Upid>) {
    let now = Timestamp::now();
    // (config, node) → the resources with a task there
    let mut in_flight: HashMap<(ConfigKey, String), Vec<InFlight>> = HashMap::new();
    let mut live = HashMap::new();
    let mut see = |meta: &ObjectMeta,
                   key: ConfigKey,
                   task: Option<&InFlightTask>,
                   who: fn(&Identity) -> Who| {
        let Some(task) = task else { return };
        // A recorded UPID that does not parse is the pass's to report.
        let (Some(id), Ok(upid)) = (Identity::of(meta), Upid::parse(&task.upid)) else {
            return;
        };
        live.insert(id.uid.clone(), upid.clone());
        let young = Duration::try_from(now.duration_since(task.started_at.0))
            .is_ok_and(|age| age < JUST_STARTED);
        if young || woken.get(&id.uid) == Some(&upid) {
            return;
        }
        in_flight
            .entry((key, upid.node().to_owned()))
            .or_default()
            .push(InFlight {
                who: who(&id),
                uid: id.uid,
                upid,
            });
    };
    for obj in ctx.store.state() {
        let Ok(vm) = &obj.0 else { continue };
        let task = vm.status.as_ref().and_then(|s| s.at_provider.task.as_ref());
        see(&vm.metadata, ConfigKey::of(vm), task, |id| {
            Who::Vm(id.object_ref())
        });
    }
    for obj in ctx.containers.state() {
        let Ok(ct) = &obj.0 else { continue };
        let task = ct.status.as_ref().and_then(|s| s.at_provider.task.as_ref());
        see(&ct.metadata, ConfigKey::of(ct), task, |id| {
            Who::Container(ObjectRef::new(&id.name).within(&id.namespace))
        });
    }
    // Forget resources whose task is no longer recorded.
    woken.retain(|uid, upid| live.get(uid) == Some(upid));
    for ((key, _node), tasks) in in_flight {
        // Another replica's config: its holder watches its tasks.
        if !ctx.shards.holds(&key) {
            continue;
        }
        let Some(client) = ctx.providers.client_of(&key) else {
            continue;
        };
        // All of them into the node's next list, before it is fetched.
        client.follow_tasks(tasks.iter().map(|t| &t.upid));
        for InFlight { who, uid, upid } in tasks {
            match client.listed_task(&upid).await {
                Ok(ListedTask::Running) => {}
                Ok(ListedTask::Finished | ListedTask::NotListed) => {
                    woken.insert(uid, upid);
                    match who {
                        Who::Vm(vm) => ctx.waker.wake(vm),
                        Who::Container(ct) => ctx.container_waker.wake(ct),
                    }
                }
                // The list could not be read: the resource's timer stays.
                Err(_) => break,
            }
        }
    }
}

/// Wakes the clones waiting for a template's ProxmoxVM when it changes in
/// a way that may have made its VM a template. Sees every event of the VM
/// watch before the cache takes it in, so the cache still holds the
/// previous version to compare with.
pub struct Templates {
    store: Store<DeserializeGuard<ProxmoxVM>>,
    waker: Waker,
}

impl Templates {
    /// Compares with (and finds the clones in) `store`; wakes through `waker`.
    pub fn new(store: Store<DeserializeGuard<ProxmoxVM>>, waker: Waker) -> Self {
        Self { store, waker }
    }

    /// Looks at one event of the VM watch.
    pub fn see(&self, event: &Result<watcher::Event<DeserializeGuard<ProxmoxVM>>, watcher::Error>) {
        let (Ok(watcher::Event::Apply(obj)) | Ok(watcher::Event::InitApply(obj))) = event else {
            return;
        };
        let Ok(template) = &obj.0 else { return };
        if template.spec.for_provider.lifecycle.template != Some(true) {
            return;
        }
        let before = self.store.get(&vm_ref(template));
        let before = before.as_deref().and_then(|o| o.0.as_ref().ok());
        if before.map(progress) == Some(progress(template)) {
            return;
        }
        for clone in clones::waiting_for(&self.store, template) {
            tracing::debug!(
                template = %full_name(template), clone = %full_name(&clone),
                "the template's resource changed; waking its clone"
            );
            self.waker.wake(vm_ref(&clone));
        }
    }
}

/// `namespace/name`.
fn full_name(vm: &ProxmoxVM) -> String {
    format!("{}/{}", vm.namespace().unwrap_or_default(), vm.name_any())
}

/// What of a template's resource says how far its VM got: its spec, its
/// VMID, whether a task is in flight, its Ready condition. (Task progress
/// and other status writes leave it alone.)
fn progress(vm: &ProxmoxVM) -> (Option<i64>, Option<&str>, bool, Option<ConditionStatus>) {
    let status = vm.status.as_ref();
    (
        vm.metadata.generation,
        vm.external_name(),
        status.is_some_and(|s| s.at_provider.task.is_some()),
        status
            .and_then(|s| find(&s.conditions, ConditionType::Ready))
            .map(|c| c.status),
    )
}

/// What a ProxmoxVM reads from its namespace by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Referenced {
    /// A Secret: `customCloudInit` sources, `cloudInit.passwordSecretRef`.
    Secret,
    /// A ConfigMap: `customCloudInit` sources.
    ConfigMap,
}

/// The ProxmoxVMs in `store` that read the Secret or ConfigMap `object`
/// (same namespace, by name).
pub fn readers(
    store: &Store<DeserializeGuard<ProxmoxVM>>,
    kind: Referenced,
    object: &ObjectMeta,
) -> Vec<VmRef> {
    let (Some(namespace), Some(name)) = (&object.namespace, &object.name) else {
        return Vec::new();
    };
    store
        .state()
        .iter()
        .filter_map(|obj| obj.0.as_ref().ok())
        .filter(|vm| vm.namespace().as_ref() == Some(namespace))
        .filter(|vm| references(vm, kind).contains(&name.as_str()))
        .map(vm_ref)
        .collect()
}

/// The names of the objects of `kind` that `vm` reads.
fn references(vm: &ProxmoxVM, kind: Referenced) -> Vec<&str> {
    let spec = &vm.spec.for_provider;
    let mut names: Vec<&str> = spec
        .custom_cloud_init
        .iter()
        .flat_map(|c| c.sources())
        .filter_map(|(_, source)| match kind {
            Referenced::Secret => source.secret_key_ref.as_ref().map(|r| r.name.as_str()),
            Referenced::ConfigMap => source.config_map_key_ref.as_ref().map(|r| r.name.as_str()),
        })
        .collect();
    if kind == Referenced::Secret
        && let Some(r) = spec
            .cloud_init
            .as_ref()
            .and_then(|c| c.password_secret_ref.as_ref())
    {
        names.push(&r.name);
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    fn vm(name: &str, for_provider: serde_json::Value) -> ProxmoxVM {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "proxmox.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {
                "forProvider": for_provider,
                "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
            },
        }))
        .unwrap()
    }

    fn store(vms: &[ProxmoxVM]) -> Store<DeserializeGuard<ProxmoxVM>> {
        store_and_writer(vms).0
    }

    fn store_and_writer(
        vms: &[ProxmoxVM],
    ) -> (
        Store<DeserializeGuard<ProxmoxVM>>,
        reflector::store::Writer<DeserializeGuard<ProxmoxVM>>,
    ) {
        let (reader, mut writer) = reflector::store();
        for vm in vms {
            writer.apply_watcher_event(&Event::Apply(DeserializeGuard(Ok(vm.clone()))));
        }
        (reader, writer)
    }

    fn meta(namespace: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        }
    }

    fn names(refs: Vec<VmRef>) -> Vec<String> {
        let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
        names.sort();
        names
    }

    #[test]
    fn secrets_and_config_maps_wake_the_vms_reading_them() {
        let seeded = vm(
            "seeded",
            serde_json::json!({"customCloudInit": {
                "userData": {"secretKeyRef": {"name": "user-data", "key": "u"}},
                "networkConfig": {"configMapKeyRef": {"name": "net", "key": "n"}},
            }}),
        );
        let password = vm(
            "password",
            serde_json::json!({"cloudInit": {"passwordSecretRef": {"name": "pw", "key": "p"}}}),
        );
        let store = store(&[seeded, password]);
        assert_eq!(
            names(readers(
                &store,
                Referenced::Secret,
                &meta("ns", "user-data")
            )),
            ["seeded"]
        );
        assert_eq!(
            names(readers(&store, Referenced::Secret, &meta("ns", "pw"))),
            ["password"]
        );
        assert_eq!(
            names(readers(&store, Referenced::ConfigMap, &meta("ns", "net"))),
            ["seeded"]
        );
        // A ConfigMap named like a Secret, another namespace, an unknown name.
        assert!(readers(&store, Referenced::ConfigMap, &meta("ns", "user-data")).is_empty());
        assert!(readers(&store, Referenced::Secret, &meta("other", "user-data")).is_empty());
        assert!(readers(&store, Referenced::Secret, &meta("ns", "nothing")).is_empty());
    }

    #[test]
    fn a_template_changing_wakes_the_clones_not_created_yet() {
        let mut golden = vm("golden", serde_json::json!({"template": true}));
        let by_name = vm(
            "by-name",
            serde_json::json!({"clone": {"templateName": "golden", "full": false}}),
        );
        let by_vmid = vm(
            "by-vmid",
            serde_json::json!({"clone": {"templateVmid": 900}}),
        );
        let mut created = by_name.clone();
        created.metadata.name = Some("created".into());
        created.metadata.uid = Some("uid-created".into());
        created.metadata.annotations = Some(
            [(
                crate::api::meta::EXTERNAL_CREATE_SUCCEEDED.to_owned(),
                "x".to_owned(),
            )]
            .into(),
        );
        let other = vm(
            "other",
            serde_json::json!({"clone": {"templateName": "silver"}}),
        );
        let (store, mut writer) =
            store_and_writer(&[golden.clone(), by_name, by_vmid, created, other]);
        let (sender, mut woken) = futures::channel::mpsc::unbounded();
        let templates = Templates::new(store, Waker::new(sender));
        // The watch as the controller runs it: seen, then cached.
        let mut changed = |golden: &ProxmoxVM| {
            let event = Event::Apply(DeserializeGuard(Ok(golden.clone())));
            templates.see(&Ok(event.clone()));
            writer.apply_watcher_event(&event);
            let mut names = vec![];
            while let Ok(r) = woken.try_recv() {
                names.push(r.name);
            }
            names.sort();
            names
        };

        assert!(changed(&golden).is_empty(), "unchanged: nobody");
        // Its VMID recorded: the clones by name, and now by VMID too.
        golden.metadata.annotations =
            Some([(crate::api::meta::EXTERNAL_NAME.to_owned(), "900".to_owned())].into());
        assert_eq!(changed(&golden), ["by-name", "by-vmid"]);
        // A task in flight, its progress, its end with Ready.
        let task = |progress: u8| {
            serde_json::json!({
                "upid": "UPID:pve:1:2:3:qmtemplate:900:root@pam:", "action": "Template",
                "type": "qmtemplate", "node": "pve", "startedAt": "2026-01-01T00:00:00Z",
                "deadline": "2026-01-01T00:10:00Z", "progress": progress, "summary": "qmtemplate",
            })
        };
        let status = |value: serde_json::Value| serde_json::from_value(value).unwrap();
        golden.status = Some(status(
            serde_json::json!({"atProvider": {"task": task(10)}}),
        ));
        assert_eq!(changed(&golden), ["by-name", "by-vmid"], "a task started");
        golden.status = Some(status(
            serde_json::json!({"atProvider": {"task": task(50)}}),
        ));
        assert!(changed(&golden).is_empty(), "task progress wakes nobody");
        golden.status = Some(status(serde_json::json!({
            "atProvider": {},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Available",
                            "lastTransitionTime": "2026-01-01T00:01:00Z"}],
        })));
        assert_eq!(changed(&golden), ["by-name", "by-vmid"], "converted, Ready");
        // Not a template: its changes wake nobody.
        golden.spec.for_provider.lifecycle.template = None;
        golden.metadata.generation = Some(2);
        assert!(changed(&golden).is_empty());
    }
}
