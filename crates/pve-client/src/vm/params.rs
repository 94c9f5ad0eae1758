//! Parameters for creating, cloning, updating and operating VMs, encoded
//! as PVE expects (booleans `1`/`0`, strict `sshkeys`, `delete=` lists).

use std::collections::BTreeMap;

use crate::form::Params;
use crate::secret::Secret;
use crate::vm::cloudinit::{IpConfig, encode_sshkeys};
use crate::vm::config::Tags;
use crate::vm::disk::DiskSpec;
use crate::vm::net::Nic;

/// VM settings for create and config updates. `None` leaves a key out.
#[derive(Clone, Debug, Default)]
pub struct VmParams {
    pub name: Option<String>,
    pub description: Option<String>,
    /// MiB.
    pub memory: Option<u64>,
    pub cores: Option<u32>,
    pub sockets: Option<u32>,
    pub cpu: Option<String>,
    /// `agent=1`/`0`.
    pub agent: Option<bool>,
    pub onboot: Option<bool>,
    pub ostype: Option<String>,
    pub scsihw: Option<String>,
    pub ciuser: Option<String>,
    pub cipassword: Option<Secret>,
    /// Public keys, one per entry.
    pub sshkeys: Option<Vec<String>>,
    pub ipconfig: BTreeMap<u32, IpConfig>,
    pub nameserver: Option<String>,
    pub searchdomain: Option<String>,
    /// e.g. `order=scsi0;ide2;net0`.
    pub boot: Option<String>,
    pub tags: Option<Tags>,
    /// Drives by key (`scsi0`, `ide2`, ...).
    pub disks: BTreeMap<String, DiskSpec>,
    /// NICs by index.
    pub nets: BTreeMap<u32, Nic>,
    /// Any other key, sent as is (`serial0=socket`, `vga=serial0`).
    pub extra: BTreeMap<String, String>,
}

impl VmParams {
    /// Encodes the settings.
    pub fn to_params(&self) -> Params {
        let mut p = Params::new()
            .opt("name", self.name.as_deref())
            .opt("description", self.description.as_deref())
            .opt("memory", self.memory)
            .opt("cores", self.cores)
            .opt("sockets", self.sockets)
            .opt("cpu", self.cpu.as_deref())
            .opt_flag("agent", self.agent)
            .opt_flag("onboot", self.onboot)
            .opt("ostype", self.ostype.as_deref())
            .opt("scsihw", self.scsihw.as_deref())
            .opt("ciuser", self.ciuser.as_deref());
        if let Some(pw) = &self.cipassword {
            p = p.secret("cipassword", pw);
        }
        if let Some(keys) = &self.sshkeys {
            p = p.text("sshkeys", encode_sshkeys(keys));
        }
        for (i, ip) in &self.ipconfig {
            p = p.text(&format!("ipconfig{i}"), ip);
        }
        p = p
            .opt("nameserver", self.nameserver.as_deref())
            .opt("searchdomain", self.searchdomain.as_deref())
            .opt("boot", self.boot.as_deref())
            .opt("tags", self.tags.as_ref());
        for (key, disk) in &self.disks {
            p = p.text(key, disk);
        }
        for (i, nic) in &self.nets {
            p = p.text(&format!("net{i}"), nic);
        }
        for (k, v) in &self.extra {
            p = p.text(k, v);
        }
        p
    }
}

/// `POST /nodes/{node}/qemu`.
#[derive(Clone, Debug, Default)]
pub struct CreateVm {
    pub vmid: u32,
    pub params: VmParams,
    pub pool: Option<String>,
    /// Start after creation (runs in the create task).
    pub start: Option<bool>,
}

impl CreateVm {
    pub(crate) fn to_params(&self) -> Params {
        Params::new()
            .text("vmid", self.vmid)
            .extend(self.params.to_params())
            .opt("pool", self.pool.as_deref())
            .opt_flag("start", self.start)
    }
}

/// `POST /nodes/{node}/qemu/{vmid}/clone`.
#[derive(Clone, Debug, Default)]
pub struct CloneVm {
    pub newid: u32,
    pub name: Option<String>,
    pub description: Option<String>,
    /// Full copy; a template otherwise gives a linked clone.
    pub full: Option<bool>,
    /// Target storage (full clones only).
    pub storage: Option<String>,
    /// Target node.
    pub target: Option<String>,
    pub pool: Option<String>,
    pub snapname: Option<String>,
    /// `raw`, `qcow2` or `vmdk`.
    pub format: Option<String>,
}

