//! `ProxmoxBackupJob`: a scheduled vzdump job (`/cluster/backup`) whose
//! guests are chosen by a label selector over the namespace's ProxmoxVMs
//! and ProxmoxContainers, or by a ProxmoxPool of the namespace.
//!
//! Cluster-wide on Proxmox: the job's ID is derived from this resource's
//! name and a hash of its namespace and name (`status.atProvider.id`), and
//! its comment carries the owner marker, so two teams' jobs never share
//! one and a job someone else made is never changed or deleted.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::managed::{ManagedSpec, ManagedStatus};
use crate::api::meta::ProviderConfigReference;
use crate::api::rules::{
    NO_CONTROL, NO_CONTROL_MESSAGE, NODE_NAME, NODE_NAME_MESSAGE, STORAGE_ID, STORAGE_ID_MESSAGE,
};

/// A scheduled Proxmox VE backup job.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxBackupJob",
    plural = "proxmoxbackupjobs",
    singular = "proxmoxbackupjob",
    namespaced,
    status = "ProxmoxBackupJobStatus",
    derive = "PartialEq",
    shortname = "pbackup",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A Proxmox VE scheduled backup job managed by crossplane-provider-proxmox.",
    printcolumn(name = "JOB", type_ = "string", json_path = ".status.atProvider.id"),
    printcolumn(
        name = "SCHEDULE",
        type_ = "string",
        json_path = ".spec.forProvider.schedule"
    ),
    printcolumn(
        name = "NEXT-RUN",
        type_ = "string",
        json_path = ".status.atProvider.nextRun"
    ),
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
pub struct ProxmoxBackupJobSpec {
    /// The job as it should be on Proxmox.
    pub for_provider: BackupJobParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}

/// The job's schedule, target, options and guests.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.guestSelector) != has(self.pool)")
        .message("exactly one of guestSelector and pool must be set"),
    validation = Rule::new("!has(self.notesTemplate) || has(self.storage)")
        .message("notesTemplate needs storage (Proxmox refuses it without one)"),
    validation = Rule::new("!has(self.protected) || has(self.storage)")
        .message("protected needs storage (Proxmox refuses it without one)")
)]
pub struct BackupJobParameters {
    /// When the job runs: a Proxmox calendar event (a subset of systemd's),
    /// e.g. `daily`, `weekly`, `sat`, `mon..fri 02:00`, `*-*-* 03:30`,
    /// `*/15`. What is clearly not one is refused here; what Proxmox
    /// refuses (e.g. `25:00`) is said in the Synced condition, naming this
    /// field, and nothing is created.
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(
        validation = Rule::new("self.matches('^[A-Za-z0-9*,./:~ -]+$') && self.matches('[^ ]')")
            .message("schedule must be a calendar event such as daily, sat, mon..fri 02:00 or *-*-* 03:30")
    )]
    pub schedule: String,

    /// The storage the archives go to (a backup-capable storage, e.g. a
    /// Proxmox Backup Server one). Unset: the node's default (`local`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: Option<String>,

    /// How a running guest is backed up. Unset: Proxmox's default,
    /// `snapshot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<BackupMode>,

    /// The archive compression: `0` (none), `1` (lzo), `gzip`, `lzo` or
    /// `zstd`. Unset: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compress: Option<Compression>,

    /// How many archives the job keeps (`prune-backups`), instead of the
    /// storage's retention. Unset (or no keep option): the storage's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune_backups: Option<Retention>,

    /// The notes each archive gets; `{{guestname}}`, `{{node}}`, `{{vmid}}`
    /// and `{{cluster}}` are replaced. Needs `storage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub notes_template: Option<String>,

    /// Whether the job runs on its schedule.
    #[serde(default = "enabled")]
    pub enabled: bool,

    /// Mark the archives protected (never pruned). Needs `storage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected: Option<bool>,

    /// Run only on this node. Unset: every node backs up its guests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(NODE_NAME).message(NODE_NAME_MESSAGE))]
    pub node: Option<String>,

    /// A note beside the job on Proxmox (one line), after the provider's
    /// owner marker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 300))]
    #[x_kube(validation = Rule::new(NO_CONTROL).message(NO_CONTROL_MESSAGE))]
    pub comment: Option<String>,

    /// The guests: the ProxmoxVMs and ProxmoxContainers of THIS namespace
    /// whose labels match, by their VMIDs, kept in step as guests come,
    /// go or change labels. A guest without a VMID yet is added once it
    /// has one. No guest matched: no job on Proxmox (Proxmox needs at
    /// least one), Ready False saying so. Exactly one of this and `pool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_selector: Option<BackupGuestSelector>,

    /// The guests: every member of this ProxmoxPool of the namespace (by
    /// its Kubernetes name), as Proxmox counts them when the job runs.
    /// Exactly one of this and `guestSelector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub pool: Option<String>,
}

