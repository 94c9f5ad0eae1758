//! Backups on demand and restores: `POST /nodes/{node}/vzdump` (pve-manager
//! `PVE::API2::VZDump`) for one guest, the archives in a storage's `backup`
//! content, and a guest created from one (`POST /nodes/{node}/qemu` with
//! `archive`, `POST /nodes/{node}/lxc` with `ostemplate` and `restore=1`).
//! A backup is a `vzdump` task whose ID is the VMID; the guest is locked
//! (`backup`) while it runs. A restore is a `qmrestore`/`vzrestore` task;
//! `force` (restoring over an existing guest) is never sent.

use reqwest::Method;
use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;
use crate::snapshot::GuestType;
use crate::upid::Upid;

/// `mode`: how the guest is kept consistent while it is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackupMode {
    /// Read while it runs (PVE's default).
    #[default]
    Snapshot,
    Suspend,
    Stop,
}

impl BackupMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Snapshot => "snapshot",
            Self::Suspend => "suspend",
            Self::Stop => "stop",
        }
    }
}

/// `compress`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    /// `0` (PVE's default).
    #[default]
    None,
    Lzo,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "0",
            Self::Lzo => "lzo",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
        }
    }
}

/// One guest's backup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vzdump {
    pub vmid: u32,
    pub storage: String,
    pub mode: BackupMode,
    pub compress: Compression,
    /// `notes-template` (`{{guestname}}`, `{{node}}`, `{{vmid}}`, `{{cluster}}`).
    pub notes_template: Option<String>,
    pub protected: bool,
}

impl Vzdump {
    fn to_params(&self) -> Params {
        Params::new()
            .text("vmid", self.vmid)
            .text("storage", &self.storage)
            .text("mode", self.mode.as_str())
            .text("compress", self.compress.as_str())
            .opt("notes-template", self.notes_template.as_deref())
            .opt_flag("protected", self.protected.then_some(true))
            // An archive on demand never prunes the guest's others.
            .flag("remove", false)
    }
}

/// A backup archive in a storage's `backup` content.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct BackupVolume {
    /// `local:backup/vzdump-qemu-100-2026_01_01-00_00_00.vma.zst`.
    pub volid: String,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub vmid: Option<u64>,
    /// UNIX seconds.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub ctime: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub size: Option<u64>,
    /// `vma.zst`, `tar.gz`, ...
    #[serde(default)]
    pub format: Option<String>,
    /// `qemu` or `lxc`.
    #[serde(default)]
    pub subtype: Option<String>,
    /// The first line of the notes.
    #[serde(default)]
    pub notes: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub protected: Option<bool>,
}

impl BackupVolume {
    /// The storage the archive is on.
    pub fn storage(&self) -> &str {
        self.volid.split_once(':').map_or("", |(s, _)| s)
    }
}

/// The guest type and VMID a vzdump archive's name carries
/// (`backup/vzdump-<qemu|lxc>-<vmid>-<YYYY_MM_DD-HH_MM_SS>.<ext>`), as
/// pve-storage's `archive_info` reads it.
pub fn parse_backup_name(volid: &str) -> Option<(GuestType, u32)> {
    let file = volid.rsplit('/').next()?;
    let rest = file.strip_prefix("vzdump-")?;
    let (kind, rest) = rest.split_once('-')?;
    let kind = match kind {
        "qemu" => GuestType::Qemu,
        "lxc" | "openvz" => GuestType::Lxc,
        _ => return None,
    };
    let (vmid, stamp) = rest.split_once('-')?;
    let digits = stamp.split('.').next()?;
    (digits.len() == 19).then_some(())?;
    Some((kind, vmid.parse().ok()?))
}

/// The backup job a `vzdump` task ran for, from its log's first line:
/// `PVE::VZDump::exec_backup` logs the command line, which names the job
/// (`INFO: starting new backup job: vzdump 100 101 --job-id ID ...`) when
/// the scheduler ran it. `None`: another line, or a backup of no job.
pub fn vzdump_job_id(first_line: &str) -> Option<&str> {
    let command = first_line.strip_prefix("INFO: starting new backup job: ")?;
    let mut words = command.split_whitespace();
    words.find(|w| *w == "--job-id")?;
    words.next()
}

/// A guest made from an archive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restore {
    pub vmid: u32,
    /// The archive's volume ID.
    pub archive: String,
    /// Where its disks go (else where they were).
    pub storage: Option<String>,
    pub pool: Option<String>,
    /// New MAC addresses (and, for a VM, SMBIOS UUID).
    pub unique: bool,
    /// A VM's `name`, set over the archived config (qemu-server applies a
    /// restore call's options but drives over it).
    pub name: Option<String>,
    /// The guest's `description`, set over the archived config.
    pub description: Option<String>,
    /// A container's `hostname`, set over the archived config
    /// (pve-container merges the archived config under the call's options).
    pub hostname: Option<String>,
    /// A container's `unprivileged`; left out, the archive's.
    pub unprivileged: Option<bool>,
}

