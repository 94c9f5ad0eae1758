//! The SDN controllers: ProxmoxSDNZone and ProxmoxVNet (its subnets
//! inline), each through the shared CRUD pass, and the applier that
//! applies each provider config's pending changes in one batch.
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | pure: the Proxmox IDs, the managed fields, the corrections, when to apply, the state shown |
//! | [`zone`], [`vnet`] | the kinds for [`crate::reconcile::managed::crud::pass`]: what they want, their calls, their users, their status |
//! | [`apply`] | one `PUT /cluster/sdn` per provider config for the pending changes, its task observed |
//! | [`wake`] | the VNets woken by their zone being written, and by the guests that leave one being deleted |

pub mod apply;
pub mod plan;
pub mod vnet;
pub mod wake;
pub mod zone;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::condition::{Condition, ConditionStatus, ConditionType, Reason};
use crate::api::sdn::ApplyState;
use crate::api::set_condition;
use crate::api::{ProxmoxContainer, ProxmoxSDNZone, ProxmoxVM, ProxmoxVNet};
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};

/// What the zone and VNet passes and the applier share.
pub struct Extra {
    pub zones: Store<ProxmoxSDNZone>,
    pub vnets: Store<ProxmoxVNet>,
    /// The guests (a VNet a NIC is on is not deleted).
    pub vms: Store<DeserializeGuard<ProxmoxVM>>,
    pub containers: Store<DeserializeGuard<ProxmoxContainer>>,
    pub applier: apply::Applier,
}

/// [`Extra`], shared.
pub type Shared = Arc<Extra>;

/// The conditions to write: an object up to date on Proxmox whose change
/// is not applied yet is not Ready (`Unavailable`, saying so).
fn condition_for(mut conditions: Vec<Condition>, shown: Option<&apply::Shown>) -> Vec<Condition> {
    let Some(shown) = shown else {
        return conditions;
    };
    let ready = conditions.iter().find(|c| c.type_ == "Ready");
    let available = ready.is_some_and(|c| c.reason == Reason::Available.as_str());
    let message = match (shown.state, &shown.failure) {
        (ApplyState::Applied, _) => return conditions,
        (ApplyState::Pending, None) => {
            "written to Proxmox's pending SDN configuration; waits for the cluster-wide apply"
                .to_owned()
        }
        (ApplyState::Pending, Some(why)) => format!("pending; the last apply failed: {why}"),
        (ApplyState::Applying, _) => "the SDN apply task runs".to_owned(),
        (ApplyState::ApplyFailed, why) => why.clone().unwrap_or_default(),
    };
    if let (true, Some(ready)) = (available, ready) {
        let changed = Condition::new(
            ConditionType::Ready,
            ConditionStatus::False,
            Reason::Unavailable,
            message,
            ready.last_transition_time.clone(),
        );
        let changed = Condition {
            observed_generation: ready.observed_generation,
            ..changed
        };
        set_condition(&mut conditions, changed);
    }
    conditions
}

/// One controller's cache and wake-ups.
pub type Cache<K> = (Writer<K>, UnboundedReceiver<ObjectRef<K>>);

/// Runs the zone and VNet controllers and the applier until `stop`
/// resolves; `wake`: the senders of the caches' wake-ups (the applier
/// wakes the resources whose apply state changed).
pub async fn run(
    ctx: Arc<Context>,
    (zones, vnets): (Cache<ProxmoxSDNZone>, Cache<ProxmoxVNet>),
    wake: (
        UnboundedSender<ObjectRef<ProxmoxSDNZone>>,
        UnboundedSender<ObjectRef<ProxmoxVNet>>,
    ),
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let extra = Arc::new(Extra {
        zones: zones.0.as_reader(),
        vnets: vnets.0.as_reader(),
        vms: ctx.store.clone(),
        containers: ctx.containers.clone(),
        applier: apply::Applier::default(),
    });
    // A VNet applied with its zone waits for it: woken when it is written.
    let vnets_of_zone = wake::ZoneWaker {
        sender: wake.1.clone(),
        zones: extra.zones.clone(),
        vnets: extra.vnets.clone(),
    };
    let wake = apply::Wake {
        zones: wake.0,
        vnets: wake.1,
    };
    let zone_ctx = Arc::new(Ctx::new(Arc::clone(&ctx), Arc::clone(&extra)));
    let vnet_ctx = Arc::new(Ctx::new(Arc::clone(&ctx), Arc::clone(&extra)));
    let applier = apply::run(Arc::clone(&ctx), extra, wake, stop.clone());
    futures::join!(
        controller::run_seeing(
            zone_ctx,
            zones,
            "ProxmoxSDNZone",
            move |event| vnets_of_zone.see(event),
            stop.clone()
        ),
        controller::run(vnet_ctx, vnets, "ProxmoxVNet", stop),
        applier,
    );
}