fn enabled() -> bool {
    true
}

/// Which guests of the namespace a job backs up.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BackupGuestSelector {
    /// Labels a guest must all have, with these values (`{}` selects
    /// every guest of the namespace).
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub match_labels: BTreeMap<String, String>,
}

/// vzdump's `mode`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BackupMode {
    Snapshot,
    Suspend,
    Stop,
}

impl BackupMode {
    /// As Proxmox writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Snapshot => "snapshot",
            Self::Suspend => "suspend",
            Self::Stop => "stop",
        }
    }
}

/// vzdump's `compress`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    #[serde(rename = "0")]
    None,
    #[serde(rename = "1")]
    Default,
    #[serde(rename = "gzip")]
    Gzip,
    #[serde(rename = "lzo")]
    Lzo,
    #[serde(rename = "zstd")]
    Zstd,
}

impl Compression {
    /// As Proxmox writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "0",
            Self::Default => "1",
            Self::Gzip => "gzip",
            Self::Lzo => "lzo",
            Self::Zstd => "zstd",
        }
    }
}

/// `prune-backups`: how many archives of each kind are kept.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.keepAll) || !self.keepAll || (!has(self.keepLast) && !has(self.keepHourly) && !has(self.keepDaily) && !has(self.keepWeekly) && !has(self.keepMonthly) && !has(self.keepYearly))")
        .message("keepAll cannot be set together with the other keep options")
)]
pub struct Retention {
    /// Keep every archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_all: Option<bool>,
    /// Keep the last N archives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_last: Option<u32>,
    /// Keep the last archive of each of the last N hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_hourly: Option<u32>,
    /// Keep the last archive of each of the last N days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_daily: Option<u32>,
    /// Keep the last archive of each of the last N weeks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_weekly: Option<u32>,
    /// Keep the last archive of each of the last N months.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_monthly: Option<u32>,
    /// Keep the last archive of each of the last N years.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_yearly: Option<u32>,
}

impl Retention {
    /// As Proxmox keeps it: `keep-<what>` → N (`keep-all` → 1).
    pub fn keep(&self) -> BTreeMap<String, u64> {
        let all = self.keep_all.map(u32::from);
        [
            ("keep-all", all),
            ("keep-last", self.keep_last),
            ("keep-hourly", self.keep_hourly),
            ("keep-daily", self.keep_daily),
            ("keep-weekly", self.keep_weekly),
            ("keep-monthly", self.keep_monthly),
            ("keep-yearly", self.keep_yearly),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), u64::from(v?))))
        .collect()
    }
}

/// Observed state of a ProxmoxBackupJob.
pub type ProxmoxBackupJobStatus = ManagedStatus<BackupJobAtProvider>;

/// The job on Proxmox.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupJobAtProvider {
    /// The job's Proxmox ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The guests the job covers now (with `guestSelector`: those it
    /// selects that have a VMID; with `pool`: the pool's members).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guests: Vec<BackupGuest>,
    /// When Proxmox runs the job next (RFC 3339, from the job listing's
    /// `next-run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run: Option<String>,
    /// The job's last run that ended, from the cluster's task list: the
    /// `vzdump` task the scheduler started for it (on one node of each
    /// node it ran on; the newest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<BackupJobRun>,
}

/// One ended run of a backup job: a `vzdump` task.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupJobRun {
    /// The task's UPID.
    pub upid: String,
    /// The node it ran on.
    pub node: String,
    /// When it started (seconds since the epoch, the UPID's).
    pub start_time: i64,
    /// When it ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// Its exit status as Proxmox shows it: `OK`, `WARNINGS: n`, or the
    /// error (`job errors` when a guest's backup failed).
    pub status: String,
    /// Whether it succeeded (`OK` or warnings).
    pub succeeded: bool,
}

/// A guest a job covers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupGuest {
    /// Its resource's name (or its Proxmox name, for a pool member).
    pub name: String,
    /// `ProxmoxVM` or `ProxmoxContainer` (`qemu`/`lxc` for a pool member).
    pub kind: String,
    /// Its VMID.
    pub vmid: u32,
}

impl crate::api::meta::ConfigUser for ProxmoxBackupJob {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

#[cfg(test)]
mod tests;
