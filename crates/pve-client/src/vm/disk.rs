//! Disk entries of a VM config (`scsi0`, `virtio1`, `ide2`, `efidisk0`,
//! `unused0`, ...), and disk specifications for create/update.
//!
//! Disk import uses only the `import-from` drive option (PVE ≥ 7.2), with
//! sources placed by `download-url` (`content=import`, PVE ≥ 8.4). There is
//! no REST `importdisk` endpoint: `qm importdisk` is a CLI command, and the
//! old provider's `POST .../importdisk` got a 501. PVE does not echo
//! `import-from` back in the config, so it never takes part in comparisons.

use std::collections::BTreeMap;
use std::fmt;

use crate::vm::propstring;
use crate::vm::size::{format_size, parse_size};

/// Whether a config key names a drive or an unused volume.
pub fn is_disk_key(key: &str) -> bool {
    let numbered = |prefix: &str| {
        key.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    ["ide", "sata", "scsi", "virtio", "unused"]
        .iter()
        .any(|p| numbered(p))
        || key == "efidisk0"
        || key == "tpmstate0"
}

/// A drive as the config shows it:
/// `local-lvm:vm-100-disk-0,size=3584M,ssd=1`, `none,media=cdrom`,
/// `local-lvm:vm-100-cloudinit,media=cdrom`, `/dev/sdb`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disk {
    /// The volume (`storage:volname`), a path, `none` or `cdrom`.
    pub file: String,
    /// Storage id, when `file` is a PVE volume.
    pub storage: Option<String>,
    /// Volume name within the storage.
    pub volume: Option<String>,
    /// `size=`, in bytes.
    pub size: Option<u64>,
    /// `media=` (`disk` or `cdrom`).
    pub media: Option<String>,
    /// Every other option, by key.
    pub options: BTreeMap<String, String>,
}

impl Disk {
    /// Parses a drive string. Never fails: an odd value keeps its text in
    /// `file` and options.
    pub fn parse(s: &str) -> Self {
        let (bare, pairs) = propstring::split(s);
        let mut file = bare.unwrap_or_default();
        let mut size = None;
        let mut media = None;
        let mut options = BTreeMap::new();
        for (k, v) in pairs {
            match k.as_str() {
                "file" | "volume" if file.is_empty() => file = v,
                "size" => size = parse_size(&v),
                "media" => media = Some(v),
                _ => {
                    options.insert(k, v);
                }
            }
        }
        let (storage, volume) = match file.split_once(':') {
            Some((s, v)) if !file.starts_with('/') && !s.is_empty() => {
                (Some(s.to_owned()), Some(v.to_owned()))
            }
            _ => (None, None),
        };
        Self {
            file,
            storage,
            volume,
            size,
            media,
            options,
        }
    }

    /// A CD-ROM drive (cloud-init drives included).
    pub fn is_cdrom(&self) -> bool {
        self.media.as_deref() == Some("cdrom")
    }

    /// The cloud-init drive (`vm-<id>-cloudinit`, or `storage:cloudinit` in a
    /// pending create).
    pub fn is_cloudinit(&self) -> bool {
        self.volume
            .as_deref()
            .is_some_and(|v| v.contains("cloudinit"))
    }
}

impl fmt::Display for Disk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ordered = Vec::new();
        if let Some(media) = &self.media {
            ordered.push(("media", media.clone()));
        }
        if let Some(size) = self.size {
            ordered.push(("size", format_size(size)));
        }
        f.write_str(&propstring::join(Some(&self.file), &ordered, &self.options))
    }
}

/// A drive to create or attach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskSpec {
    /// `<storage>:0,import-from=<source>`: copy an image (e.g.
    /// `local:import/jammy.qcow2`) into a new volume. The new disk gets the
    /// source's virtual size; grow it with a resize afterwards.
    Import {
        storage: String,
        source: String,
        options: BTreeMap<String, String>,
    },
    /// `<storage>:<GiB>`: a new empty volume.
    New {
        storage: String,
        size_gib: u64,
        options: BTreeMap<String, String>,
    },
    /// `<storage>:cloudinit`: the cloud-init drive.
    CloudInit { storage: String },
    /// `<volume or none>,media=cdrom`.
    Cdrom { volume: Option<String> },
    /// A drive string passed as is.
    Raw(String),
}

