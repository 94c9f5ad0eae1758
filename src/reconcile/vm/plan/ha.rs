//! High availability: the VM as an HA resource in the requested state,
//! kept on its nodes by a node-affinity rule (PVE 9) or an HA group (PVE 8)
//! when asked, and removed from HA before it is destroyed.
//!
//! HA configuration is written synchronously (no task): each write is one
//! step, and the next pass reads the configuration afresh, so a write that
//! landed is never sent again. A VM that HA or its load balancer moves is
//! followed (see [`super::motion`]).

use pve_client::{HaAffinity, HaResourceSpec};

use super::context::Ctx;
use super::input::HaView;
use crate::api::vm::HighAvailability;

/// One write of HA configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HaCall {
    /// `POST /cluster/ha/resources`.
    AddResource(HaResourceSpec),
    /// `PUT /cluster/ha/resources/{sid}`.
    SetResource(HaResourceSpec),
    /// `DELETE /cluster/ha/resources/{sid}` (purging it from rules).
    RemoveResource {
        /// `vm:100`.
        sid: String,
    },
    /// `POST /cluster/ha/rules` (PVE 9).
    AddRule(HaAffinity),
    /// `PUT /cluster/ha/rules/{rule}` (PVE 9).
    SetRule(HaAffinity),
    /// `POST /cluster/ha/groups` (PVE 8).
    AddGroup(HaAffinity),
    /// `PUT /cluster/ha/groups/{group}` (PVE 8).
    SetGroup(HaAffinity),
    /// `DELETE /cluster/ha/groups/{group}` (PVE 8).
    RemoveGroup {
        /// Group ID.
        id: String,
    },
}

/// The rule or group the provider keeps for a VM.
pub fn affinity_id(vmid: u32) -> String {
    format!("crossplane-vm-{vmid}")
}

fn sid(vmid: u32) -> String {
    format!("vm:{vmid}")
}

fn comment(ctx: &Ctx) -> String {
    format!("managed by crossplane-provider-proxmox: {}", ctx.id)
}

/// The affinity the spec asks for: `allowedNodes`, else `node`.
fn wanted_affinity(ctx: &Ctx, ha: &HighAvailability, vmid: u32) -> Option<HaAffinity> {
    let strict = ha.node_affinity.as_ref()?.strict;
    let mut nodes = if ctx.spec.allowed_nodes.is_empty() {
        ctx.spec.node.iter().cloned().collect()
    } else {
        ctx.spec.allowed_nodes.clone()
    };
    nodes.sort();
    nodes.dedup();
    (!nodes.is_empty()).then(|| HaAffinity {
        id: affinity_id(vmid),
        sid: sid(vmid),
        nodes,
        strict,
        comment: Some(comment(ctx)),
    })
}

/// The next write that brings the VM's HA configuration to the spec.
pub(super) fn converge(ctx: &Ctx) -> Option<(String, HaCall)> {
    let ha = ctx.spec.ha.as_ref()?;
    let view = ctx.obs.ha.as_ref()?;
    let vmid = ctx.vmid()?;
    let affinity = wanted_affinity(ctx, ha, vmid);
    let resource = HaResourceSpec {
        sid: sid(vmid),
        state: ha.state.as_str().to_owned(),
        // PVE 8 binds a resource to its group; PVE 9 names resources in rules.
        group: affinity
            .as_ref()
            .filter(|_| !view.rules)
            .map(|a| a.id.clone()),
        comment: Some(comment(ctx)),
    };
    let call = if view.rules {
        resource_call(view, resource).or_else(|| affinity_call(view, affinity))
    } else {
        // The group must exist before a resource can name it.
        affinity_call(view, affinity).or_else(|| resource_call(view, resource))
    }?;
    Some((describe(&call, vmid), call))
}

fn resource_call(view: &HaView, wanted: HaResourceSpec) -> Option<HaCall> {
    match &view.resource {
        None => Some(HaCall::AddResource(wanted)),
        Some(have) if have.state != wanted.state || have.group != wanted.group => {
            Some(HaCall::SetResource(wanted))
        }
        Some(_) => None,
    }
}

fn affinity_call(view: &HaView, wanted: Option<HaAffinity>) -> Option<HaCall> {
    let wanted = wanted?;
    let same = view
        .affinity
        .as_ref()
        .map(|have| have.nodes == wanted.nodes && have.strict == wanted.strict);
    match (same, view.rules) {
        (Some(true), _) => None,
        (Some(false), true) => Some(HaCall::SetRule(wanted)),
        (Some(false), false) => Some(HaCall::SetGroup(wanted)),
        (None, true) => Some(HaCall::AddRule(wanted)),
        (None, false) => Some(HaCall::AddGroup(wanted)),
    }
}

/// Before the VM is destroyed: out of HA (so stopping it is not an HA
/// request), then, on PVE 8, its group (PVE 9 purges the rule with the
/// resource).
pub(super) fn remove(ctx: &Ctx) -> Option<(String, HaCall)> {
    let view = ctx.obs.ha.as_ref()?;
    let vmid = ctx.vmid()?;
    let call = if view.resource.is_some() {
        HaCall::RemoveResource { sid: sid(vmid) }
    } else if !view.rules && view.affinity.is_some() {
        HaCall::RemoveGroup {
            id: affinity_id(vmid),
        }
    } else {
        return None;
    };
    Some((describe(&call, vmid), call))
}

fn describe(call: &HaCall, vmid: u32) -> String {
    match call {
        HaCall::AddResource(r) => {
            format!("registering VM {vmid} with HA (state {})", r.state)
        }
        HaCall::SetResource(r) => format!("setting the HA state of VM {vmid} to {}", r.state),
        HaCall::RemoveResource { .. } => format!("removing VM {vmid} from HA"),
        HaCall::AddRule(a) | HaCall::AddGroup(a) => format!(
            "keeping VM {vmid} on nodes {} (HA {})",
            a.nodes.join(", "),
            a.id
        ),
        HaCall::SetRule(a) | HaCall::SetGroup(a) => format!(
            "updating the nodes of VM {vmid} to {} (HA {})",
            a.nodes.join(", "),
            a.id
        ),
        HaCall::RemoveGroup { id } => format!("removing the HA group {id} of VM {vmid}"),
    }
}
