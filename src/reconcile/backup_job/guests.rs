//! The guests a selector backup job covers, pure: the ProxmoxVMs and
//! ProxmoxContainers of its namespace whose labels match, by the VMID
//! recorded in their `crossplane.io/external-name`. A guest without one
//! yet is left out until it has one; a guest being deleted is left out
//! (its VMID may soon be another's).

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::api::backup_job::BackupGuest;
use crate::api::meta::ConfigUser;
use crate::api::{ProxmoxContainer, ProxmoxVM};

/// A guest as a selector sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guest {
    pub name: String,
    /// `ProxmoxVM` or `ProxmoxContainer`.
    pub kind: &'static str,
    pub labels: BTreeMap<String, String>,
    pub vmid: Option<u32>,
}

fn vmid(external_name: Option<&str>) -> Option<u32> {
    external_name?.parse().ok()
}

impl Guest {
    /// A ProxmoxVM, unless it is being deleted.
    pub fn vm(vm: &ProxmoxVM) -> Option<Self> {
        if vm.metadata.deletion_timestamp.is_some() {
            return None;
        }
        Some(Self {
            name: vm.name_any(),
            kind: "ProxmoxVM",
            labels: vm.labels().clone(),
            vmid: vmid(vm.external_name()),
        })
    }

    /// A ProxmoxContainer, unless it is being deleted.
    pub fn container(ct: &ProxmoxContainer) -> Option<Self> {
        if ct.metadata.deletion_timestamp.is_some() {
            return None;
        }
        Some(Self {
            name: ct.name_any(),
            kind: "ProxmoxContainer",
            labels: ct.labels().clone(),
            vmid: vmid(ConfigUser::external_name(ct)),
        })
    }

    /// Whether `match_labels` selects it.
    pub fn matches(&self, match_labels: &BTreeMap<String, String>) -> bool {
        match_labels
            .iter()
            .all(|(k, v)| self.labels.get(k) == Some(v))
    }
}

/// The guests of `guests` (all of the job's namespace) that `match_labels`
/// selects and that have a VMID, by VMID.
pub fn selected(match_labels: &BTreeMap<String, String>, guests: &[Guest]) -> Vec<BackupGuest> {
    let mut out: Vec<BackupGuest> = guests
        .iter()
        .filter(|g| g.matches(match_labels))
        .filter_map(|g| {
            Some(BackupGuest {
                name: g.name.clone(),
                kind: g.kind.into(),
                vmid: g.vmid?,
            })
        })
        .collect();
    out.sort_by_key(|g| g.vmid);
    out.dedup_by_key(|g| g.vmid);
    out
}
