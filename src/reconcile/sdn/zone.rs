//! The zone as a CRUD kind: what it wants, its calls, its status.
//!
//! Requests per pass: `GET /cluster/sdn/zones?pending=1`, then at most one
//! write (pending until the applier applies it).

use kube::ResourceExt;

use super::apply::Seen;
use super::plan::{self, OptionsPatch, Zone};
use super::{Extra, Shared, condition_for};
use crate::api::ProxmoxSDNZone;
use crate::api::condition::Condition;
use crate::api::sdn::{ApplyState, ProxmoxSDNZoneStatus, ZoneAtProvider};
use crate::reconcile::managed::crud::pass::{Kind, Wanted};
use crate::reconcile::managed::crud::{Call, External, Observed};
use crate::reconcile::providers::ConfigKey;

/// The zone's Proxmox ID.
pub fn zone_id(namespace: &str, name: &str) -> String {
    plan::sdn_id('z', namespace, name)
}

fn id_of(zone: &ProxmoxSDNZone) -> String {
    zone_id(&zone.namespace().unwrap_or_default(), &zone.name_any())
}

impl Kind for ProxmoxSDNZone {
    type External = ZoneCalls;
    type Status = ProxmoxSDNZoneStatus;
    type Extra = Shared;

    fn managed(&self) -> &crate::api::managed::ManagedSpec {
        &self.spec.managed
    }

    fn want(&self, _: &Shared) -> Wanted<Self> {
        Ok(plan::zone_want(&self.spec.for_provider))
    }

    fn external(&self, client: pve_client::Client, _: &Self::Extra) -> ZoneCalls {
        ZoneCalls {
            client,
            id: id_of(self),
        }
    }

    /// The VNets of its namespace in it: Proxmox refuses to delete a zone
    /// with VNets.
    fn users(&self, extra: &Shared) -> Vec<String> {
        extra
            .vnets
            .state()
            .iter()
            .filter(|v| super::wake::names(v, self))
            .map(|v| format!("ProxmoxVNet {}", v.name_any()))
            .collect()
    }

    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }

    fn status(
        &self,
        extra: &Shared,
        conditions: Vec<Condition>,
        observed: Option<&Observed<Zone>>,
    ) -> ProxmoxSDNZoneStatus {
        let seen = observed.and_then(Observed::found);
        let before = self.status.as_ref().map(|s| &s.at_provider);
        let want = plan::zone_want(&self.spec.for_provider);
        if coming(self) {
            // Its VNets' last passes saw it on its way (they wait, and
            // are woken once its status says it is written): their creates
            // join its apply only if the applier waits for their next.
            let vnets = extra.vnets.state();
            let of_it = vnets.iter().filter(|v| super::wake::names(v, self));
            extra
                .applier
                .unsettle(of_it.filter_map(|v| v.metadata.uid.as_deref()));
        }
        let shown = record(
            extra,
            self,
            observed,
            seen.map(|z| z.pending),
            seen.is_some_and(|z| {
                z.deleted || crate::reconcile::managed::crud::Diff::diff(&want, z).is_none()
            }),
            &conditions,
        );
        let (state, task) = shown_state(
            shown.as_ref(),
            observed,
            (
                before.and_then(|b| b.state),
                before.and_then(|b| b.apply_task.clone()),
            ),
        );
        ProxmoxSDNZoneStatus {
            at_provider: ZoneAtProvider {
                id: Some(id_of(self)),
                state,
                apply_task: task,
            },
            conditions: condition_for(conditions, shown.as_ref().filter(|_| seen.is_some())),
            observed_generation: self.metadata.generation,
            ..Default::default()
        }
    }

    fn object_name(&self) -> String {
        format!("SDN zone {}", id_of(self))
    }
}

/// Whether a zone is still on its way to Proxmox (no pass yet, or just
/// created): a VNet of it then waits, and its own create joins the same
/// apply.
pub(super) fn coming(zone: &ProxmoxSDNZone) -> bool {
    let Some(status) = zone.status.as_ref() else {
        return true;
    };
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
    let creating = ready.is_some_and(|c| c.reason == "Creating");
    status.at_provider.state.is_none() && (ready.is_none() || creating)
}

/// The apply state and task a status shows: what the applier says of an
/// object found, none for one absent, and what was shown `before` when
/// Proxmox was not asked this pass.
pub(super) fn shown_state<T>(
    shown: Option<&super::apply::Shown>,
    observed: Option<&Observed<T>>,
    before: (Option<ApplyState>, Option<String>),
) -> (Option<ApplyState>, Option<String>) {
    match (shown, observed) {
        (Some(s), Some(Observed::Found { .. })) => (Some(s.state), s.task.clone()),
        (_, Some(Observed::NotFound)) => (None, None),
        _ => before,
    }
}

/// Tells the applier what the pass saw; `None` when Proxmox was not read.
pub(super) fn record<K: kube::Resource + crate::api::meta::ConfigUser, T>(
    extra: &Extra,
    obj: &K,
    observed: Option<&Observed<T>>,
    pending: Option<bool>,
    written: bool,
    conditions: &[Condition],
) -> Option<super::apply::Shown> {
    let uid = obj.uid().unwrap_or_default();
    let synced_failed = conditions
        .iter()
        .any(|c| c.type_ == "Synced" && c.status == crate::api::ConditionStatus::False);
    // Settled: it will write nothing more at this generation (as wanted,
    // refused or not readable, or nothing to read).
    let settled = match observed {
        None | Some(Observed::Unknown(_)) => true,
        Some(Observed::NotFound) => {
            synced_failed || kube::Resource::meta(obj).deletion_timestamp.is_some()
        }
        Some(Observed::Found { .. }) => written || synced_failed,
    };
    let seen = Seen {
        config: ConfigKey::of(obj),
        generation: kube::Resource::meta(obj).generation,
        pending: pending.unwrap_or(false),
        settled,
    };
    Some(extra.applier.record(&uid, seen))
}

/// The calls for one zone.
pub struct ZoneCalls {
    client: pve_client::Client,
    id: String,
}

impl External for ZoneCalls {
    type Object = Zone;

    async fn observe(&self) -> Observed<Zone> {
        match self.client.sdn_zones().await {
            Ok(zones) => match zones.iter().find(|z| z.id == self.id) {
                Some(z) => Observed::Found {
                    object: plan::zone_seen(z),
                    // The ID only this resource derives.
                    ours: true,
                },
                None => Observed::NotFound,
            },
            Err(e) => Observed::Unknown(e.to_string()),
        }
    }

    async fn call(&self, call: &Call<Zone>) -> Result<(), String> {
        let c = &self.client;
        let result = match call {
            Call::Create(z) => {
                c.create_sdn_zone(&self.id, &z.kind, &plan::pairs(&z.options))
                    .await
            }
            Call::Update(OptionsPatch { set, delete }) => {
                c.update_sdn_zone(&self.id, &plan::pairs(set), delete).await
            }
            Call::Delete => c.delete_sdn_zone(&self.id).await,
        };
        result.map_err(|e| e.to_string())
    }
}
