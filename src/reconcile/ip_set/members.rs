//! The members a selector IP set takes from the guests of its namespace,
//! pure: which guests match, and the addresses each has.
//!
//! A VM's addresses are its guest agent's (`status.atProvider.ipAddresses`)
//! and its static cloud-init `ipConfigs`; a container's its static
//! `networks` addresses (`dhcp` and `auto` are none). A guest being deleted
//! is no member: its address may soon be another's.

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::plan::{Entry, clean};
use crate::api::{ProxmoxContainer, ProxmoxVM};

/// A guest as a selector sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guest {
    /// `ProxmoxVM web` (for the entry's comment).
    pub who: String,
    pub labels: BTreeMap<String, String>,
    pub addresses: Vec<String>,
}

/// The address of `ip/len`, or none for `dhcp`/`auto`.
fn address(ip: Option<&String>) -> Option<String> {
    let ip = ip?;
    let addr = ip.split('/').next().unwrap_or(ip);
    clean(addr)
}

impl Guest {
    /// A ProxmoxVM of the namespace, unless it is being deleted.
    pub fn vm(vm: &ProxmoxVM) -> Option<Self> {
        if vm.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let mut addresses: Vec<String> = vm
            .status
            .as_ref()
            .map(|s| {
                s.at_provider
                    .ip_addresses
                    .iter()
                    .filter_map(|a| clean(a))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(ci) = &vm.spec.for_provider.cloud_init {
            for c in &ci.ip_configs {
                addresses.extend(address(c.ip.as_ref()));
                addresses.extend(address(c.ip6.as_ref()));
            }
        }
        Some(Self {
            who: format!("ProxmoxVM {}", vm.name_any()),
            labels: vm.labels().clone(),
            addresses,
        })
    }

    /// A ProxmoxContainer of the namespace, unless it is being deleted.
    pub fn container(ct: &ProxmoxContainer) -> Option<Self> {
        if ct.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let addresses = ct
            .spec
            .for_provider
            .networks
            .iter()
            .flat_map(|n| [address(n.ip.as_ref()), address(n.ip6.as_ref())])
            .flatten()
            .collect();
        Some(Self {
            who: format!("ProxmoxContainer {}", ct.name_any()),
            labels: ct.labels().clone(),
            addresses,
        })
    }
}

/// The entries of the guests `match_labels` selects, after `fixed` (the
/// static entries, which win over a member of the same address): one per
/// address, named after its first guest; and how many guests matched.
pub fn entries(
    match_labels: &BTreeMap<String, String>,
    guests: &[Guest],
    fixed: Vec<Entry>,
) -> (Vec<Entry>, usize) {
    let mut out = fixed;
    let mut matched = 0;
    let mut sorted: Vec<&Guest> = guests.iter().collect();
    sorted.sort_by(|a, b| a.who.cmp(&b.who));
    for guest in sorted {
        if !match_labels
            .iter()
            .all(|(k, v)| guest.labels.get(k) == Some(v))
        {
            continue;
        }
        matched += 1;
        for addr in &guest.addresses {
            if !out.iter().any(|e| &e.cidr == addr) {
                out.push(Entry {
                    cidr: addr.clone(),
                    nomatch: false,
                    comment: Some(guest.who.clone()),
                });
            }
        }
    }
    (out, matched)
}
