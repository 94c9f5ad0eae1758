//! Storages and the volumes on them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The kind of a storage, which decides paths and volume naming.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageKind {
    /// A directory storage (`dir`), e.g. `local` at `/var/lib/vz`.
    Dir { path: String },
    /// An LVM-thin pool (`lvmthin`), e.g. `local-lvm` on VG `pve`.
    LvmThin { vg: String },
}

#[derive(Clone, Debug)]
pub struct Volume {
    /// e.g. `import/ubuntu.qcow2`, `iso/x.iso`, `vm-100-disk-0`
    pub volname: String,
    pub content: &'static str,
    pub format: String,
    /// Bytes used on the storage (file size, or virtual size for thin LVs).
    pub size: u64,
    /// The image's virtual size (what an import allocates).
    pub virtual_size: u64,
    pub vmid: Option<u32>,
    pub ctime: u64,
    /// An import from this image fails part-way like a corrupt image.
    pub corrupt: bool,
    /// Known checksums of a downloaded file (algorithm → lower-case hex).
    pub checksums: BTreeMap<String, String>,
    /// The base volume (`base-9000-disk-0`) a linked clone was made from.
    pub base: Option<String>,
    /// What the volume holds, when it was copied from another (an import,
    /// a restore): the id of the original's contents, so a copy of a copy
    /// holds what the first held. `None`: its own (see [`Volume::holds`]).
    pub contents: Option<String>,
    /// A backup archive's metadata (`content: backup`).
    pub backup: Option<Box<Backup>>,
}

impl Volume {
    /// The id of what the volume holds: the original's for a copy, else
    /// its own volume ID.
    pub fn holds(&self, volid: &str) -> String {
        self.contents.clone().unwrap_or_else(|| volid.to_owned())
    }
}

/// What a vzdump archive recorded: the guest's config and what each of its
/// disks held, so a restore recreates them; its notes and protection.
#[derive(Clone, Debug, PartialEq)]
pub struct Backup {
    pub subtype: super::GuestKind,
    /// The guest's config at the backup (without `lock`).
    pub config: BTreeMap<String, String>,
    /// Disk key (`scsi0`, `rootfs`, `mp0`) → what it held.
    pub disks: BTreeMap<String, ArchivedDisk>,
    pub notes: String,
    pub protected: bool,
}

/// One disk inside an archive.
#[derive(Clone, Debug, PartialEq)]
pub struct ArchivedDisk {
    /// The contents id ([`Volume::holds`]) of the disk backed up.
    pub contents: String,
    /// Its virtual size in bytes.
    pub size: u64,
    /// The data written to it (what a restore writes again).
    pub data: u64,
    /// The storage it was on (a restore without `storage` goes there).
    pub storage: String,
}

#[derive(Clone, Debug)]
pub struct Storage {
    pub id: String,
    pub kind: StorageKind,
    pub content: Vec<&'static str>,
    pub total: u64,
    /// Shared storages (NFS, Ceph) hold the same volumes on every node.
    pub shared: bool,
    pub volumes: BTreeMap<String, Volume>,
}

