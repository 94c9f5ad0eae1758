//! The security group as a CRUD kind: what it wants (its rules, an IP set
//! reference resolved to the set's Proxmox name), its calls, its status.
//!
//! Requests per pass: `GET /cluster/firewall/groups` (the group's comment,
//! which holds the owner marker, is only in the list) and, when the group
//! is there, `GET .../groups/{group}` (its rules and their digest); then
//! at most one correction. A re-apply of an unchanged spec sends no write.

use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::Caches;
use super::plan::{self, GROUP_NAME_MAX, Group, GroupPatch, IPSET_NAME_MAX};
use crate::api::condition::Condition;
use crate::api::firewall::GuestFirewall;
use crate::api::security_group::{ProxmoxSecurityGroupStatus, SecurityGroupAtProvider};
use crate::api::{ProxmoxIPSet, ProxmoxSecurityGroup};
use crate::reconcile::common::firewall::RulePatch;
use crate::reconcile::common::owner::{Ownership, owner_of};
use crate::reconcile::managed::crud::pass::{Kind, Wanted};
use crate::reconcile::managed::crud::{Call, External, Observed};
use crate::reconcile::managed::firewall_wake::usable;
use crate::reconcile::managed::names::{self, derived};
use crate::reconcile::managed::selector::firewall_users;

/// The kind's name in owner markers and events.
const KIND: &str = "ProxmoxSecurityGroup";

/// The Proxmox name of an IP set a rule may name now: once it is Ready
/// (before, Proxmox may not have it, and refuses the rule).
pub fn set_name(set: &ProxmoxIPSet) -> Option<String> {
    let status = set.status.as_ref()?;
    usable(&status.conditions, status.at_provider.name.as_ref())
}

/// The group's Proxmox name.
pub fn group_name(meta: &ObjectMeta) -> String {
    names::of(meta, GROUP_NAME_MAX)
}

impl Kind for ProxmoxSecurityGroup {
    type External = GroupCalls;
    type Status = ProxmoxSecurityGroupStatus;
    type Extra = Caches;

    fn managed(&self) -> &crate::api::managed::ManagedSpec {
        &self.spec.managed
    }

    fn want(&self, caches: &Caches) -> Wanted<Self> {
        let ip_sets = &caches.ip_sets;
        let namespace = self.namespace().unwrap_or_default();
        let spec = &self.spec.for_provider;
        let want = Group {
            comment: names::marked_comment(KIND, &self.metadata, spec.comment.as_deref()),
            rules: spec
                .rules
                .iter()
                .map(|r| plan::rule_spec(r, |set| derived(&namespace, set, IPSET_NAME_MAX)))
                .collect(),
            digest: None,
        };
        let missing: Vec<&str> = plan::ip_sets(&spec.rules)
            .into_iter()
            .filter(|set| {
                ip_sets
                    .get(&ObjectRef::new(set).within(&namespace))
                    .is_none()
            })
            .collect();
        if !missing.is_empty() {
            let why = format!(
                "spec.forProvider.rules: no ProxmoxIPSet {} in namespace {namespace}",
                missing.join(", ")
            );
            return Err((why, want));
        }
        Ok(want)
    }

    fn waiting_for(&self, caches: &Caches) -> Option<String> {
        let namespace = self.namespace().unwrap_or_default();
        let waiting: Vec<&str> = plan::ip_sets(&self.spec.for_provider.rules)
            .into_iter()
            .filter(|set| {
                caches
                    .ip_sets
                    .get(&ObjectRef::new(set).within(&namespace))
                    .is_some_and(|set| set_name(&set).is_none())
            })
            .collect();
        (!waiting.is_empty()).then(|| {
            format!(
                "spec.forProvider.rules: waiting for ProxmoxIPSet {} to be Ready",
                waiting.join(", ")
            )
        })
    }

    fn external(&self, client: pve_client::Client, _: &Self::Extra) -> GroupCalls {
        GroupCalls {
            client,
            name: group_name(&self.metadata),
            uid: self.uid().unwrap_or_default(),
            rules: Mutex::new(0),
        }
    }

