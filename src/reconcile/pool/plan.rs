//! The ProxmoxPool decisions, pure: the pool the spec asks for (its
//! comment with the owner marker, its access entries), what Proxmox showed
//! of it, the difference ([`Diff`]), what holds its deletion, the refusal
//! that names an access entry, and its `atProvider`.
//!
//! The ACL entries have no path here: the pass puts each on
//! `/pool/<poolId>` ([`acl_path`]), so no entry can grant anything outside
//! the pool. Of the entries on the pool's path, the resource manages those
//! its spec lists and those it applied before (`status.atProvider.access`):
//! one that leaves the spec is revoked, one another hand added is never
//! touched.

use std::collections::BTreeSet;

use pve_client::AclSubject;

use crate::api::condition::Reason;
use crate::api::pool::{AppliedAccess, PoolAccess, PoolAtProvider, PoolMember};
use crate::reconcile::common::owner::{self, Ownership};
use crate::reconcile::managed::crud::{Diff, Observed};

/// The kind, as its owner marker names it.
pub const KIND: &str = "ProxmoxPool";

/// What starts the refusal of an access entry: the pass names the field.
pub const ACCESS_FIELD: &str = "spec.forProvider.access[";

/// The ACL path of the pool `poolid`: the only path entries go on.
pub fn acl_path(poolid: &str) -> String {
    format!("/pool/{poolid}")
}

/// One ACL entry on the pool's path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Grant {
    pub role: String,
    pub subject: AclSubject,
    pub propagate: bool,
}

impl Grant {
    /// The entry a spec's access item asks for (`None`: no subject, which
    /// the CRD refuses).
    pub fn of(access: &PoolAccess) -> Option<Self> {
        Self::from_parts(
            &access.role,
            [&access.user, &access.group, &access.token],
            access.propagate,
        )
    }

    /// The entry the status recorded as applied.
    pub fn applied(access: &AppliedAccess) -> Option<Self> {
        Self::from_parts(
            &access.role,
            [&access.user, &access.group, &access.token],
            access.propagate,
        )
    }

    fn from_parts(
        role: &str,
        [user, group, token]: [&Option<String>; 3],
        propagate: bool,
    ) -> Option<Self> {
        let subject = match (user, group, token) {
            (Some(u), _, _) => AclSubject::User(u.clone()),
            (None, Some(g), _) => AclSubject::Group(g.clone()),
            (None, None, Some(t)) => AclSubject::Token(t.clone()),
            (None, None, None) => return None,
        };
        Some(Self {
            role: role.to_owned(),
            subject,
            propagate,
        })
    }

    /// The entry as the status shows it.
    pub fn access(&self) -> AppliedAccess {
        let (user, group, token) = match &self.subject {
            AclSubject::User(u) => (Some(u.clone()), None, None),
            AclSubject::Group(g) => (None, Some(g.clone()), None),
            AclSubject::Token(t) => (None, None, Some(t.clone())),
        };
        AppliedAccess {
            role: self.role.clone(),
            user,
            group,
            token,
            propagate: self.propagate,
        }
    }

    /// The same role for the same subject (whatever the propagation): one
    /// entry on Proxmox.
    fn same_entry(&self, other: &Self) -> bool {
        self.role == other.role && self.subject == other.subject
    }

    /// For people: `PVEVMUser for user alice@pve`.
    pub fn describe(&self) -> String {
        let (kind, who) = match &self.subject {
            AclSubject::User(u) => ("user", u),
            AclSubject::Group(g) => ("group", g),
            AclSubject::Token(t) => ("token", t),
        };
        format!("{} for {kind} {who}", self.role)
    }
}

/// The managed part of a pool.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolObject {
    /// The whole comment, the owner marker its last line.
    pub comment: String,
    /// The entries on the pool's path.
    pub access: BTreeSet<Grant>,
    /// The guests in it (observed; not managed).
    pub members: Vec<PoolMember>,
    /// Wanted only: the entries this resource applied before, so one that
    /// left the spec is revoked.
    pub applied: BTreeSet<Grant>,
}

/// What corrects a pool's drift.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolPatch {
    /// The comment to set.
    pub comment: Option<String>,
    /// Entries to add (or whose propagation to change).
    pub grant: Vec<Grant>,
    /// Entries this resource applied that left the spec.
    pub revoke: Vec<Grant>,
}

impl PoolPatch {
    /// What it changes, for people: `comment, access`.
    pub fn fields(&self) -> String {
        let mut fields = vec![];
        if self.comment.is_some() {
            fields.push("comment");
        }
        if !self.grant.is_empty() || !self.revoke.is_empty() {
            fields.push("access");
        }
        fields.join(", ")
    }
}

