//! The ProxmoxPool decisions, pure: the pool the spec asks for (its
//! comment with the owner marker, its access entries), what Proxmox showed
//! of it, the difference ([`Diff`]), and what a pass's outcome says on the
//! resource (conditions, events, when to look again).
//!
//! The ACL entries have no path here: the pass puts each on
//! `/pool/<poolId>` ([`acl_path`]), so no entry can grant anything outside
//! the pool. Of the entries on the pool's path, the resource manages those
//! its spec lists and those it applied before (`status.atProvider.access`):
//! one that leaves the spec is revoked, one another hand added is never
//! touched.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use pve_client::AclSubject;

use crate::api::condition::{Condition, ConditionStatus, ConditionType, Reason, set_condition};
use crate::api::pool::{AppliedAccess, PoolAccess, PoolAtProvider, PoolMember, ProxmoxPoolStatus};
use crate::reconcile::common::event::Event;
use crate::reconcile::common::owner::{self, Ownership};
use crate::reconcile::managed::crud::{Call, Decision, Diff, Done, Observed};

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

/// When to look again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Again {
    /// At once: a call was sent, the next pass observes what it did.
    Now,
    /// With the resource's growing backoff (nothing could be read, or the
    /// deletion waits for members).
    Backoff,
    /// At the config's resync interval (drift detection), or on a change.
    Resync,
    /// Never by timer: the finalizer is gone.
    Never,
}

/// What a pass's outcome says on the resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub status: ProxmoxPoolStatus,
    pub events: Vec<Event>,
    pub again: Again,
    /// The finalizer may go.
    pub release: bool,
}

/// The status, events and next look after a pass that got as far as
/// Proxmox; `previous` is the status read.
pub fn report(
    poolid: &str,
    want: &PoolObject,
    done: &Done<PoolObject>,
    previous: &ProxmoxPoolStatus,
    generation: Option<i64>,
    now: Time,
) -> Report {
    let mut status = previous.clone();
    // What could not be read keeps what was seen last.
    if !matches!(done.observed, Observed::Unknown(_)) {
        status.at_provider = at_provider(poolid, want, &done.observed);
    }
    let mut events = vec![];
    let (ready, synced, again) = outcome(poolid, done, &mut events);
    let release = matches!(done.decision, Decision::Released { .. });
    let notice = |reason: Reason| {
        let before = crate::api::condition::find(&previous.conditions, ConditionType::Synced);
        before.is_none_or(|c| c.reason != reason.as_str())
    };
    if let (Reason::NotOwned | Reason::InUse, message) = (&synced.1, &synced.2)
        && notice(synced.1)
    {
        events.push(Event {
            warning: true,
            reason: synced.1.as_str(),
            note: message.clone(),
        });
    }
    let mut set =
        |(type_, status_, reason, message): (ConditionType, ConditionStatus, Reason, String)| {
            let mut c = Condition::new(type_, status_, reason, message, now.clone());
            c.observed_generation = generation;
            set_condition(&mut status.conditions, c);
        };
    set(ready);
    set((ConditionType::Synced, synced.0, synced.1, synced.2));
    status.observed_generation = generation;
    Report {
        status,
        events,
        again,
        release,
    }
}

type Cond = (ConditionType, ConditionStatus, Reason, String);

