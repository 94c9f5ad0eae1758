//! The VM's own firewall (`spec.forProvider.firewall`): decided by
//! [`crate::reconcile::common::firewall`], one synchronous write per pass,
//! before the VM is started. Absent from the spec, the firewall is not
//! read and never written.

use super::context::Ctx;
use crate::reconcile::common::firewall::next;
pub use crate::reconcile::common::firewall::{FirewallCall, FirewallNext, FirewallView, observed};

/// Why nothing of the firewall is written: `synced` when only waiting
/// for a reference that exists to be Ready.
#[derive(Clone, Debug, PartialEq)]
pub struct NotYet {
    pub synced: bool,
    pub why: String,
}

/// A firewall write to the VM `vmid` on `node`.
#[derive(Clone, Debug, PartialEq)]
pub struct FirewallWrite {
    pub node: String,
    pub vmid: u32,
    pub call: FirewallCall,
}

/// What the firewall of this pass's VM (on `node`) needs, when the spec
/// declares one and it was read.
pub(super) fn converge(ctx: &Ctx, node: &str) -> Option<Result<(String, FirewallWrite), NotYet>> {
    let fw = ctx.spec.firewall.as_ref()?;
    let view = ctx.obs.firewall.as_ref()?;
    let vmid = ctx.vmid()?;
    Some(
        match next(fw, view, &ctx.id.namespace, &format!("VM {vmid}"))? {
            FirewallNext::Write(doing, call) => Ok((
                doing,
                FirewallWrite {
                    node: node.to_owned(),
                    vmid,
                    call,
                },
            )),
            FirewallNext::Waiting(why) => Err(NotYet { synced: true, why }),
            FirewallNext::Refused(why) => Err(NotYet { synced: false, why }),
        },
    )
}
