//! `ProxmoxPool`: a Proxmox resource pool, with its comment and the access
//! it grants (ACL entries on `/pool/<id>`), and the guests that name it
//! (`forProvider.pool` of ProxmoxVMs) shown as its members.
//!
//! **The pool ID is explicit, immutable, and adopted only with this
//! resource's ownership.** Pools are a flat, cluster-wide namespace on
//! Proxmox and VMs name them by ID, so the ID is spelled out
//! (`forProvider.poolId`) rather than derived from the resource's name. Two
//! namespaces may ask for the same ID, and neither can take the other's
//! pool: the pool is created with an owner marker in its comment (the line
//! `Managed by crossplane-provider-proxmox: ProxmoxPool <ns>/<name>
//! uid=<uid>`, as a VM carries one in its description), and a pool found
//! without this resource's marker (made by hand, by another resource, or
//! by this one's predecessor of the same name) is never changed or deleted
//! (`NotOwned`). The access entries have no path: each applies to
//! `/pool/<poolId>` and nothing else, by construction.

mod status;
#[cfg(test)]
mod tests;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

pub use status::{AppliedAccess, PoolAtProvider, PoolMember, ProxmoxPoolStatus};

use crate::api::managed::ManagedSpec;

/// A Proxmox resource pool and the access it grants.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxPool",
    plural = "proxmoxpools",
    singular = "proxmoxpool",
    namespaced,
    status = "ProxmoxPoolStatus",
    derive = "PartialEq",
    shortname = "ppool",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A Proxmox VE resource pool and the access it grants, managed by crossplane-provider-proxmox.",
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "SYNCED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Synced')].status"
    ),
    printcolumn(
        name = "POOL",
        type_ = "string",
        json_path = ".spec.forProvider.poolId"
    ),
    printcolumn(
        name = "MEMBERS",
        type_ = "integer",
        json_path = ".status.atProvider.memberCount"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "REASON",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Synced')].reason",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxPoolSpec {
    /// The pool as it should be on Proxmox.
    pub for_provider: PoolParameters,

    /// `providerConfigRef` and `managementPolicies`, as every kind has
    /// them (see [`ManagedSpec`]).
    #[serde(flatten)]
    pub managed: ManagedSpec,
}

/// The pool's ID, comment and access.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PoolParameters {
    /// The pool's ID on Proxmox (what a ProxmoxVM's `forProvider.pool`
    /// names): a letter, then letters, digits, `_` or `-`. Cannot be
    /// changed. A pool with this ID that this resource did not create is
    /// never adopted (`NotOwned`).
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(
        validation = Rule::new("self.matches('^[A-Za-z][A-Za-z0-9_-]*$')")
            .message("poolId must start with a letter and hold only letters, digits, '_' and '-' (what a ProxmoxVM's pool may name)"),
        validation = Rule::new("self == oldSelf")
            .message("poolId cannot be changed: create another ProxmoxPool")
    )]
    pub pool_id: String,

    /// The pool's comment. The provider adds its owner marker as the last
    /// line; a comment changed on Proxmox is set back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    #[x_kube(validation = Rule::new("!self.contains('Managed by crossplane-provider-proxmox:')")
        .message("comment must not contain the owner marker \"Managed by crossplane-provider-proxmox:\": the provider adds that line itself"))]
    pub comment: Option<String>,

    /// The access the pool grants: each entry gives a role to one user,
    /// group or API token on `/pool/<poolId>` (and, propagated, on its
    /// members). Entries this resource applied and no longer lists are
    /// removed; entries others added on the pool are left alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub access: Vec<PoolAccess>,
}

/// One ACL entry on the pool: a role for exactly one of `user`, `group`,
/// `token`.
#[derive(
    KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("[has(self.user), has(self.group), has(self.token)].filter(x, x).size() == 1")
        .message("exactly one of user, group and token must be set")
)]
pub struct PoolAccess {
    /// A Proxmox role, e.g. `PVEVMUser` or `PVEPoolUser`. A role that does
    /// not exist is reported on the resource (`AccessRefused`).
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9._-]+$')")
        .message("role must be a Proxmox role ID (letters, digits, '.', '_', '-')"))]
    pub role: String,

    /// A user, `name@realm`, e.g. `alice@pve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 3, max = 128))]
    #[x_kube(validation = Rule::new("self.matches('^[^\\\\s:/!@]+@[A-Za-z][A-Za-z0-9._-]+$')")
        .message("user must be name@realm, e.g. alice@pve"))]
    pub user: Option<String>,

    /// A group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9._-]+$')")
        .message("group must be a Proxmox group name (letters, digits, '.', '_', '-')"))]
    pub group: Option<String>,

    /// An API token, `name@realm!tokenid`, e.g. `ci@pve!deploy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 5, max = 128))]
    #[x_kube(validation = Rule::new("self.matches('^[^\\\\s:/!@]+@[A-Za-z][A-Za-z0-9._-]+![A-Za-z][A-Za-z0-9._-]*$')")
        .message("token must be name@realm!tokenid, e.g. ci@pve!deploy"))]
    pub token: Option<String>,

    /// Whether the role also holds on what is below the pool (its guests
    /// and storages). Proxmox's default: true.
    #[serde(default = "yes")]
    pub propagate: bool,
}

fn yes() -> bool {
    true
}
