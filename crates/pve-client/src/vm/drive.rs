//! Drive strings (`pve-qm-ide`, `pve-qm-scsi`, ... with allocation): what a
//! create or update sends and what the config shows afterwards.
//!
//! Sent: `local-lvm:0,import-from=local:import/jammy.qcow2` (import an
//! image into a new volume), `local-lvm:32` (a new 32 GiB volume),
//! `local-lvm:cloudinit` (the cloud-init drive), `none,media=cdrom`.
//! Shown: `local-lvm:vm-100-disk-0,size=20G`,
//! `local-lvm:vm-100-cloudinit,media=cdrom`, `/dev/sdb`.
//!
//! Disk import uses only the `import-from` drive option (PVE ≥ 7.2), with
//! sources placed by `download-url` (`content=import`, PVE ≥ 8.4). There is
//! no REST `importdisk` endpoint: `qm importdisk` is a CLI command, and the
//! old provider's `POST .../importdisk` got a 501. PVE does not show
//! `import-from` in the config afterwards.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::vm::propstring::{self, Format};
use crate::vm::size::{format_size, parse_size};
use crate::vm::value::{InvalidValue, is_storage_id};

const FORMAT: Format = Format {
    what: "drive",
    default_key: Some("file"),
    aliases: &[("volume", "file")],
};

/// What backs a drive (its `file`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveFile {
    /// `none`: an empty CD-ROM drive.
    None,
    /// `cdrom`: the host's physical drive.
    HostCdrom,
    /// An absolute path (`/dev/sdb`).
    Path(String),
    /// `storage:N`: allocate a new N GiB volume (`N` is 0 with
    /// `import-from`). PVE's fractional form `storage:1.5` is not read.
    Alloc { storage: String, gib: u64 },
    /// `storage:cloudinit`: allocate the cloud-init drive.
    AllocCloudInit { storage: String },
    /// An existing volume: `storage:volname`.
    Volume { storage: String, name: String },
}

impl DriveFile {
    /// The storage, for anything on one.
    pub fn storage(&self) -> Option<&str> {
        match self {
            DriveFile::Alloc { storage, .. }
            | DriveFile::AllocCloudInit { storage }
            | DriveFile::Volume { storage, .. } => Some(storage),
            DriveFile::None | DriveFile::HostCdrom | DriveFile::Path(_) => None,
        }
    }
}

impl FromStr for DriveFile {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| InvalidValue::new("drive file", s, reason);
        match s {
            "none" => return Ok(DriveFile::None),
            "cdrom" => return Ok(DriveFile::HostCdrom),
            _ if s.starts_with('/') => return Ok(DriveFile::Path(s.to_owned())),
            _ => {}
        }
        let (storage, name) = s
            .split_once(':')
            .ok_or_else(|| err("not storage:volume, an absolute path, none or cdrom"))?;
        if !is_storage_id(storage) || name.is_empty() {
            return Err(err("not storage:volume"));
        }
        let storage = storage.to_owned();
        if name == "cloudinit" {
            return Ok(DriveFile::AllocCloudInit { storage });
        }
        let (whole, fraction) = name.split_once('.').unwrap_or((name, ""));
        let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
        if !whole.is_empty() && digits(whole) && digits(fraction) {
            if !fraction.is_empty() || name.ends_with('.') {
                return Err(err("fractional GiB are not read"));
            }
            let gib = whole.parse().map_err(|_| err("GiB out of range"))?;
            return Ok(DriveFile::Alloc { storage, gib });
        }
        Ok(DriveFile::Volume {
            storage,
            name: name.to_owned(),
        })
    }
}

impl fmt::Display for DriveFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriveFile::None => f.write_str("none"),
            DriveFile::HostCdrom => f.write_str("cdrom"),
            DriveFile::Path(p) => f.write_str(p),
            DriveFile::Alloc { storage, gib } => write!(f, "{storage}:{gib}"),
            DriveFile::AllocCloudInit { storage } => write!(f, "{storage}:cloudinit"),
            DriveFile::Volume { storage, name } => write!(f, "{storage}:{name}"),
        }
    }
}

/// `media=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Media {
    Disk,
    Cdrom,
}

impl Media {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "disk" => Some(Media::Disk),
            "cdrom" => Some(Media::Cdrom),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Media::Disk => "disk",
            Media::Cdrom => "cdrom",
        }
    }
}

