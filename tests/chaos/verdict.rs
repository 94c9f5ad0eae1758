//! What can go wrong in a run, each with an account a person can act on.

use std::fmt;

/// The kinds of failure, in the order a report lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    NotReady,
    Lost,
    Duplicated,
    Misplaced,
    StatusDisagrees,
    DispatchCount,
    ForeignTaskAdopted,
    ConfigBlamed,
    LockLeft,
    Stray,
    Orphaned,
    FinalizerLeft,
    ConfigNotDeletable,
    TemplateBroken,
    SecretLeaked,
    Crashed,
    NoFailover,
    Harness,
}

impl Kind {
    pub const ALL: [Kind; 18] = [
        Kind::NotReady,
        Kind::Lost,
        Kind::Duplicated,
        Kind::Misplaced,
        Kind::StatusDisagrees,
        Kind::DispatchCount,
        Kind::ForeignTaskAdopted,
        Kind::ConfigBlamed,
        Kind::LockLeft,
        Kind::Stray,
        Kind::Orphaned,
        Kind::FinalizerLeft,
        Kind::ConfigNotDeletable,
        Kind::TemplateBroken,
        Kind::SecretLeaked,
        Kind::Crashed,
        Kind::NoFailover,
        Kind::Harness,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Kind::NotReady => "ProxmoxVM not Ready",
            Kind::Lost => "VM lost (no VM carries the resource's owner marker)",
            Kind::Duplicated => "VM duplicated (several VMs carry one resource's marker)",
            Kind::Misplaced => "VM misplaced (outside spec.node / allowedNodes)",
            Kind::StatusDisagrees => "status disagrees with Proxmox (VMID or node)",
            Kind::DispatchCount => "create dispatched more than once for one VM",
            Kind::ForeignTaskAdopted => "task of another resource adopted",
            Kind::ConfigBlamed => "valid provider config reported unusable",
            Kind::LockLeft => "lock left on a VM",
            Kind::Stray => "stray VM (owned by no resource) before deletion",
            Kind::Orphaned => "VM orphaned (left after every resource was deleted)",
            Kind::FinalizerLeft => "ProxmoxVM stuck in deletion (finalizer left)",
            Kind::ConfigNotDeletable => "ProviderConfig not deletable",
            Kind::TemplateBroken => "template 9000 missing or changed",
            Kind::SecretLeaked => {
                "secret found in logs, events, status, metrics or the request log"
            }
            Kind::Crashed => "provider process exited by itself",
            Kind::NoFailover => "no new leader after a leader kill",
            Kind::Harness => "the run did not inject what it must",
        }
    }
}

/// One failure.
#[derive(Clone, Debug)]
pub struct Violation {
    pub kind: Kind,
    pub account: String,
}

impl Violation {
    pub fn new(kind: Kind, account: impl Into<String>) -> Self {
        Self {
            kind,
            account: account.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.kind.label(), self.account)
    }
}

/// How many violations of `kind` there are.
pub fn count(violations: &[Violation], kind: Kind) -> usize {
    violations.iter().filter(|v| v.kind == kind).count()
}
