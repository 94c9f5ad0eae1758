//! A Kubernetes request the provider's RBAC does not allow (403) is said on
//! the resource that needed it, as Synced=False `Forbidden` with the API
//! server's words (who, which verb, which resource, where), not only in
//! the log: the resource waits and tries again with backoff, so granting
//! the permission is enough. So is a refusal of the resource's own
//! metadata write (finalizer, external name, create annotations): the
//! step's outcome ([`super::ActFailure::Forbidden`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::context::Ctx;
use super::decision::{Decision, Say, in_secs};
use super::input::Forbidden;
use super::output::{Idle, Plan};
use crate::api::condition::find;
use crate::api::{Condition, ConditionStatus, ConditionType, ProxmoxVM, Reason, set_condition};
use crate::reconcile::common::provider::forbidden_message;

/// What to tell people.
fn message(forbidden: &Forbidden) -> String {
    forbidden_message(&forbidden.message, &in_secs(forbidden.retry_in))
}

/// A refused read or write before the plan (the provider config, its
/// credentials, the password Secret, `customCloudInit` data): nothing is
/// decided from a partial view; wait and try again.
pub(super) fn decide(ctx: &Ctx) -> Option<Decision> {
    ctx.forbidden.map(wait)
}

/// Waiting out a refusal, before the plan or of its step (the resource's
/// own metadata write): Synced=False `Forbidden`, Ready as it was, a try
/// again after the backoff.
pub(super) fn wait(forbidden: &Forbidden) -> Decision {
    let say = Say::no(Reason::Forbidden, message(forbidden));
    Decision::new(Idle::Wait, Some(forbidden.retry_in), say).keep_ready()
}

/// The plan once a write after it (the connection Secret) was refused:
/// Synced=False `Forbidden`, Ready and the step as planned, and a look
/// again after the backoff at the latest.
pub fn write_refused(plan: &mut Plan, vm: &ProxmoxVM, now: Timestamp, forbidden: &Forbidden) {
    let before = find(&plan.status.conditions, ConditionType::Synced)
        .filter(|c| c.status == ConditionStatus::False)
        .and_then(|c| c.message.clone());
    let message = match before {
        Some(before) => format!("{}; also: {before}", message(forbidden)),
        None => message(forbidden),
    };
    let mut condition = Condition::new(
        ConditionType::Synced,
        ConditionStatus::False,
        Reason::Forbidden,
        message,
        Time(now),
    );
    condition.observed_generation = vm.metadata.generation;
    set_condition(&mut plan.status.conditions, condition);
    plan.requeue_after = Some(
        plan.requeue_after
            .map_or(forbidden.retry_in, |r| r.min(forbidden.retry_in)),
    );
}
