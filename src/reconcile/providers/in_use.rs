//! A provider config in use cannot be deleted: the `in-use.crossplane.io`
//! finalizer.
//!
//! A ProxmoxVM needs its config for as long as it exists, its own deletion
//! included (destroying the VM is a Proxmox call): a config deleted under
//! it leaves the resource stuck in deletion and its VM stranded. So, as
//! Crossplane's provider config reconciler does (with the same finalizer
//! name):
//!
//! * every config carries the finalizer while it is not being deleted,
//!   added by its first pass — not only once users appear, because a VM
//!   must never depend on a config that could vanish at once;
//! * a config being deleted keeps it while any ProxmoxVM in the controller's
//!   cache refers to it (those being deleted included: they still need it),
//!   says so in its `Ready` condition and a Warning event, and loses it
//!   when the last one is gone.
//!
//! Two races are closed on the VM side ([`guard`], in every VM pass, on a
//! config read afresh):
//! * a VM created while its config is being deleted may have been missed
//!   by the count that released the config; so a VM that has not started
//!   anything yet (no external name) never starts with a config that is
//!   being deleted;
//! * a VM whose config has no finalizer yet (created together with it,
//!   before the config's first pass) adds it itself before going on, with
//!   the resourceVersion it read: a deletion in between makes that write
//!   fail, and the VM then finds no config.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::api::meta::ConfigUser;
use crate::api::{ClusterProviderConfig, ProviderConfig, ProviderConfigKind};
use crate::reconcile::providers::ConfigKey;

/// The finalizer (Crossplane's name for it).
pub const FINALIZER: &str = "in-use.crossplane.io";

/// Users named in a status message; the rest are counted.
const NAMED_USERS: usize = 10;

/// Whether the config carries the finalizer.
pub fn protected(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// Whether the config is being deleted.
pub fn deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// What a VM pass may do with the config it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Guard {
    /// Use it.
    Use,
    /// Add the finalizer first ([`set`]), then use it.
    Protect,
    /// Do not start using it: why.
    Refuse(String),
}

/// The guard of a VM pass about to use the config `key` (read afresh as
/// `config`).
pub fn guard(vm: &impl ConfigUser, key: &ConfigKey, config: &ObjectMeta) -> Guard {
    // A VM being deleted needs its config to clean up, and one that has a
    // VMID was counted as a user before its config could be released.
    let started = vm.meta().deletion_timestamp.is_some() || vm.external_name().is_some();
    guard_started(started, key, config)
}

/// [`guard`] for any resource: `started` when it already depends on the
/// config (it is being deleted, or has made something on Proxmox).
pub fn guard_started(started: bool, key: &ConfigKey, config: &ObjectMeta) -> Guard {
    if started {
        return Guard::Use;
    }
    if deleting(config) {
        return Guard::Refuse(format!(
            "{key} is being deleted: a ProxmoxVM that does not use it yet cannot start to"
        ));
    }
    if protected(config) {
        Guard::Use
    } else {
        Guard::Protect
    }
}

/// Adds (`present`) or removes the finalizer of the config `key` as last
/// read (`meta`): a JSON merge patch carrying that resourceVersion, so a
/// write based on a stale read fails with 409 and nobody else's finalizer
/// is lost.
pub async fn set(
    kube: &kube::Client,
    key: &ConfigKey,
    meta: &ObjectMeta,
    present: bool,
) -> Result<(), kube::Error> {
    let others = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .map(String::as_str);
    let finalizers: Vec<&str> = if present {
        others.chain([FINALIZER]).collect()
    } else {
        others.collect()
    };
    let patch = json!({"metadata": {
        "resourceVersion": meta.resource_version,
        "finalizers": finalizers,
    }});
    let patch = Patch::Merge(&patch);
    let params = PatchParams::default();
    match key.kind {
        ProviderConfigKind::ProviderConfig => {
            Api::<ProviderConfig>::namespaced(kube.clone(), &key.namespace)
                .patch(&key.name, &params, &patch)
                .await
                .map(|c| c.name_any())?
        }
        ProviderConfigKind::ClusterProviderConfig => {
            Api::<ClusterProviderConfig>::all(kube.clone())
                .patch(&key.name, &params, &patch)
                .await
                .map(|c| c.name_any())?
        }
    };
    tracing::debug!(config = %key, present, "wrote the in-use finalizer");
    Ok(())
}

/// Why a config being deleted stays: `users` are its users as
/// `namespace/name`, sorted; at most [`NAMED_USERS`] are named.
pub fn blocked_message(users: &[String]) -> String {
    let n = users.len();
    let noun = if n == 1 {
        "ProxmoxVM uses"
    } else {
        "ProxmoxVMs use"
    };
    let mut named = users
        .iter()
        .take(NAMED_USERS)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if n > NAMED_USERS {
        named.push_str(&format!(" and {} more", n - NAMED_USERS));
    }
    format!("cannot be deleted: {n} {noun} it: {named}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProxmoxVM;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn vm(external_name: bool, deleting: bool) -> ProxmoxVM {
        let mut vm: ProxmoxVM = serde_json::from_value(serde_json::json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"forProvider": {}},
        }))
        .unwrap();
        if external_name {
            vm.annotations_mut()
                .insert(crate::api::meta::EXTERNAL_NAME.into(), "100".into());
        }
        if deleting {
            vm.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        vm
    }

    fn config(finalizers: &[&str], deleting: bool) -> ObjectMeta {
        ObjectMeta {
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_new_vm_protects_an_unprotected_config_and_never_starts_on_a_deleted_one() {
        let key = ConfigKey::of(&vm(false, false));
        let new = vm(false, false);
        assert_eq!(guard(&new, &key, &config(&[], false)), Guard::Protect);
        assert_eq!(
            guard(&new, &key, &config(&["other"], false)),
            Guard::Protect
        );
        assert_eq!(guard(&new, &key, &config(&[FINALIZER], false)), Guard::Use);
        let Guard::Refuse(why) = guard(&new, &key, &config(&[FINALIZER], true)) else {
            panic!("a deleted config is refused");
        };
        assert!(why.contains("is being deleted"), "{why}");
        assert!(matches!(
            guard(&new, &key, &config(&[], true)),
            Guard::Refuse(_)
        ));
    }

    #[test]
    fn vms_already_counted_keep_using_their_config() {
        let being_deleted = config(&[FINALIZER], true);
        for vm in [vm(true, false), vm(false, true), vm(true, true)] {
            let key = ConfigKey::of(&vm);
            assert_eq!(guard(&vm, &key, &being_deleted), Guard::Use);
        }
    }

    #[test]
    fn the_blocked_message_names_a_bounded_list() {
        assert_eq!(
            blocked_message(&["ns/a".into()]),
            "cannot be deleted: 1 ProxmoxVM uses it: ns/a"
        );
        let many: Vec<String> = (0..13).map(|i| format!("ns/vm-{i:02}")).collect();
        let message = blocked_message(&many);
        assert!(
            message.starts_with("cannot be deleted: 13 ProxmoxVMs use it: ns/vm-00, ns/vm-01"),
            "{message}"
        );
        assert!(message.ends_with("ns/vm-09 and 3 more"), "{message}");
        assert!(!message.contains("vm-10"));
    }
}