/// Ready, Synced (status, reason, message) and the next look.
fn outcome(
    poolid: &str,
    done: &Done<PoolObject>,
    events: &mut Vec<Event>,
) -> (Cond, (ConditionStatus, Reason, String), Again) {
    use ConditionStatus::{False, True};
    let ready = |status, reason, message: String| (ConditionType::Ready, status, reason, message);
    let available = ready(True, Reason::Available, String::new());
    let unavailable = |m: String| ready(False, Reason::Unavailable, m);
    if let (Decision::Call(call), Some(why)) = (&done.decision, &done.refused) {
        let (verb, state) = match call {
            Call::Create(_) => (
                "create",
                unavailable(format!("pool {poolid} could not be created")),
            ),
            Call::Update(_) => (
                "update",
                unavailable(format!("pool {poolid} is not as the spec asks")),
            ),
            Call::Delete => (
                "delete",
                ready(
                    False,
                    Reason::Deleting,
                    format!("pool {poolid} could not be deleted"),
                ),
            ),
        };
        let reason = if why.starts_with(ACCESS_FIELD) {
            Reason::AccessRefused
        } else {
            Reason::ReconcileError
        };
        let message = format!("cannot {verb} pool {poolid}: {why}");
        events.push(Event {
            warning: true,
            reason: reason.as_str(),
            note: message.clone(),
        });
        // Not a loop: the same request would be refused again until
        // something changes (the spec wakes the resource, Proxmox is
        // looked at again at the resync interval).
        return (state, (False, reason, message), Again::Resync);
    }
    let success = |m: String| (True, Reason::ReconcileSuccess, m);
    match &done.decision {
        Decision::Call(Call::Create(_)) => {
            events.push(normal(
                "CreatedExternalResource",
                format!("created pool {poolid}"),
            ));
            (
                ready(False, Reason::Creating, format!("pool {poolid} created")),
                success(String::new()),
                Again::Now,
            )
        }
        Decision::Call(Call::Update(patch)) => {
            let fields = patch.fields();
            events.push(normal(
                "UpdatedExternalResource",
                format!("corrected pool {poolid}: {fields}"),
            ));
            (
                unavailable(format!("correcting {fields}")),
                success(String::new()),
                Again::Now,
            )
        }
        Decision::Call(Call::Delete) => {
            events.push(normal(
                "DeletedExternalResource",
                format!("deleted pool {poolid}"),
            ));
            (
                ready(False, Reason::Deleting, format!("pool {poolid} deleted")),
                success(String::new()),
                Again::Now,
            )
        }
        Decision::UpToDate => (available, success(String::new()), Again::Resync),
        Decision::Drifted(patch) => (
            available,
            success(format!(
                "{} differs from the spec; not corrected without the Update policy",
                patch.fields()
            )),
            Again::Resync,
        ),
        Decision::Missing => (
            unavailable(format!("pool {poolid} does not exist")),
            success(format!(
                "pool {poolid} does not exist and the management policies do not allow Create"
            )),
            Again::Resync,
        ),
        Decision::NotOwned => (
            unavailable(format!("pool {poolid} belongs to someone else")),
            (
                False,
                Reason::NotOwned,
                format!(
                    "pool {poolid} exists without this resource's owner marker in its comment: it is never changed or deleted (choose another poolId)"
                ),
            ),
            Again::Resync,
        ),
        Decision::InUse(why) => (
            ready(False, Reason::InUse, why.clone()),
            (
                False,
                Reason::InUse,
                format!("waiting to delete pool {poolid}: {why}"),
            ),
            Again::Backoff,
        ),
        Decision::Released { orphaned } => {
            if *orphaned {
                events.push(normal("Orphaned", format!("left pool {poolid} on Proxmox")));
            }
            (
                ready(False, Reason::Deleting, String::new()),
                success(String::new()),
                Again::Never,
            )
        }
        // A pool's want is never absent.
        Decision::Empty(why) => (
            unavailable(why.clone()),
            success(String::new()),
            Again::Resync,
        ),
        Decision::Wait(why) => (
            unavailable(format!("pool {poolid} could not be read")),
            (
                False,
                Reason::ReconcileError,
                format!("cannot read pool {poolid}: {why}"),
            ),
            Again::Backoff,
        ),
    }
}

fn normal(reason: &'static str, note: String) -> Event {
    Event {
        warning: false,
        reason,
        note,
    }
}

/// `atProvider`: the pool as seen, when it is this resource's.
fn at_provider(poolid: &str, want: &PoolObject, observed: &Observed<PoolObject>) -> PoolAtProvider {
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

/// Before Proxmox is asked: what stops the pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Gate {
    /// Go on with these capabilities.
    Go(crate::api::meta::Capabilities),
    /// Say this on Synced (reason, message) and stop: paused (a deletion
    /// waits too, as for every kind), or policies without Observe.
    Stop { reason: Reason, message: String },
}

/// What the management policies and `crossplane.io/paused` allow, read as
/// every kind reads them ([`crate::api::managed::ManagedSpec::mode`]).
pub fn gate(
    managed: &crate::api::managed::ManagedSpec,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Gate {
    match managed.capabilities(meta) {
        Ok(caps) => Gate::Go(caps),
        Err((reason, message)) => Gate::Stop { reason, message },
    }
}

/// `previous` with Synced saying `reason`/`message` (False), as of `now`.
pub fn said(
    previous: &ProxmoxPoolStatus,
    reason: Reason,
    message: &str,
    generation: Option<i64>,
    now: Time,
) -> ProxmoxPoolStatus {
    let mut status = previous.clone();
    let mut c = Condition::new(
        ConditionType::Synced,
        ConditionStatus::False,
        reason,
        message,
        now,
    );
    c.observed_generation = generation;
    set_condition(&mut status.conditions, c);
    status.observed_generation = generation;
    status
}