impl Client {
    /// `POST /nodes/{node}/vzdump` for one guest; returns the `vzdump` task.
    pub async fn vzdump(&self, node: &str, dump: &Vzdump) -> Result<Upid> {
        self.start_task(
            Method::POST,
            ApiPath::new("/nodes/{node}/vzdump", &[node]),
            dump.to_params(),
        )
        .await
    }

    /// The archives on `storage` (of one guest with `vmid`).
    pub async fn backups(
        &self,
        node: &str,
        storage: &str,
        vmid: Option<u32>,
    ) -> Result<Vec<BackupVolume>> {
        self.get(
            ApiPath::new("/nodes/{node}/storage/{storage}/content", &[node, storage]),
            Params::new().text("content", "backup").opt("vmid", vmid),
        )
        .await
    }

    /// `PUT .../content/{volume}`: a backup's protection, at once.
    pub async fn set_backup_protected(
        &self,
        node: &str,
        volid: &str,
        protected: bool,
    ) -> Result<()> {
        let storage = volid.split_once(':').map_or("", |(s, _)| s);
        let path = ApiPath::new(
            "/nodes/{node}/storage/{storage}/content/{volume}",
            &[node, storage, volid],
        );
        self.write_null(
            Method::PUT,
            path,
            Params::new().flag("protected", protected),
        )
        .await
    }

    /// A VM from an archive (`POST /nodes/{node}/qemu` with `archive`);
    /// returns the `qmrestore` task.
    pub async fn restore_vm(&self, node: &str, restore: &Restore) -> Result<Upid> {
        let params = Params::new()
            .text("vmid", restore.vmid)
            .text("archive", &restore.archive)
            .opt("storage", restore.storage.as_deref())
            .opt("pool", restore.pool.as_deref())
            .opt_flag("unique", restore.unique.then_some(true))
            .opt("name", restore.name.as_deref())
            .opt("description", restore.description.as_deref());
        self.start_task(
            Method::POST,
            ApiPath::new("/nodes/{node}/qemu", &[node]),
            params,
        )
        .await
    }

    /// A container from an archive (`POST /nodes/{node}/lxc` with
    /// `ostemplate` and `restore=1`); returns the `vzrestore` task.
    pub async fn restore_container(&self, node: &str, restore: &Restore) -> Result<Upid> {
        let params = Params::new()
            .text("vmid", restore.vmid)
            .text("ostemplate", &restore.archive)
            .flag("restore", true)
            .opt("storage", restore.storage.as_deref())
            .opt("pool", restore.pool.as_deref())
            .opt_flag("unique", restore.unique.then_some(true))
            .opt("hostname", restore.hostname.as_deref())
            .opt("description", restore.description.as_deref())
            .opt_flag("unprivileged", restore.unprivileged);
        self.start_task(
            Method::POST,
            ApiPath::new("/nodes/{node}/lxc", &[node]),
            params,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheduled_runs_log_names_its_job() {
        let line = "INFO: starting new backup job: vzdump 100 101 --job-id backup-a1 --storage local --mode snapshot";
        assert_eq!(vzdump_job_id(line), Some("backup-a1"));
        let by_hand = "INFO: starting new backup job: vzdump 100 --storage local";
        assert_eq!(vzdump_job_id(by_hand), None);
        assert_eq!(
            vzdump_job_id("INFO: Starting Backup of VM 100 (qemu)"),
            None
        );
    }

    #[test]
    fn archive_names_read_as_pve_storage_reads_them() {
        assert_eq!(
            parse_backup_name("local:backup/vzdump-qemu-100-2026_01_02-03_04_05.vma.zst"),
            Some((GuestType::Qemu, 100))
        );
        assert_eq!(
            parse_backup_name("nfs:backup/vzdump-lxc-201-2026_01_02-03_04_05.tar"),
            Some((GuestType::Lxc, 201))
        );
        assert_eq!(parse_backup_name("local:iso/x.iso"), None);
        assert_eq!(
            parse_backup_name("local:backup/vzdump-qemu-x-2026.vma"),
            None
        );
    }

    #[test]
    fn a_backup_never_prunes_and_sends_what_is_set() {
        let dump = Vzdump {
            vmid: 100,
            storage: "local".into(),
            compress: Compression::Zstd,
            notes_template: Some("{{guestname}}".into()),
            ..Vzdump::default()
        };
        let p = dump.to_params();
        assert_eq!(p.get("remove"), Some("0"));
        assert_eq!(p.get("mode"), Some("snapshot"));
        assert_eq!(p.get("compress"), Some("zstd"));
        assert_eq!(p.get("protected"), None);
        assert_eq!(p.get("notes-template"), Some("{{guestname}}"));
    }

    #[test]
    fn a_listed_backup_reads_as_pve_lists_it() {
        let b: BackupVolume = serde_json::from_value(serde_json::json!({
            "volid": "local:backup/vzdump-qemu-100-2026_01_02-03_04_05.vma.zst",
            "content": "backup", "format": "vma.zst", "subtype": "qemu",
            "vmid": 100, "ctime": 1_700_000_000, "size": 1234, "protected": 1, "notes": "web",
        }))
        .unwrap();
        assert_eq!(b.storage(), "local");
        assert_eq!(b.protected, Some(true));
        assert_eq!(b.vmid, Some(100));
    }
}
