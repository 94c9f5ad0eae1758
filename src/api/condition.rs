//! Status conditions in Crossplane's shape, with Crossplane's reasons and our
//! own finer ones.
//!
//! `Ready` says whether the VM is usable, `Synced` whether the last reconcile
//! did what the spec asks (or what it is waiting for), `GuestAgent` whether
//! the guest agent answers. Kubernetes tooling (kstatus, `kubectl wait`,
//! Flux, Argo CD) reads `Ready` together with `status.observedGeneration`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kinds of condition this provider reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionType {
    /// The VM exists and is in the requested power state.
    Ready,
    /// The provider's last pass succeeded, or says what it waits for.
    Synced,
    /// The QEMU guest agent answers (IP addresses are known).
    /// Informational: never affects `Ready`.
    GuestAgent,
    /// Something in the spec works, but not as one would expect (e.g. OVMF
    /// without an EFI disk); present only while it holds. Informational:
    /// never affects `Ready`.
    Warning,
}

impl ConditionType {
    /// The `type` string written to the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::Synced => "Synced",
            Self::GuestAgent => "GuestAgent",
            Self::Warning => "Warning",
        }
    }
}

/// `True`, `False` or `Unknown`, as in every Kubernetes condition.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The provider cannot tell.
    Unknown,
}

