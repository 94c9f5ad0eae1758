//! Parameters for creating, cloning, updating and operating VMs: the typed
//! model's values, written as PVE expects them (booleans `1`/`0`, strict
//! `sshkeys`, `delete=` lists).

use std::collections::BTreeMap;
use std::fmt;

use crate::form::Params;
use crate::secret::Secret;
use crate::vm::{
    AgentConfig, Boot, CpuConfig, Description, Drive, DriveKey, Hardware, IpConfig, Nameservers,
    Nic, ScsiHw, SshKeys, Startup, Tags, ipconfig_key, net_key, value::bool_text,
};

/// The one secret setting.
const PASSWORD: &str = "cipassword";

/// VM settings for create and config updates. `None` (or an empty map)
/// leaves a key out. Keys the model does not know cannot be sent: add them
/// to the model (see docs/architecture.md).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VmParams {
    pub name: Option<String>,
    pub description: Option<Description>,
    /// MiB.
    pub memory: Option<u64>,
    pub cores: Option<u32>,
    pub sockets: Option<u32>,
    pub cpu: Option<CpuConfig>,
    pub agent: Option<AgentConfig>,
    pub onboot: Option<bool>,
    pub ostype: Option<String>,
    pub scsihw: Option<ScsiHw>,
    pub ciuser: Option<String>,
    pub cipassword: Option<Secret>,
    pub sshkeys: Option<SshKeys>,
    /// `ipconfigN` by N.
    pub ipconfig: BTreeMap<u32, IpConfig>,
    pub nameserver: Option<Nameservers>,
    pub searchdomain: Option<String>,
    pub boot: Option<Boot>,
    pub tags: Option<Tags>,
    /// Drives by slot.
    pub disks: BTreeMap<DriveKey, Drive>,
    /// `netN` by N.
    pub nets: BTreeMap<u32, Nic>,
    pub protection: Option<bool>,
    pub startup: Option<Startup>,
    /// Firmware, machine, console and devices.
    pub hardware: Hardware,
}

/// A value's text, if set.
fn shown<T: fmt::Display>(value: &Option<T>) -> Option<String> {
    value.as_ref().map(ToString::to_string)
}

impl VmParams {
    /// The keys that are set, in sorted order.
    pub fn keys(&self) -> Vec<String> {
        self.to_params()
            .pairs()
            .iter()
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Encodes the settings, keys in sorted order.
    pub fn to_params(&self) -> Params {
        let flag = |b: Option<bool>| b.map(|b| bool_text(b).to_owned());
        let mut text: BTreeMap<String, String> = [
            ("name", shown(&self.name)),
            ("description", shown(&self.description)),
            ("memory", shown(&self.memory)),
            ("cores", shown(&self.cores)),
            ("sockets", shown(&self.sockets)),
            ("cpu", shown(&self.cpu)),
            ("agent", shown(&self.agent)),
            ("onboot", flag(self.onboot)),
            ("ostype", shown(&self.ostype)),
            ("scsihw", shown(&self.scsihw)),
            ("ciuser", shown(&self.ciuser)),
            // A placeholder: the value goes in as a secret below.
            (PASSWORD, self.cipassword.as_ref().map(|_| String::new())),
            ("sshkeys", shown(&self.sshkeys)),
            ("nameserver", shown(&self.nameserver)),
            ("searchdomain", shown(&self.searchdomain)),
            ("boot", shown(&self.boot)),
            ("tags", shown(&self.tags)),
            ("protection", flag(self.protection)),
            ("startup", shown(&self.startup)),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
        .collect();
        text.extend(
            self.ipconfig
                .iter()
                .map(|(i, c)| (ipconfig_key(*i), c.to_string())),
        );
        text.extend(
            self.disks
                .iter()
                .map(|(k, d)| (k.to_string(), d.to_string())),
        );
        text.extend(self.nets.iter().map(|(i, n)| (net_key(*i), n.to_string())));
        text.extend(self.hardware.pairs());
        text.into_iter().fold(Params::new(), |p, (k, v)| {
            match self.cipassword.as_ref().filter(|_| k == PASSWORD) {
                Some(password) => p.secret(&k, password),
                None => p.text(&k, v),
            }
        })
    }
}

/// `POST /nodes/{node}/qemu`.
#[derive(Clone, Debug, Default, PartialEq)]
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
#[derive(Clone, Debug, Default, PartialEq)]
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
    use crate::vm::NicModel;

    #[test]
    fn create_params_encode_exactly() {
        let mut params = VmParams {
            name: Some("web-1".into()),
            memory: Some(2048),
            cores: Some(2),
            agent: Some(AgentConfig::enabled(true)),
            onboot: Some(false),
            scsihw: Some(ScsiHw::VirtioScsiPci),
            ciuser: Some("ubuntu".into()),
            cipassword: Some(Secret::new("pw-secret-1")),
            sshkeys: Some(SshKeys::new(["ssh-ed25519 AAAA+b= me@h"])),
            boot: Some(Boot::order(["scsi0"])),
            tags: Some(Tags::parse("B;a")),
            description: Some("notes".into()),
            ..VmParams::default()
        };
        params.ipconfig.insert(0, IpConfig::dhcp());
        let slot = |s: &str| s.parse::<DriveKey>().unwrap();
        params.disks.insert(
            slot("scsi0"),
            Drive::import("local-lvm", "local:import/jammy.qcow2"),
        );
        params
            .disks
            .insert(slot("ide2"), Drive::cloud_init("local-lvm"));
        params.nets.insert(0, Nic::new(NicModel::Virtio, "vmbr0"));
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
        assert_eq!(p.get("tags"), Some("B;a"), "as given; PVE normalises");
        assert_eq!(p.get("ipconfig0"), Some("ip=dhcp"));
        assert_eq!(
            p.get("scsi0"),
            Some("local-lvm:0,import-from=local:import/jammy.qcow2")
        );
        assert_eq!(p.get("ide2"), Some("local-lvm:cloudinit"));
        assert_eq!(p.get("net0"), Some("virtio,bridge=vmbr0"));
        assert_eq!(p.get("boot"), Some("order=scsi0"));
        assert_eq!(p.get("scsihw"), Some("virtio-scsi-pci"));
        assert_eq!(p.get("description"), Some("notes"));
        assert_eq!(p.get("cipassword"), Some("pw-secret-1"));
        assert_eq!(p.get("sshkeys"), Some("ssh-ed25519%20AAAA%2Bb%3D%20me%40h"));
        let form = p.to_form();
        assert!(
            form.contains("sshkeys=ssh-ed25519%2520AAAA%252Bb%253D%2520me%2540h"),
            "{form}"
        );
        assert!(!format!("{p:?}").contains("pw-secret-1"));
        assert!(!format!("{create:?}").contains("pw-secret-1"));
        let keys: Vec<&str> = p.pairs().iter().map(|(k, _)| k.as_str()).collect();
        let settings = &keys[1..keys.len() - 1];
        assert!(settings.is_sorted(), "settings in key order: {keys:?}");
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