/// A drive: its volume and options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drive {
    pub file: DriveFile,
    /// `media=` (PVE's default is `disk`).
    pub media: Option<Media>,
    /// `size=`, in bytes (informational; PVE fills it in).
    pub size: Option<u64>,
    /// `import-from=`: a volume ID or absolute path to copy into a new
    /// volume (create/update only; never shown in the config).
    pub import_from: Option<String>,
    /// Every other option (`ssd`, `discard`, `iothread`, `cache`, ...), as
    /// written.
    pub options: BTreeMap<String, String>,
}

impl Drive {
    /// A drive backed by `file`, without options.
    pub fn new(file: DriveFile) -> Self {
        Self {
            file,
            media: None,
            size: None,
            import_from: None,
            options: BTreeMap::new(),
        }
    }

    /// `<storage>:0,import-from=<source>`: a new volume holding a copy of
    /// `source` (e.g. `local:import/jammy.qcow2`), with the source's virtual
    /// size; grow it with a resize afterwards.
    pub fn import(storage: &str, source: &str) -> Self {
        Self {
            import_from: Some(source.to_owned()),
            ..Self::new(DriveFile::Alloc {
                storage: storage.to_owned(),
                gib: 0,
            })
        }
    }

    /// `<storage>:<gib>`: a new empty volume.
    pub fn alloc(storage: &str, gib: u64) -> Self {
        Self::new(DriveFile::Alloc {
            storage: storage.to_owned(),
            gib,
        })
    }

    /// `<storage>:cloudinit`: the cloud-init drive.
    pub fn cloud_init(storage: &str) -> Self {
        Self::new(DriveFile::AllocCloudInit {
            storage: storage.to_owned(),
        })
    }

    /// `<volume>,media=cdrom`, or `none,media=cdrom` for an empty drive.
    pub fn cdrom(volume: Option<DriveFile>) -> Self {
        Self {
            media: Some(Media::Cdrom),
            ..Self::new(volume.unwrap_or(DriveFile::None))
        }
    }

    /// Parses a drive string.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        s.parse()
    }

    /// The storage the drive is (or will be) on.
    pub fn storage(&self) -> Option<&str> {
        self.file.storage()
    }

    /// A CD-ROM drive (cloud-init drives included).
    pub fn is_cdrom(&self) -> bool {
        self.media == Some(Media::Cdrom)
    }

    /// The cloud-init drive, as qemu-server's `drive_is_cloudinit` tells:
    /// a volume named `cloudinit`, `vm-<id>-cloudinit`, with an optional
    /// image format extension.
    pub fn is_cloudinit(&self) -> bool {
        let name = match &self.file {
            DriveFile::AllocCloudInit { .. } => return true,
            DriveFile::Volume { name, .. } => name.rsplit('/').next().unwrap_or(name),
            DriveFile::Path(path) => path.rsplit('/').next().unwrap_or(path),
            DriveFile::None | DriveFile::HostCdrom | DriveFile::Alloc { .. } => return false,
        };
        let stem = ["raw", "qcow", "qcow2", "qed", "vmdk", "cloop"]
            .iter()
            .find_map(|ext| name.strip_suffix(ext)?.strip_suffix('.'))
            .unwrap_or(name);
        let Some(vm) = stem.strip_suffix("cloudinit") else {
            return false;
        };
        vm.is_empty()
            || vm
                .strip_prefix("vm-")
                .and_then(|id| id.strip_suffix('-'))
                .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
    }
}

/// `import-from`'s format: a volume ID or an absolute path.
fn is_import_source(s: &str) -> bool {
    s.starts_with('/')
        || s.split_once(':')
            .is_some_and(|(storage, name)| is_storage_id(storage) && !name.is_empty())
}

impl FromStr for Drive {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = FORMAT.parse(s)?;
        let err = |reason: String| InvalidValue::new("drive", s, reason);
        let file = p
            .default
            .take()
            .ok_or_else(|| err("no volume".into()))?
            .parse()
            .map_err(|e: InvalidValue| err(e.reason))?;
        let media = p.take_with("media", Media::parse).map_err(err)?;
        let size = p.take_with("size", parse_size).map_err(err)?;
        let import_from = p
            .take_with("import-from", |v| is_import_source(v).then(|| v.to_owned()))
            .map_err(err)?;
        Ok(Self {
            file,
            media,
            size,
            import_from,
            options: p.pairs,
        })
    }
}