/// Machine-readable reasons. The first seven are Crossplane's; the rest
/// refine them so `kubectl describe` says precisely what is happening.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Ready=True: the VM exists and is in the requested power state.
    Available,
    /// Ready=False: the VM exists but is not usable as requested.
    Unavailable,
    /// Ready=False: the VM is being created.
    Creating,
    /// Ready=False: the VM is being deleted.
    Deleting,
    /// Synced=True: the last pass succeeded.
    ReconcileSuccess,
    /// Synced=False: the last pass failed.
    ReconcileError,
    /// Synced=False: reconciliation is paused.
    ReconcilePaused,
    /// Synced=True: a Proxmox task we started is running.
    WaitingForTask,
    /// Synced=True: the create task is importing a disk image.
    ImportingDisk,
    /// Synced=True: a disk image is being downloaded into Proxmox storage.
    DownloadingImage,
    /// Synced=False: a Proxmox task failed; retried with backoff.
    TaskFailed,
    /// Synced=False: a Proxmox task ran past its deadline; still observed.
    TaskTimeout,
    /// Synced=True (waiting): the VM holds a lock we did not take.
    VmLocked,
    /// Synced=False: the VM with this VMID is not ours; left untouched.
    NotOwned,
    /// Synced=False: the provider config is missing or unusable.
    ProviderConfigNotFound,
    /// Synced=False: the spec cannot be carried out as written.
    InvalidSpec,
    /// Synced=False: a Secret the spec refers to is missing.
    SecretNotFound,
    /// Synced=False: the clone template is missing or ambiguous.
    TemplateNotFound,
    /// Synced=False: the connection Secret is another resource's or was not
    /// made by the provider; it is not written.
    ConnectionSecretConflict,
    /// Synced=False: the clone source is a VM that is not a template;
    /// nothing is cloned until it is one.
    NotATemplate,
    /// Synced=True: waiting for a per-node import or clone slot.
    WaitingForCapacity,
    /// Synced=True: a clone waits for its source, declared by another
    /// ProxmoxVM with `template: true`, to become a template.
    WaitingForTemplate,
    /// Synced=False: `clone.image` or `disks[].image.name` names no
    /// ProxmoxImage of the namespace.
    ImageNotFound,
    /// Synced=False: `clone.image` names a ProxmoxImage without
    /// `spec.forProvider.template`.
    ImageHasNoTemplate,
    /// Synced=True (waiting): the image named by `clone.image` or
    /// `disks[].image.name` is not on the VM's node (or any allowed node)
    /// yet, or is being deleted.
    ImageNotReady,
    /// Synced=True (waiting): the ProxmoxBackup a restore names
    /// (`restore.backupRef`) does not exist or is not Ready yet.
    BackupNotReady,
    /// Synced=True (waiting): the image's template on the VM's node (or on
    /// every allowed node) is not a template yet.
    TemplateNotReady,
    /// Synced=False: waiting for a per-node slot for longer than 10 minutes.
    CapacityStalled,
    /// Synced=True: our VM runs on a node outside `node`/`allowedNodes`
    /// (moved by HA, a migration or a person); it is followed, not moved back.
    OutsidePlacement,
    /// GuestAgent=True: the guest agent answered.
    AgentResponding,
    /// GuestAgent=False: the guest agent is not enabled in the spec.
    AgentDisabled,
    /// GuestAgent=False: the VM is not running.
    VmNotRunning,
    /// GuestAgent=False: the agent is enabled but does not answer (yet).
    AgentNotResponding,
    /// Synced=False: the template's base disks are used by linked clones;
    /// Proxmox refuses to destroy it until they are gone.
    TemplateInUse,
    /// Warning=True: OVMF without an EFI disk (Proxmox uses temporary EFI
    /// variables that are lost at every start).
    NoEfiDisk,
    /// Synced=False: the spec asks for more than the VM's node or storage
    /// has (vCPUs, memory, a disk on storage that cannot overprovision), or
    /// no allowed node can take it; nothing is created.
    ExceedsNodeLimits,
    /// Synced=False: a NIC names a bridge or VNet the VM's node does not
    /// have (Proxmox would create the VM and refuse to start it).
    BridgeNotFound,
    /// Warning=True: disks larger than the free space of their thin
    /// storage, which overprovisions: the VM works until the storage fills.
    Overprovisioned,
    /// Warning=True: an annotation the provider reads is invalid (ignored)
    /// or out of range (clamped).
    InvalidAnnotation,
    /// Synced=False: the API server refused the provider a request this
    /// resource needs (403: its RBAC does not grant it), e.g. reading a
    /// Secret or ConfigMap the spec names; retried with backoff.
    Forbidden,
    /// Ready/Synced=False: a deleted ProxmoxImage is still referred to by
    /// ProxmoxVMs (or owns template VMs); it waits for them to go.
    ImageInUse,
    /// Synced=False: a ProxmoxImage's `importFrom` volume is not on a node.
    VolumeNotFound,
    /// Synced=False: a ProxmoxImage's `source.oci` needs oci-registry-pull,
    /// which Proxmox VE has since 9.1; the cluster runs an older version.
    OciNeedsPve91,
    /// Synced=False: the spec asks for what the provider config's policy
    /// does not allow (a privileged container, a root-only feature);
    /// nothing is sent.
    NotAllowed,
    /// Ready/Synced=False: being deleted, but Proxmox still holds what
    /// depends on it (a pool's members); nothing is sent until they go.
    InUse,
    /// Synced=False: Proxmox refused an access entry of the spec (a role,
    /// user, group or token that does not exist there); the message names
    /// the field. Retried at the resync interval or on a change.
    AccessRefused,
    /// Synced=False: a download Proxmox reports larger than the free space
    /// of the storage it would go to; nothing is sent.
    InsufficientStorage,
    /// Synced=False: the spec names an object of its namespace (a
    /// guest firewall rule's ProxmoxSecurityGroup or ProxmoxIPSet) that
    /// does not exist or is not Ready; nothing that depends on it is sent,
    /// and it is looked at again at the poll interval.
    ReferenceNotReady,
}

impl Reason {
    /// Whether the resource waits for something that comes by itself (a
    /// task to end, a lock to be released, an image to be downloaded, a
    /// template, a slot): `Synced` stays True with this reason, as
    /// crossplane-runtime says of a resource being created; `Synced=False`
    /// is for what needs a person. The same for every kind.
    pub fn waits(self) -> bool {
        matches!(
            self,
            Self::WaitingForTask
                | Self::ImportingDisk
                | Self::DownloadingImage
                | Self::VmLocked
                | Self::WaitingForCapacity
                | Self::WaitingForTemplate
                | Self::ImageNotReady
                | Self::BackupNotReady
                | Self::TemplateNotReady
        )
    }