    fn users(&self, caches: &Caches) -> Vec<String> {
        // Guests whose firewall names the group: PVE would delete it under
        // them (their rules then name nothing).
        firewall_users(
            (&caches.vms, &caches.containers),
            self.namespace().as_deref(),
            &self.name_any(),
            GuestFirewall::security_groups,
        )
    }

    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }

    fn status(
        &self,
        _: &Caches,
        conditions: Vec<Condition>,
        observed: Option<&Observed<Group>>,
    ) -> ProxmoxSecurityGroupStatus {
        let seen = observed.and_then(Observed::found);
        ProxmoxSecurityGroupStatus {
            at_provider: SecurityGroupAtProvider {
                name: Some(group_name(&self.metadata)),
                rules: seen.and_then(|g| u32::try_from(g.rules.len()).ok()),
            },
            conditions,
            observed_generation: self.metadata.generation,
            ..Default::default()
        }
    }
}

/// A refusal of the rule the spec has at `index`, naming it (the spec's
/// order is Proxmox's: a rule sent for position `index` is the spec's
/// `rules[index]`).
fn at_rule(index: usize, e: &pve_client::Error) -> String {
    format!("spec.forProvider.rules[{index}]: {e}")
}

/// The calls for one group.
pub struct GroupCalls {
    client: pve_client::Client,
    name: String,
    uid: String,
    /// How many rules the last observation saw (a group is deleted only
    /// once its rules are).
    rules: Mutex<usize>,
}

impl External for GroupCalls {
    type Object = Group;

    async fn observe(&self) -> Observed<Group> {
        let groups = match self.client.security_groups().await {
            Ok(groups) => groups,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        let Some(found) = groups.into_iter().find(|g| g.name == self.name) else {
            return Observed::NotFound;
        };
        let rules = match self.client.security_group_rules(&self.name).await {
            Ok(rules) => rules,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        if let Ok(mut count) = self.rules.lock() {
            *count = rules.len();
        }
        let comment = found.comment.unwrap_or_default();
        let ours = owner_of(Some(&comment), &self.uid) == Ownership::Ours;
        Observed::Found {
            object: Group {
                comment,
                digest: rules.first().and_then(|r| r.digest.clone()),
                rules: rules.iter().map(plan::observed_rule).collect(),
            },
            ours,
        }
    }

    async fn call(&self, call: &Call<Group>) -> Result<(), String> {
        let c = &self.client;
        let name = self.name.as_str();
        let result = match call {
            Call::Create(group) => c.create_security_group(name, &group.comment).await,
            Call::Update(GroupPatch::Comment(comment)) => {
                c.set_security_group_comment(name, comment).await
            }
            Call::Update(GroupPatch::Rules(patch)) => {
                return rule_patch(c, name, patch).await;
            }
            Call::Delete => {
                // PVE refuses to delete a group with rules: they go first.
                let count = self.rules.lock().map(|n| *n).unwrap_or_default();
                for pos in (0..count).rev() {
                    c.delete_security_group_rule(name, pos, None)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                c.delete_security_group(name).await
            }
        };
        result.map_err(|e| e.to_string())
    }
}

/// Sends one correction of the group's rules; a refusal names the spec
/// rule it concerns.
async fn rule_patch(c: &pve_client::Client, name: &str, patch: &RulePatch) -> Result<(), String> {
    let result = match patch {
        RulePatch::Prepend(rules) => {
            // Sent last to first: the j-th sent is rules[len - 1 - j].
            for (j, rule) in rules.iter().enumerate() {
                c.create_security_group_rule(name, rule)
                    .await
                    .map_err(|e| at_rule(rules.len() - 1 - j, &e))?;
            }
            Ok(())
        }
        RulePatch::Insert { at, rule } => {
            c.create_security_group_rule(name, rule)
                .await
                .map_err(|e| at_rule(*at, &e))?;
            // PVE has no other place for a new rule than first; it goes
            // before the rule now at `at + 1`. No digest: the list changed
            // with the rule just placed (a concurrent edit in between is
            // drift the next pass sees).
            if *at == 0 {
                Ok(())
            } else {
                c.move_security_group_rule(name, 0, at + 1, None).await
            }
        }
        RulePatch::Set { pos, rule, digest } => {
            let digest = digest.as_deref().unwrap_or_default();
            return c
                .set_security_group_rule(name, *pos, rule, digest)
                .await
                .map_err(|e| at_rule(*pos, &e));
        }
        RulePatch::Remove { pos, digest } => {
            c.delete_security_group_rule(name, *pos, digest.as_deref())
                .await
        }
    };
    result.map_err(|e| e.to_string())
}
