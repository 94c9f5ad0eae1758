//! `status` of a ProxmoxPool: the pool as last observed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::managed::ManagedStatus;

/// Observed state of a ProxmoxPool.
pub type ProxmoxPoolStatus = ManagedStatus<PoolAtProvider>;

/// The pool as last observed on Proxmox.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolAtProvider {
    /// The pool's ID, once it was seen on Proxmox with this resource's
    /// ownership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<String>,
    /// The comment, without the owner marker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The guests Proxmox lists in the pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<PoolMember>,
    /// How many guests the pool holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_count: Option<u32>,
    /// The entries of `spec.forProvider.access` found applied on
    /// `/pool/<poolId>` (what this resource removes when they leave the
    /// spec).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<AppliedAccess>,
}

/// An ACL entry found on the pool: a role for one user, group or token.
/// (Plain: the status carries none of the spec's CEL, whose cost the API
/// server counts again for every list that holds it.)
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedAccess {
    /// The role.
    pub role: String,
    /// The user, `name@realm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The API token, `name@realm!tokenid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Whether it holds below the pool too.
    pub propagate: bool,
}

/// A guest in the pool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolMember {
    /// VMID.
    pub vmid: u32,
    /// `qemu` or `lxc`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The guest's name, when Proxmox shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}
