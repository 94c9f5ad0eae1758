//! The envelope every managed kind's pass runs in, whatever the kind: which
//! provider config term it acts under, what happens when another replica
//! holds the config or the config caches have not listed yet, and the
//! cancellation when the term ends.
//!
//! One rule for every kind (design review 4's drift table):
//!
//! * **Held here**: the pass runs under the config's [`Hold`], is cancelled
//!   when its term ends ([`run_held`]) and shows the hold to
//!   `Shards::fence` before each write, Kubernetes and Proxmox alike.
//! * **Missing config** (no Lease, no holder): any replica runs the pass
//!   with a report-only hold, which may only say so on the resource
//!   (`ProviderConfigNotFound`); once the config exists after all, the pass
//!   stops ([`Hold::report_only`]) and the config's holder takes over.
//! * **Held by another replica**: the resource waits for a change. Gaining
//!   the config wakes every resource naming it (VMs, containers, images:
//!   `configs::Users::wake`), so no timer is needed and none is spent.
//! * **Not known yet** (the config caches have not listed): asked again in
//!   [`CONFIGS_LISTING`].

use std::future::Future;
use std::time::Duration;

use kube::runtime::controller::Action;

use crate::reconcile::context::Context;
use crate::reconcile::error::Error;
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::runtime::shards::Hold;

/// How soon a pass that came before the config caches had listed is tried
/// again. (Waiting for a change instead left a resource naming a config
/// that never comes without any status, when its first pass ran before the
/// caches had listed.)
pub const CONFIGS_LISTING: Duration = Duration::from_secs(1);

/// The hold a pass of a resource naming `key` runs under, or what the
/// reconcile returns instead (see the module documentation).
pub fn hold(ctx: &Context, key: &ConfigKey) -> Result<Hold, Action> {
    match ctx.shards.hold(key) {
        Some(hold) => Ok(hold),
        None => match ctx.providers.is_missing(key) {
            // A config that does not exist has no holder: any replica says
            // so.
            Some(true) => Ok(ctx.shards.to_report(key)),
            // Held by another replica: gaining it wakes this resource.
            Some(false) => Err(Action::await_change()),
            None => Err(Action::requeue(CONFIGS_LISTING)),
        },
    }
}

/// Runs `pass` until it ends or `hold`'s term does, whichever comes first:
/// a pass cut short by a lost term writes nothing more.
pub async fn run_held<T>(
    hold: &Hold,
    pass: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    tokio::select! {
        result = pass => result,
        () = hold.lost() => Err(Error::Fenced { config: hold.key().to_string() }),
    }
}