impl CloneVm {
    pub(crate) fn to_params(&self) -> Params {
        Params::new()
            .text("newid", self.newid)
            .opt("name", self.name.as_deref())
            .opt("description", self.description.as_deref())
            .opt_flag("full", self.full)
            .opt("storage", self.storage.as_deref())
            .opt("target", self.target.as_deref())
            .opt("pool", self.pool.as_deref())
            .opt("snapname", self.snapname.as_deref())
            .opt("format", self.format.as_deref())
    }
}

/// A config change: values to set, keys to delete, and the digest the
/// change was computed against (PVE refuses it if the config moved on).
#[derive(Clone, Debug, Default)]
pub struct ConfigUpdate {
    pub set: VmParams,
    pub delete: Vec<String>,
    pub digest: Option<String>,
}

impl ConfigUpdate {
    pub(crate) fn to_params(&self) -> Params {
        let mut p = self.set.to_params();
        if !self.delete.is_empty() {
            p = p.text("delete", self.delete.join(","));
        }
        p.opt("digest", self.digest.as_deref())
    }

    /// Whether there is nothing to change.
    pub fn is_empty(&self) -> bool {
        self.set.to_params().is_empty() && self.delete.is_empty()
    }
}

/// `POST .../status/shutdown`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShutdownOptions {
    /// Seconds to wait for the guest (PVE default 60).
    pub timeout: Option<u32>,
    /// Stop the VM if the guest did not shut down in time.
    pub force_stop: Option<bool>,
}

/// `DELETE .../qemu/{vmid}`.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeleteOptions {
    /// Remove the VMID from backup jobs, replication and HA.
    pub purge: bool,
    /// Also free disks not referenced by the config.
    pub destroy_unreferenced_disks: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_params_encode_exactly() {
        let mut params = VmParams {
            name: Some("web-1".into()),
            memory: Some(2048),
            cores: Some(2),
            agent: Some(true),
            onboot: Some(false),
            scsihw: Some("virtio-scsi-pci".into()),
            ciuser: Some("ubuntu".into()),
            cipassword: Some(Secret::new("pw-secret-1")),
            sshkeys: Some(vec!["ssh-ed25519 AAAA+b= me@h".into()]),
            boot: Some("order=scsi0".into()),
            tags: Some(Tags::parse("B;a")),
            ..VmParams::default()
        };
        params.ipconfig.insert(0, IpConfig::dhcp());
        params.disks.insert(
            "scsi0".into(),
            DiskSpec::Import {
                storage: "local-lvm".into(),
                source: "local:import/jammy.qcow2".into(),
                options: BTreeMap::new(),
            },
        );
        params.disks.insert(
            "ide2".into(),
            DiskSpec::CloudInit {
                storage: "local-lvm".into(),
            },
        );
        params.nets.insert(0, Nic::new("virtio", "vmbr0"));
        params.extra.insert("serial0".into(), "socket".into());
        let create = CreateVm {
            vmid: 100,
            params,
            pool: None,
            start: Some(false),
        };
        let p = create.to_params();
        assert_eq!(p.get("vmid"), Some("100"));
        assert_eq!(p.get("agent"), Some("1"));
        assert_eq!(p.get("onboot"), Some("0"));
        assert_eq!(p.get("start"), Some("0"));
        assert_eq!(p.get("tags"), Some("a;b"));
        assert_eq!(p.get("ipconfig0"), Some("ip=dhcp"));
        assert_eq!(
            p.get("scsi0"),
            Some("local-lvm:0,import-from=local:import/jammy.qcow2")
        );
        assert_eq!(p.get("ide2"), Some("local-lvm:cloudinit"));
        assert_eq!(p.get("net0"), Some("virtio,bridge=vmbr0"));
        assert_eq!(p.get("sshkeys"), Some("ssh-ed25519%20AAAA%2Bb%3D%20me%40h"));
        let form = p.to_form();
        assert!(
            form.contains("sshkeys=ssh-ed25519%2520AAAA%252Bb%253D%2520me%2540h"),
            "{form}"
        );
        assert!(!format!("{p:?}").contains("pw-secret-1"));
    }

    #[test]
    fn update_params_include_delete_and_digest() {
        let u = ConfigUpdate {
            set: VmParams {
                cores: Some(4),
                ..VmParams::default()
            },
            delete: vec!["net1".into(), "ide2".into()],
            digest: Some("abc".into()),
        };
        assert_eq!(
            u.to_params().to_form(),
            "cores=4&delete=net1%2Cide2&digest=abc"
        );
        assert!(!u.is_empty());
        assert!(ConfigUpdate::default().is_empty());
    }

    #[test]
    fn clone_params() {
        let c = CloneVm {
            newid: 101,
            name: Some("c".into()),
            full: Some(true),
            storage: Some("local-lvm".into()),
            ..CloneVm::default()
        };
        assert_eq!(
            c.to_params().to_form(),
            "newid=101&name=c&full=1&storage=local-lvm"
        );
    }
}