impl Storage {
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            StorageKind::Dir { .. } => "dir",
            StorageKind::LvmThin { .. } => "lvmthin",
        }
    }

    pub fn supports(&self, content: &str) -> bool {
        self.content.contains(&content)
    }

    pub fn is_file_based(&self) -> bool {
        matches!(self.kind, StorageKind::Dir { .. })
    }

    pub fn volid(&self, volname: &str) -> String {
        format!("{}:{volname}", self.id)
    }

    /// The filesystem path of a volume as PVE's `path` would give it.
    pub fn path(&self, volname: &str) -> String {
        match &self.kind {
            StorageKind::Dir { path } => match volname.split_once('/') {
                Some(("iso", f)) => format!("{path}/template/iso/{f}"),
                Some(("vztmpl", f)) => format!("{path}/template/cache/{f}"),
                Some(("backup", f)) => format!("{path}/dump/{f}"),
                // A linked clone names its base first
                // (`100/base-100-disk-0.qcow2/101/vm-101-disk-0.qcow2`); its
                // file is the last two parts.
                Some((dir, f)) if dir.bytes().all(|b| b.is_ascii_digit()) => {
                    let own = f.rsplitn(3, '/').take(2).collect::<Vec<_>>();
                    match own.as_slice() {
                        [file, owner] if owner.bytes().all(|b| b.is_ascii_digit()) => {
                            format!("{path}/images/{owner}/{file}")
                        }
                        _ => format!("{path}/images/{dir}/{f}"),
                    }
                }
                Some((dir, f)) => format!("{path}/{dir}/{f}"),
                None => format!("{path}/images/{volname}"),
            },
            StorageKind::LvmThin { vg } => format!("/dev/{vg}/{volname}"),
        }
    }

    /// The volname a downloaded file of `content` type gets.
    pub fn download_volname(content: &str, filename: &str) -> String {
        format!("{content}/{filename}")
    }

    pub fn used(&self) -> u64 {
        self.volumes.values().map(|v| v.size).sum()
    }

    /// Whether a new volume is created empty and takes space only as data
    /// is written to it: an LVM-thin pool allocates its blocks on write, so
    /// a 20 GiB disk holding a 600 MiB image uses 600 MiB of the pool, and
    /// the pool may promise more than it has (LVM warns, PVE allows it).
    pub fn is_thin(&self) -> bool {
        matches!(self.kind, StorageKind::LvmThin { .. })
    }

    /// Records `bytes` written to `volname` of a thin pool (up to the
    /// volume's virtual size). Volumes elsewhere are counted whole from
    /// their creation, so this changes nothing for them. `Err(offset)`: the
    /// pool ran out of data space at that offset of the write (the volume
    /// keeps what fitted).
    pub fn wrote(&mut self, volname: &str, bytes: u64) -> Result<(), u64> {
        if !self.is_thin() {
            return Ok(());
        }
        let room = self.total.saturating_sub(self.used());
        let Some(vol) = self.volumes.get_mut(volname) else {
            return Ok(());
        };
        let want = bytes.min(vol.virtual_size.saturating_sub(vol.size));
        vol.size += want.min(room);
        if want > room { Err(room) } else { Ok(()) }
    }

    /// The next free `vm-<vmid>-disk-N` name, as PVE's
    /// `find_free_diskname` picks it: neither it nor its `base-` form is
    /// the name of a volume here (a directory storage's volumes are
    /// `<vmid>/<name>.<format>`, a linked clone's `<base>/<vmid>/<name>`).
    pub fn free_disk_name(&self, vmid: u32) -> String {
        let taken: std::collections::BTreeSet<&str> = self
            .volumes
            .keys()
            .map(|k| {
                let file = k.rsplit('/').next().unwrap_or(k);
                file.split_once('.').map_or(file, |(stem, _)| stem)
            })
            .collect();
        (0..)
            .map(|n| format!("vm-{vmid}-disk-{n}"))
            .find(|name| {
                !taken.contains(name.as_str())
                    && !taken.contains(name.replacen("vm-", "base-", 1).as_str())
            })
            .unwrap_or_default()
    }

    /// An entry of `GET /nodes/{node}/storage`.
    pub fn status_json(&self) -> Value {
        let used = self.used();
        json!({
            "storage": self.id,
            "type": self.type_name(),
            "content": self.content.join(","),
            "active": 1,
            "enabled": 1,
            "shared": u8::from(self.shared),
            "total": self.total,
            "used": used,
            "avail": self.total.saturating_sub(used),
            "used_fraction": used as f64 / self.total as f64,
        })
    }

    /// An entry of `GET .../storage/{storage}/content`.
    pub fn content_json(&self, vol: &Volume) -> Value {
        let mut v = json!({
            "volid": self.volid(&vol.volname),
            "content": vol.content,
            "format": vol.format,
            "size": if vol.content == "images" { vol.virtual_size } else { vol.size },
            "ctime": vol.ctime,
        });
        if let Some(vmid) = vol.vmid {
            v["vmid"] = json!(vmid);
            v["used"] = json!(vol.size);
        }
        if let Some(b) = &vol.backup {
            v["subtype"] = json!(b.subtype.type_name());
            v["protected"] = json!(u8::from(b.protected));
            // Only the first line of multi-line notes, as PVE lists them.
            if let Some(first) = b.notes.lines().next() {
                v["notes"] = json!(first);
            }
        }
        // qemu-img's backing file of a qcow2 linked clone.
        if let (Some(base), true) = (&vol.base, self.is_file_based()) {
            v["parent"] = json!(format!("../{base}"));
        }
        v
    }

    /// Whether a linked clone of the base volume `base` lives here and
    /// names it, as PVE's `volume_is_base_and_used` finds it (destroying
    /// the base and migrating it both ask): a directory
    /// storage's clone is `<base>/<vmid>/<name>` (its qcow2 backing file
    /// is the base). An LVM-thin clone is an independent thin snapshot
    /// whose name carries no base: PVE does not count it.
    pub fn base_in_use(&self, base: &str) -> bool {
        let prefix = format!("{base}/");
        self.volumes.keys().any(|name| name.starts_with(&prefix))
    }
}

/// Splits `storage:volname`.
pub fn split_volid(volid: &str) -> Option<(&str, &str)> {
    volid.split_once(':')
}