    /// The `reason` string written to the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Available => "Available",
            Self::Unavailable => "Unavailable",
            Self::Creating => "Creating",
            Self::Deleting => "Deleting",
            Self::ReconcileSuccess => "ReconcileSuccess",
            Self::ReconcileError => "ReconcileError",
            Self::ReconcilePaused => "ReconcilePaused",
            Self::WaitingForTask => "WaitingForTask",
            Self::ImportingDisk => "ImportingDisk",
            Self::DownloadingImage => "DownloadingImage",
            Self::TaskFailed => "TaskFailed",
            Self::TaskTimeout => "TaskTimeout",
            Self::VmLocked => "VmLocked",
            Self::NotOwned => "NotOwned",
            Self::ProviderConfigNotFound => "ProviderConfigNotFound",
            Self::InvalidSpec => "InvalidSpec",
            Self::SecretNotFound => "SecretNotFound",
            Self::TemplateNotFound => "TemplateNotFound",
            Self::NotATemplate => "NotATemplate",
            Self::ConnectionSecretConflict => "ConnectionSecretConflict",
            Self::WaitingForCapacity => "WaitingForCapacity",
            Self::WaitingForTemplate => "WaitingForTemplate",
            Self::ImageNotFound => "ImageNotFound",
            Self::ImageHasNoTemplate => "ImageHasNoTemplate",
            Self::ImageNotReady => "ImageNotReady",
            Self::BackupNotReady => "BackupNotReady",
            Self::TemplateNotReady => "TemplateNotReady",
            Self::CapacityStalled => "CapacityStalled",
            Self::OutsidePlacement => "OutsidePlacement",
            Self::AgentResponding => "AgentResponding",
            Self::AgentDisabled => "AgentDisabled",
            Self::VmNotRunning => "VmNotRunning",
            Self::AgentNotResponding => "AgentNotResponding",
            Self::TemplateInUse => "TemplateInUse",
            Self::NoEfiDisk => "NoEfiDisk",
            Self::ExceedsNodeLimits => "ExceedsNodeLimits",
            Self::BridgeNotFound => "BridgeNotFound",
            Self::Overprovisioned => "Overprovisioned",
            Self::InvalidAnnotation => "InvalidAnnotation",
            Self::Forbidden => "Forbidden",
            Self::ImageInUse => "ImageInUse",
            Self::NotAllowed => "NotAllowed",
            Self::VolumeNotFound => "VolumeNotFound",
            Self::OciNeedsPve91 => "OciNeedsPve91",
            Self::InUse => "InUse",
            Self::AccessRefused => "AccessRefused",
            Self::InsufficientStorage => "InsufficientStorage",
            Self::ReferenceNotReady => "ReferenceNotReady",
        }
    }
}

/// One condition, in the shape Crossplane and kstatus expect.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of the condition: `Ready`, `Synced`, `GuestAgent` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// When type, status, reason or message last changed.
    pub last_transition_time: Time,
    /// Machine-readable reason (CamelCase).
    pub reason: String,
    /// What is happening, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The `metadata.generation` this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition as of `now`. [`set_condition`] keeps the previous
    /// `lastTransitionTime` when nothing but the time differs.
    pub fn new(
        type_: ConditionType,
        status: ConditionStatus,
        reason: Reason,
        message: impl Into<String>,
        now: Time,
    ) -> Self {
        let message: String = message.into();
        Self {
            type_: type_.as_str().into(),
            status,
            last_transition_time: now,
            reason: reason.as_str().into(),
            message: (!message.is_empty()).then_some(message),
            observed_generation: None,
        }
    }

    /// Ready=True, `Available`: the VM exists and is as requested.
    pub fn available(now: Time) -> Self {
        Self::new(
            ConditionType::Ready,
            ConditionStatus::True,
            Reason::Available,
            "",
            now,
        )
    }

    /// Ready=False, `Unavailable`, saying why.
    pub fn unavailable(message: impl Into<String>, now: Time) -> Self {
        Self::new(
            ConditionType::Ready,
            ConditionStatus::False,
            Reason::Unavailable,
            message,
            now,
        )
    }

    /// Ready=False, `Creating`, saying what is being done.
    pub fn creating(message: impl Into<String>, now: Time) -> Self {
        Self::new(
            ConditionType::Ready,
            ConditionStatus::False,
            Reason::Creating,
            message,
            now,
        )
    }

    /// Ready=False, `Deleting`, saying what is being done.
    pub fn deleting(message: impl Into<String>, now: Time) -> Self {
        Self::new(
            ConditionType::Ready,
            ConditionStatus::False,
            Reason::Deleting,
            message,
            now,
        )
    }

    /// Synced=True, `ReconcileSuccess`.
    pub fn reconcile_success(message: impl Into<String>, now: Time) -> Self {
        Self::new(
            ConditionType::Synced,
            ConditionStatus::True,
            Reason::ReconcileSuccess,
            message,
            now,
        )
    }

    /// Synced=False, `ReconcileError`, with the error.
    pub fn reconcile_error(message: impl Into<String>, now: Time) -> Self {
        Self::new(
            ConditionType::Synced,
            ConditionStatus::False,
            Reason::ReconcileError,
            message,
            now,
        )
    }

    /// Synced=False, `ReconcilePaused`.
    pub fn reconcile_paused(message: impl Into<String>, now: Time) -> Self {
        Self::new(
            ConditionType::Synced,
            ConditionStatus::False,
            Reason::ReconcilePaused,
            message,
            now,
        )
    }

    /// Whether this condition says the same as `other`, ignoring time and generation.
    pub fn same_as(&self, other: &Condition) -> bool {
        self.type_ == other.type_
            && self.status == other.status
            && self.reason == other.reason
            && self.message == other.message
    }

    /// Whether this condition has the given type and status.
    pub fn is(&self, type_: ConditionType, status: ConditionStatus) -> bool {
        self.type_ == type_.as_str() && self.status == status
    }
}

