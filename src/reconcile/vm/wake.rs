//! Waking ProxmoxVMs as soon as what they wait for happened, rather than
//! at their next timer (the task watcher, for every kind, is
//! [`crate::reconcile::managed::task_watch`]):
//!
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

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;

use crate::api::condition::{ConditionType, find};
use crate::api::vm::{VmRef, vm_ref};
use crate::api::{ConditionStatus, ProxmoxVM};
use crate::reconcile::runtime::wake::Waker;
use crate::reconcile::vm::pass::observe::clones;

/// Wakes the clones waiting for a template's ProxmoxVM when it changes in
/// a way that may have made its VM a template. Sees every event of the VM
/// watch before the cache takes it in, so the cache still holds the
/// previous version to compare with.
pub struct Templates {
    store: Store<DeserializeGuard<ProxmoxVM>>,
    waker: Waker<DeserializeGuard<ProxmoxVM>>,
}

impl Templates {
    /// Compares with (and finds the clones in) `store`; wakes through `waker`.
    pub fn new(
        store: Store<DeserializeGuard<ProxmoxVM>>,
        waker: Waker<DeserializeGuard<ProxmoxVM>>,
    ) -> Self {
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
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
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
