//! Every kind this provider serves, listed once.
//!
//! The CRD generation (`crds/` and its `Kustomization`), the tests that
//! check the committed CRDs, the packages and the RBAC read this list
//! instead of keeping their own, so a new kind is one line here.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResourceExt, Resource};

use super::backup::ProxmoxBackup;
use super::backup_job::ProxmoxBackupJob;
use super::ip_set::ProxmoxIPSet;
use super::pool::ProxmoxPool;
use super::sdn::{ProxmoxSDNZone, ProxmoxVNet};
use super::security_group::ProxmoxSecurityGroup;
use super::snapshot::ProxmoxSnapshot;
use super::{
    ClusterProviderConfig, GROUP, ProviderConfig, ProxmoxContainer, ProxmoxImage, ProxmoxVM,
};

/// One kind.
#[derive(Clone, Debug)]
pub struct Kind {
    /// `ProxmoxVM`.
    pub kind: String,
    /// `proxmoxvms`.
    pub plural: String,
    /// Namespaced (every managed kind), or cluster-scoped.
    pub namespaced: bool,
    /// A managed resource (`forProvider`, `managementPolicies`, Ready and
    /// Synced); a provider config is not one.
    pub managed: bool,
    crd: fn() -> CustomResourceDefinition,
}

impl Kind {
    fn of<K>(managed: bool) -> Self
    where
        K: CustomResourceExt + Resource<DynamicType = ()>,
    {
        let crd = K::crd();
        Self {
            kind: K::kind(&()).into_owned(),
            plural: K::plural(&()).into_owned(),
            namespaced: crd.spec.scope == "Namespaced",
            managed,
            crd: K::crd,
        }
    }

    /// Its CustomResourceDefinition, as generated from the Rust types.
    pub fn crd(&self) -> CustomResourceDefinition {
        (self.crd)()
    }

    /// `proxmoxvms.proxmox.m.crossplane.io`: the CRD's name.
    pub fn crd_name(&self) -> String {
        format!("{}.{GROUP}", self.plural)
    }

    /// The file its CRD is committed as under `crds/`.
    pub fn file(&self) -> String {
        format!("{GROUP}_{}.yaml", self.plural)
    }
}

/// Every kind, in install order: the provider configs first (the managed
/// kinds name them).
pub fn all() -> Vec<Kind> {
    vec![
        Kind::of::<ClusterProviderConfig>(false),
        Kind::of::<ProviderConfig>(false),
        Kind::of::<ProxmoxVM>(true),
        Kind::of::<ProxmoxImage>(true),
        Kind::of::<ProxmoxContainer>(true),
        Kind::of::<ProxmoxPool>(true),
        Kind::of::<ProxmoxSecurityGroup>(true),
        Kind::of::<ProxmoxIPSet>(true),
        Kind::of::<ProxmoxBackupJob>(true),
        Kind::of::<ProxmoxSnapshot>(true),
        Kind::of::<ProxmoxBackup>(true),
        Kind::of::<ProxmoxSDNZone>(true),
        Kind::of::<ProxmoxVNet>(true),
    ]
}

/// The managed kinds.
pub fn managed() -> Vec<Kind> {
    all().into_iter().filter(|k| k.managed).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_managed_kind_is_namespaced_and_every_name_is_unique() {
        let kinds = all();
        for k in &kinds {
            assert!(
                !k.managed || k.namespaced,
                "{} is managed, so namespaced",
                k.kind
            );
            assert_eq!(
                k.crd().metadata.name.as_deref(),
                Some(k.crd_name().as_str())
            );
        }
        let mut plurals: Vec<&str> = kinds.iter().map(|k| k.plural.as_str()).collect();
        plurals.sort_unstable();
        plurals.dedup();
        assert_eq!(plurals.len(), kinds.len());
    }
}