/// Sets `new` in `conditions`, replacing the condition of the same type.
///
/// When type, status, reason and message are unchanged the old
/// `lastTransitionTime` is kept, so writing the same status twice is a no-op
/// for the API server and does not wake the controller's watch again.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.same_as(&new) {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

/// Finds the condition of the given type.
pub fn find(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn ready(status: ConditionStatus, reason: Reason, msg: &str, now: i64) -> Condition {
        Condition::new(ConditionType::Ready, status, reason, msg, at(now))
    }

    #[test]
    fn unchanged_condition_keeps_its_transition_time() {
        let mut conds = vec![];
        set_condition(
            &mut conds,
            ready(ConditionStatus::False, Reason::Creating, "importing", 10),
        );
        set_condition(
            &mut conds,
            ready(ConditionStatus::False, Reason::Creating, "importing", 20),
        );
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].last_transition_time, at(10));
    }

    #[test]
    fn changed_message_moves_the_transition_time() {
        let mut conds = vec![ready(ConditionStatus::False, Reason::Creating, "a", 10)];
        set_condition(
            &mut conds,
            ready(ConditionStatus::False, Reason::Creating, "b", 20),
        );
        assert_eq!(conds[0].last_transition_time, at(20));
        assert_eq!(conds[0].message.as_deref(), Some("b"));
    }

    #[test]
    fn constructors_use_crossplanes_types_and_reasons() {
        let cases = [
            (
                Condition::available(at(1)),
                "Ready",
                ConditionStatus::True,
                "Available",
            ),
            (
                Condition::unavailable("x", at(1)),
                "Ready",
                ConditionStatus::False,
                "Unavailable",
            ),
            (
                Condition::creating("x", at(1)),
                "Ready",
                ConditionStatus::False,
                "Creating",
            ),
            (
                Condition::deleting("x", at(1)),
                "Ready",
                ConditionStatus::False,
                "Deleting",
            ),
            (
                Condition::reconcile_success("", at(1)),
                "Synced",
                ConditionStatus::True,
                "ReconcileSuccess",
            ),
            (
                Condition::reconcile_error("x", at(1)),
                "Synced",
                ConditionStatus::False,
                "ReconcileError",
            ),
            (
                Condition::reconcile_paused("x", at(1)),
                "Synced",
                ConditionStatus::False,
                "ReconcilePaused",
            ),
        ];
        for (c, type_, status, reason) in cases {
            assert_eq!(
                (c.type_.as_str(), c.status, c.reason.as_str()),
                (type_, status, reason)
            );
        }
    }

    #[test]
    fn other_types_are_left_alone() {
        let synced = Condition::reconcile_success("", at(5));
        let mut conds = vec![synced.clone()];
        set_condition(
            &mut conds,
            ready(ConditionStatus::True, Reason::Available, "", 6),
        );
        assert_eq!(conds.len(), 2);
        assert_eq!(conds[0], synced);
        assert!(conds[0].message.is_none(), "empty message is omitted");
    }
}
