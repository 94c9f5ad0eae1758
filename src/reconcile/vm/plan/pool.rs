//! The VM's resource pool (`spec.forProvider.pool`) kept in place: a VM
//! made elsewhere, or moved by hand, is moved into the pool the spec names
//! with one synchronous `PUT /pools/{pool}` (`allow-move` when it is in
//! another pool: PVE 8.1+, so the VM is never outside both, which would
//! lose the access a pool-scoped ACL gives). A spec without `pool` leaves
//! the VM's membership as it is.
//!
//! The membership is read from the shared cluster view (no request at
//! rest); a view that says otherwise is checked against the pool's own
//! member list before a move (it lags a move by up to the poll interval).

use super::context::Ctx;

/// Where the VM is, as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolView {
    /// The pool it is in, if any.
    pub member_of: Option<String>,
}

/// Moving VM `vmid` into `pool`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolMove {
    pub pool: String,
    pub vmid: u32,
    /// It is in another pool now.
    pub allow_move: bool,
}

/// The move the spec asks for, if the VM is not where it says.
pub(super) fn converge(ctx: &Ctx) -> Option<(String, PoolMove)> {
    let wanted = ctx.spec.pool.as_ref()?;
    let view = ctx.obs.pool.as_ref()?;
    let vmid = ctx.vmid()?;
    if view.member_of.as_ref() == Some(wanted) {
        return None;
    }
    let doing = match &view.member_of {
        Some(from) => format!("moving VM {vmid} from pool {from} into pool {wanted}"),
        None => format!("adding VM {vmid} to pool {wanted}"),
    };
    Some((
        doing,
        PoolMove {
            pool: wanted.clone(),
            vmid,
            allow_move: view.member_of.is_some(),
        },
    ))
}
