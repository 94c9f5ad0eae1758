//! The IP set as a CRUD kind: what it wants, its calls, who uses it.
//!
//! Requests per pass: `GET /cluster/firewall/ipset` (the set's comment,
//! which holds the owner marker, is only in the list) and, when the set is
//! there, `GET .../ipset/{name}` (its entries and their digest); then at
//! most one correction. A re-apply of an unchanged spec sends no write.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use pve_client::ipset::Scope;

use super::Caches;
use super::members;
use super::plan::{self, Set};
use crate::api::ProxmoxIPSet;
use crate::api::condition::Condition;
use crate::api::ip_set::{IPSetAtProvider, ProxmoxIPSetStatus};
use crate::reconcile::common::owner::{Ownership, owner_of};
use crate::reconcile::managed::crud::pass::{Kind, Wanted};
use crate::reconcile::managed::crud::{Call, External, Observed};
use crate::reconcile::managed::selector::firewall_users;
use crate::reconcile::managed::{ip_sets, names};

/// The kind's name in owner markers.
const KIND: &str = "ProxmoxIPSet";

/// pve-firewall's maximum IP set name length.
const NAME_MAX: usize = 64;

/// The set's Proxmox name.
pub fn set_name(meta: &ObjectMeta) -> String {
    names::of(meta, NAME_MAX)
}

impl Kind for ProxmoxIPSet {
    type External = SetCalls;
    type Status = ProxmoxIPSetStatus;
    type Extra = Caches;

    fn managed(&self) -> &crate::api::managed::ManagedSpec {
        &self.spec.managed
    }

    fn want(&self, caches: &Caches) -> Wanted<Self> {
        let spec = &self.spec.for_provider;
        let comment = names::marked_comment(KIND, &self.metadata, spec.comment.as_deref());
        let set = |entries| Set {
            comment: comment.clone(),
            entries,
            digest: None,
        };
        match plan::entries(&spec.cidrs, "spec.forProvider.cidrs") {
            Ok(fixed) => Ok(set(match &spec.selector {
                Some(selector) => {
                    members::entries(&selector.match_labels, &caches.guests(self), fixed).0
                }
                None => fixed,
            })),
            Err(why) => Err((why, set(vec![]))),
        }
    }

    fn external(&self, client: pve_client::Client, _: &Self::Extra) -> SetCalls {
        SetCalls {
            client,
            name: set_name(&self.metadata),
            uid: self.uid().unwrap_or_default(),
        }
    }

    /// The ProxmoxSecurityGroups of its namespace whose rules name it.
    fn users(&self, caches: &Caches) -> Vec<String> {
        let namespace = self.namespace();
        let name = self.name_any();
        let mut users: Vec<String> = caches
            .groups
            .state()
            .iter()
            .filter(|g| g.namespace() == namespace)
            .filter(|g| {
                crate::api::security_group::ip_sets(&g.spec.for_provider.rules)
                    .contains(&name.as_str())
            })
            .map(|g| format!("ProxmoxSecurityGroup {}", g.name_any()))
            .collect();
        users.sort();
        // Guests whose firewall rules name the set.
        users.extend(firewall_users(
            (&caches.vms, &caches.containers),
            namespace.as_deref(),
            &name,
            crate::api::firewall::GuestFirewall::ip_sets,
        ));
        users
    }

    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }

    fn status(
        &self,
        caches: &Caches,
        conditions: Vec<Condition>,
        observed: Option<&Observed<Set>>,
    ) -> ProxmoxIPSetStatus {
        let seen = observed.and_then(Observed::found);
        let members = self.spec.for_provider.selector.as_ref().map(|selector| {
            let (_, matched) =
                members::entries(&selector.match_labels, &caches.guests(self), vec![]);
            u32::try_from(matched).unwrap_or(u32::MAX)
        });
        ProxmoxIPSetStatus {
            at_provider: IPSetAtProvider {
                name: Some(set_name(&self.metadata)),
                entries: seen.and_then(|s| u32::try_from(s.entries.len()).ok()),
                members,
            },
            conditions,
            observed_generation: self.metadata.generation,
            ..Default::default()
        }
    }
}

/// The calls for one set.
pub struct SetCalls {
    client: pve_client::Client,
    name: String,
    uid: String,
}

impl External for SetCalls {
    type Object = Set;

    async fn observe(&self) -> Observed<Set> {
        let sets = match self.client.ip_sets(Scope::Cluster).await {
            Ok(sets) => sets,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        let Some(found) = sets.into_iter().find(|s| s.name == self.name) else {
            return Observed::NotFound;
        };
        let listed = match self.client.ip_set_entries(Scope::Cluster, &self.name).await {
            Ok(entries) => entries,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        let object = Set::observed(found.comment, listed);
        let ours = owner_of(Some(&object.comment), &self.uid) == Ownership::Ours;
        Observed::Found { object, ours }
    }

    async fn call(&self, call: &Call<Set>) -> Result<(), String> {
        let c = &self.client;
        let name = self.name.as_str();
        let result = match call {
            Call::Create(set) => c.create_ip_set(Scope::Cluster, name, &set.comment).await,
            Call::Update(patch) => ip_sets::send(c, Scope::Cluster, name, patch).await,
            Call::Delete => c.delete_ip_set(Scope::Cluster, name).await,
        };
        result.map_err(|e| e.to_string())
    }
}