impl Diff for PoolObject {
    type Patch = PoolPatch;

    fn diff(&self, observed: &Self) -> Option<PoolPatch> {
        let comment = (self.comment != observed.comment).then(|| self.comment.clone());
        let grant: Vec<Grant> = self
            .access
            .iter()
            .filter(|g| !observed.access.contains(g))
            .cloned()
            .collect();
        let revoke: Vec<Grant> = observed
            .access
            .iter()
            .filter(|o| self.applied.iter().any(|a| a.same_entry(o)))
            .filter(|o| !self.access.iter().any(|w| w.same_entry(o)))
            .cloned()
            .collect();
        let patch = PoolPatch {
            comment,
            grant,
            revoke,
        };
        (patch != PoolPatch::default()).then_some(patch)
    }

    fn in_use(&self) -> Option<String> {
        if self.members.is_empty() {
            return None;
        }
        let names: Vec<String> = self.members.iter().map(member_name).collect();
        Some(format!(
            "the pool still holds {}: Proxmox deletes only an empty pool",
            names.join(", ")
        ))
    }
}

/// `qemu/100 (web)`.
fn member_name(m: &PoolMember) -> String {
    match &m.name {
        Some(name) => format!("{}/{} ({name})", m.kind, m.vmid),
        None => format!("{}/{}", m.kind, m.vmid),
    }
}

/// Who the resource is.
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// The pool the spec asks for: its comment followed by the owner marker,
/// its entries; `applied`: what the status says it applied.
pub fn want(
    owner: Owner<'_>,
    comment: Option<&str>,
    access: &[PoolAccess],
    applied: &[AppliedAccess],
) -> PoolObject {
    let marker = owner::marker_line_of(KIND, owner.namespace, owner.name, owner.uid);
    PoolObject {
        comment: owner::description(comment, &marker),
        access: access.iter().filter_map(Grant::of).collect(),
        members: vec![],
        applied: applied.iter().filter_map(Grant::applied).collect(),
    }
}

/// Whether a pool with this comment carries this resource's marker.
pub fn ours(comment: &str, uid: &str) -> bool {
    owner::owner_of(Some(comment), uid) == Ownership::Ours
}

/// The entries of `entries` on `path`, as grants.
pub fn on_path<'a>(
    entries: impl IntoIterator<Item = &'a pve_client::AclEntry>,
    path: &str,
) -> BTreeSet<Grant> {
    entries
        .into_iter()
        .filter(|e| e.path == path)
        .map(|e| Grant {
            role: e.role.clone(),
            subject: e.subject.clone(),
            propagate: e.propagate,
        })
        .collect()
}

/// The guests of a pool as Proxmox lists them (storages are not guests).
pub fn guests(members: &[pve_client::PoolMember]) -> Vec<PoolMember> {
    members
        .iter()
        .filter(|m| m.kind == "qemu" || m.kind == "lxc")
        .filter_map(|m| {
            Some(PoolMember {
                vmid: u32::try_from(m.vmid?).ok()?,
                kind: m.kind.clone(),
                name: m.name.clone(),
            })
        })
        .collect()
}

/// The reason a refusal is said with when it names an access entry of
/// the spec (the pass names the entry): `AccessRefused`, tried again at
/// the resync interval, since the same entry is refused until the spec
/// or Proxmox's roles change.
pub fn refusal(why: &str) -> Option<Reason> {
    why.starts_with(ACCESS_FIELD)
        .then_some(Reason::AccessRefused)
}

/// `atProvider`: the pool as seen, when it is this resource's.
pub fn at_provider(
    poolid: &str,
    want: &PoolObject,
    observed: &Observed<PoolObject>,
) -> PoolAtProvider {
    let Observed::Found { object, ours: true } = observed else {
        return PoolAtProvider::default();
    };
    let comment = owner::user_part(&object.comment);
    // Entries it manages (listed, or applied before and not revoked yet).
    let access: Vec<AppliedAccess> = object
        .access
        .iter()
        .filter(|o| {
            want.access
                .iter()
                .chain(&want.applied)
                .any(|w| w.same_entry(o))
        })
        .map(Grant::access)
        .collect();
    PoolAtProvider {
        pool_id: Some(poolid.to_owned()),
        comment: (!comment.is_empty()).then_some(comment),
        member_count: Some(u32::try_from(object.members.len()).unwrap_or(u32::MAX)),
        members: object.members.clone(),
        access,
    }
}