impl fmt::Display for Drive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pairs = self.options.clone();
        if let Some(media) = self.media {
            pairs.insert("media".into(), media.as_str().into());
        }
        if let Some(size) = self.size {
            pairs.insert("size".into(), format_size(size));
        }
        if let Some(source) = &self.import_from {
            pairs.insert("import-from".into(), source.clone());
        }
        f.write_str(&propstring::render(Some(&self.file.to_string()), &pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_pve_shows() {
        let d = Drive::parse("local-lvm:vm-100-disk-0,size=3584M,ssd=1").unwrap();
        assert_eq!(d.storage(), Some("local-lvm"));
        assert_eq!(
            d.file,
            DriveFile::Volume {
                storage: "local-lvm".into(),
                name: "vm-100-disk-0".into()
            }
        );
        assert_eq!(d.size, Some(3584 << 20));
        assert_eq!(d.options["ssd"], "1");
        assert!(!d.is_cdrom() && !d.is_cloudinit());

        let ci = Drive::parse("local-lvm:vm-100-cloudinit,media=cdrom").unwrap();
        assert!(ci.is_cdrom() && ci.is_cloudinit());
        let dir = Drive::parse("local:100/vm-100-cloudinit.qcow2,media=cdrom").unwrap();
        assert!(dir.is_cloudinit());
        assert!(
            !Drive::parse("local:iso/not-cloudinit.iso")
                .unwrap()
                .is_cloudinit()
        );
        assert!(!Drive::parse("local:vm-x-cloudinit").unwrap().is_cloudinit());

        let empty = Drive::parse("none,media=cdrom").unwrap();
        assert_eq!(
            (empty.file.clone(), empty.storage()),
            (DriveFile::None, None)
        );
        assert!(empty.is_cdrom());

        let dev = Drive::parse("/dev/disk/by-id/ata-X,backup=0").unwrap();
        assert_eq!(dev.file, DriveFile::Path("/dev/disk/by-id/ata-X".into()));

        let named = Drive::parse(" volume=local:iso/x.iso , media=cdrom,size=4M").unwrap();
        assert_eq!(named.storage(), Some("local"));
        assert_eq!(named.size, Some(4 << 20));
    }

    #[test]
    fn refuses_what_pve_refuses() {
        for bad in [
            "",
            "size=4G",
            "vm-100-disk-0",
            "1local:x",
            "local-lvm:",
            "local-lvm:1.5",
            "local-lvm:vm-1,media=floppy",
            "local-lvm:vm-1,size=big",
            "local-lvm:0,import-from=jammy.qcow2",
            "local-lvm:vm-1,file=local-lvm:vm-2",
        ] {
            assert!(Drive::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn writes_as_pve_prints() {
        for s in [
            "local-lvm:vm-100-disk-0,size=3584M,ssd=1",
            "none,media=cdrom",
            "local-lvm:vm-100-cloudinit,media=cdrom",
            "local:100/vm-100-disk-0.qcow2,discard=on,iothread=1,size=32G",
            "cdrom,media=cdrom",
        ] {
            assert_eq!(Drive::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn what_a_create_sends() {
        let mut import = Drive::import("local-lvm", "local:import/jammy.qcow2");
        assert_eq!(
            import.to_string(),
            "local-lvm:0,import-from=local:import/jammy.qcow2"
        );
        import.options.insert("ssd".into(), "1".into());
        import.options.insert("discard".into(), "on".into());
        assert_eq!(
            import.to_string(),
            "local-lvm:0,discard=on,import-from=local:import/jammy.qcow2,ssd=1"
        );
        assert_eq!(Drive::parse(&import.to_string()), Ok(import));
        assert_eq!(Drive::alloc("local-lvm", 32).to_string(), "local-lvm:32");
        let ci = Drive::cloud_init("local-lvm");
        assert_eq!(ci.to_string(), "local-lvm:cloudinit");
        assert!(ci.is_cloudinit());
        assert_eq!(Drive::cdrom(None).to_string(), "none,media=cdrom");
        let iso = "local:iso/x.iso".parse().ok();
        assert_eq!(Drive::cdrom(iso).to_string(), "local:iso/x.iso,media=cdrom");
    }
}
