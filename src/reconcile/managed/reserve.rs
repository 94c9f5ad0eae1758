//! VMIDs for the kinds that take one (VMs and containers share one VMID
//! space per provider config): the lowest free VMID of the config's range,
//! reserved in the shared scheduler before the plan decides.

use std::collections::BTreeSet;

use crate::reconcile::common::grants::VmidGrant;
use crate::reconcile::context::Context;
use crate::reconcile::identity::Identity;
use crate::reconcile::providers::{ConfigKey, Connection};
use crate::reconcile::schedule::vmids;

/// The lowest free VMID of the config's range for this resource.
pub async fn allocate_vmid(ctx: &Context, conn: &Connection, id: &Identity) -> VmidGrant {
    let next_id = match ctx.inventory.next_id(&conn.key, &conn.client).await {
        Ok(next_id) => next_id,
        Err(e) => {
            return VmidGrant::Unavailable(format!("cannot read the cluster's next-id range: {e}"));
        }
    };
    let range = vmids::range(conn.vmid_range, next_id);
    // At most one poll interval old, as every observation reads it.
    let view = match ctx
        .inventory
        .view(&conn.key, &conn.client, conn.timing.poll_interval)
        .await
    {
        Ok(view) => view,
        Err(e) => {
            return VmidGrant::Unavailable(format!("cannot list the cluster's VMIDs: {e}"));
        }
    };
    let mut used: BTreeSet<u32> = view.vmids.clone();
    used.extend(recorded_vmids(ctx, &conn.key));
    match ctx
        .scheduler
        .allocate_vmid(&conn.key, &id.uid, range.clone(), &used)
    {
        Some(vmid) => {
            ctx.metrics.vmid_allocated();
            VmidGrant::Reserved(vmid)
        }
        None => VmidGrant::Unavailable(format!(
            "no free VMID in {}..={} (every one is used on the cluster or by a ProxmoxVM)",
            range.start(),
            range.end()
        )),
    }
}

/// VMIDs recorded in the external-name annotations of this config's
/// resources, of every kind that takes one (one VMID space).
fn recorded_vmids(ctx: &Context, key: &ConfigKey) -> impl Iterator<Item = u32> {
    ctx.vmid_holders.iter().flat_map(|h| h.recorded(key))
}