impl fmt::Display for DiskSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiskSpec::Import {
                storage,
                source,
                options,
            } => {
                // The size must be exactly 0 with import-from.
                let first = format!("{storage}:0");
                let ordered = [("import-from", source.clone())];
                f.write_str(&propstring::join(Some(&first), &ordered, options))
            }
            DiskSpec::New {
                storage,
                size_gib,
                options,
            } => {
                let first = format!("{storage}:{size_gib}");
                f.write_str(&propstring::join(Some(&first), &[], options))
            }
            DiskSpec::CloudInit { storage } => write!(f, "{storage}:cloudinit"),
            DiskSpec::Cdrom { volume } => {
                write!(f, "{},media=cdrom", volume.as_deref().unwrap_or("none"))
            }
            DiskSpec::Raw(s) => f.write_str(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_keys() {
        for k in [
            "scsi0",
            "scsi30",
            "virtio15",
            "ide2",
            "sata5",
            "efidisk0",
            "tpmstate0",
            "unused3",
        ] {
            assert!(is_disk_key(k), "{k}");
        }
        for k in [
            "scsi",
            "scsihw",
            "net0",
            "ipconfig0",
            "virtio",
            "efidisk1",
            "idex",
        ] {
            assert!(!is_disk_key(k), "{k}");
        }
    }

    #[test]
    fn parse_table() {
        let d = Disk::parse("local-lvm:vm-100-disk-0,size=3584M,ssd=1");
        assert_eq!(d.storage.as_deref(), Some("local-lvm"));
        assert_eq!(d.volume.as_deref(), Some("vm-100-disk-0"));
        assert_eq!(d.size, Some(3584 << 20));
        assert_eq!(d.options.get("ssd").map(String::as_str), Some("1"));
        assert!(!d.is_cdrom());

        let ci = Disk::parse("local-lvm:vm-100-cloudinit,media=cdrom");
        assert!(ci.is_cdrom() && ci.is_cloudinit());

        let empty = Disk::parse("none,media=cdrom");
        assert_eq!(empty.file, "none");
        assert!(empty.storage.is_none() && empty.is_cdrom());

        let dev = Disk::parse("/dev/disk/by-id/ata-X,backup=0");
        assert!(dev.storage.is_none());
        assert_eq!(dev.file, "/dev/disk/by-id/ata-X");

        let explicit = Disk::parse(" file=local:iso/x.iso , media=cdrom,size=  4M");
        assert_eq!(explicit.storage.as_deref(), Some("local"));
        assert_eq!(explicit.volume.as_deref(), Some("iso/x.iso"));
        assert_eq!(explicit.size, Some(4 << 20));

        let dir = Disk::parse("local:100/vm-100-disk-0.qcow2,discard=on,iothread=1,size=32G");
        assert_eq!(dir.volume.as_deref(), Some("100/vm-100-disk-0.qcow2"));
        assert_eq!(dir.options.len(), 2);
    }

    #[test]
    fn round_trips() {
        for s in [
            "local-lvm:vm-100-disk-0,size=3584M,ssd=1",
            "none,media=cdrom",
            "local-lvm:vm-100-cloudinit,media=cdrom",
            "local:100/vm-100-disk-0.qcow2,discard=on,iothread=1,size=32G",
        ] {
            let d = Disk::parse(s);
            assert_eq!(Disk::parse(&d.to_string()), d, "{s}");
        }
    }

    #[test]
    fn specs_encode_as_pve_expects() {
        let import = DiskSpec::Import {
            storage: "local-lvm".into(),
            source: "local:import/jammy.qcow2".into(),
            options: [
                ("ssd".to_owned(), "1".to_owned()),
                ("discard".to_owned(), "on".to_owned()),
            ]
            .into_iter()
            .collect(),
        };
        assert_eq!(
            import.to_string(),
            "local-lvm:0,import-from=local:import/jammy.qcow2,discard=on,ssd=1"
        );
        let new = DiskSpec::New {
            storage: "local-lvm".into(),
            size_gib: 32,
            options: BTreeMap::new(),
        };
        assert_eq!(new.to_string(), "local-lvm:32");
        assert_eq!(
            DiskSpec::CloudInit {
                storage: "local-lvm".into()
            }
            .to_string(),
            "local-lvm:cloudinit"
        );
        assert_eq!(
            DiskSpec::Cdrom { volume: None }.to_string(),
            "none,media=cdrom"
        );
        assert_eq!(
            DiskSpec::Cdrom {
                volume: Some("local:iso/x.iso".into())
            }
            .to_string(),
            "local:iso/x.iso,media=cdrom"
        );
    }
}
