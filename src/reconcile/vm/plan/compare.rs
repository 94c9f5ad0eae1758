//! The managed config keys, and when an observed value already says what
//! the spec wants.
//!
//! Values are read and written with pve-client's model of Proxmox values
//! (which knows that tags compare without order or case, that `sshkeys` is
//! URL-encoded, what an absent key defaults to, ...). What counts as "the
//! same" is the plan's decision: a MAC Proxmox generated counts only when
//! the spec declares one, only the CPU model is managed, the description
//! compares without the owner marker.

use pve_client::vm::{
    AgentConfig, CpuConfig, Drive, DriveFile, DriveKey, IpConfig, Media, Nameservers, Nic, ScsiHw,
    SshKeys, Tags, VmParams, defaults, ipconfig_key, net_key, parse_bool, parse_memory,
};

use super::hardware::HwWant;
use super::owner;

/// One managed config key and its wanted value.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Want {
    Name(String),
    Cores(u32),
    Sockets(u32),
    /// MiB.
    Memory(u64),
    /// With the owner marker.
    Description(String),
    /// The CPU model (its other options are left alone).
    CpuType(String),
    Agent(bool),
    OnBoot(bool),
    Tags(Tags),
    ScsiHw(ScsiHw),
    /// `net<index>`; its MAC counts only when the spec declares one.
    Net {
        index: u32,
        nic: Nic,
    },
    CiUser(String),
    SshKeys(SshKeys),
    IpConfig {
        index: u32,
        config: IpConfig,
    },
    Nameservers(Nameservers),
    SearchDomain(String),
    /// A CD-ROM holding `file` (the `customCloudInit` seed ISO).
    Cdrom {
        slot: DriveKey,
        file: DriveFile,
    },
    /// Firmware, machine, console, devices, protection, startup.
    Hw(HwWant),
}

impl Want {
    /// The config key.
    pub fn key(&self) -> String {
        match self {
            Want::Name(_) => "name".into(),
            Want::Cores(_) => "cores".into(),
            Want::Sockets(_) => "sockets".into(),
            Want::Memory(_) => "memory".into(),
            Want::Description(_) => "description".into(),
            Want::CpuType(_) => "cpu".into(),
            Want::Agent(_) => "agent".into(),
            Want::OnBoot(_) => "onboot".into(),
            Want::Tags(_) => "tags".into(),
            Want::ScsiHw(_) => "scsihw".into(),
            Want::Net { index, .. } => net_key(*index),
            Want::CiUser(_) => "ciuser".into(),
            Want::SshKeys(_) => "sshkeys".into(),
            Want::IpConfig { index, .. } => ipconfig_key(*index),
            Want::Nameservers(_) => "nameserver".into(),
            Want::SearchDomain(_) => "searchdomain".into(),
            Want::Cdrom { slot, .. } => slot.to_string(),
            Want::Hw(hw) => hw.key(),
        }
    }

    /// Whether `observed` (absent: `None`) already says what is wanted. A
    /// value Proxmox would not accept never does.
    pub fn matches(&self, observed: Option<&str>) -> bool {
        if let Want::Hw(hw) = self {
            return hw.matches(observed);
        }
        let Some(have) = observed else {
            return match self {
                Want::Cores(n) => *n == defaults::CORES,
                Want::Sockets(n) => *n == defaults::SOCKETS,
                Want::Memory(mib) => *mib == defaults::MEMORY_MIB,
                Want::OnBoot(on) => *on == defaults::ONBOOT,
                Want::Description(d) => owner::user_part(d).is_empty(),
                // Nothing shown is no default for these.
                Want::Name(_)
                | Want::CpuType(_)
                | Want::Agent(_)
                | Want::Tags(_)
                | Want::ScsiHw(_)
                | Want::Net { .. }
                | Want::CiUser(_)
                | Want::SshKeys(_)
                | Want::IpConfig { .. }
                | Want::Nameservers(_)
                | Want::SearchDomain(_)
                | Want::Cdrom { .. }
                | Want::Hw(_) => false,
            };
        };
        match self {
            Want::Name(want) | Want::CiUser(want) | Want::SearchDomain(want) => {
                have.trim() == want.trim()
            }
            Want::Cores(n) | Want::Sockets(n) => have.trim().parse() == Ok(*n),
            Want::Memory(mib) => parse_memory(have) == Ok(*mib),
            Want::Description(d) => owner::user_part(have) == owner::user_part(d),
            Want::CpuType(model) => have
                .parse::<CpuConfig>()
                .is_ok_and(|cpu| cpu.cputype.as_ref() == Some(model)),
            Want::Agent(on) => AgentConfig::parse(have).enabled == *on,
            Want::OnBoot(on) => parse_bool(have) == Some(*on),
            Want::Tags(tags) => Tags::parse(have) == *tags,
            Want::ScsiHw(hw) => have.parse() == Ok(*hw),
            Want::Net { nic, .. } => Nic::parse(have).is_ok_and(|h| same_device(&h, nic)),
            Want::SshKeys(keys) => SshKeys::parse(have).is_ok_and(|h| h == *keys),
            Want::IpConfig { config, .. } => IpConfig::parse(have) == Ok(*config),
            Want::Nameservers(servers) => Nameservers::parse(have).is_ok_and(|h| h == *servers),
            Want::Cdrom { file, .. } => {
                Drive::parse(have).is_ok_and(|d| d.media == Some(Media::Cdrom) && d.file == *file)
            }
            Want::Hw(_) => false,
        }
    }

    /// Sets the wanted value in `set`, keeping what Proxmox chose and the
    /// spec leaves open (the MAC it generated, from `observed`).
    pub fn apply(&self, observed: Option<&str>, set: &mut VmParams) {
        match self {
            Want::Name(name) => set.name = Some(name.clone()),
            Want::Cores(n) => set.cores = Some(*n),
            Want::Sockets(n) => set.sockets = Some(*n),
            Want::Memory(mib) => set.memory = Some(*mib),
            Want::Description(d) => set.description = Some(d.as_str().into()),
            Want::CpuType(model) => {
                // Only the model is managed: its other options (flags)
                // stay as they are.
                let mut cpu = observed
                    .and_then(|h| h.parse::<CpuConfig>().ok())
                    .unwrap_or_default();
                cpu.cputype = Some(model.clone());
                set.cpu = Some(cpu);
            }
            Want::Agent(on) => set.agent = Some(AgentConfig::enabled(*on)),
            Want::OnBoot(on) => set.onboot = Some(*on),
            Want::Tags(tags) => set.tags = Some(tags.clone()),
            Want::ScsiHw(hw) => set.scsihw = Some(*hw),
            Want::Net { index, nic } => {
                let mut nic = nic.clone();
                if nic.mac.is_none() {
                    nic.mac = observed.and_then(|h| Nic::parse(h).ok()?.mac);
                }
                set.nets.insert(*index, nic);
            }
            Want::CiUser(user) => set.ciuser = Some(user.clone()),
            Want::SshKeys(keys) => set.sshkeys = Some(keys.clone()),
            Want::IpConfig { index, config } => {
                set.ipconfig.insert(*index, *config);
            }
            Want::Nameservers(servers) => set.nameserver = Some(servers.clone()),
            Want::SearchDomain(domain) => set.searchdomain = Some(domain.clone()),
            Want::Cdrom { slot, file } => {
                set.disks.insert(*slot, Drive::cdrom(Some(file.clone())));
            }
            Want::Hw(hw) => hw.apply(observed, set),
        }
    }
}

/// The NIC settings the spec manages are the same; the MAC only when the
/// spec declares one.
fn same_device(have: &Nic, want: &Nic) -> bool {
    have.model == want.model
        && have.bridge == want.bridge
        && have.tag == want.tag
        && have.firewall == want.firewall
        && (want.mac.is_none() || have.mac == want.mac)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pve_client::vm::NicModel;

    fn nic(s: &str) -> Nic {
        Nic::parse(s).unwrap()
    }

    fn net(s: &str) -> Want {
        Want::Net {
            index: 0,
            nic: nic(s),
        }
    }

    #[test]
    fn comparisons_normalise_what_proxmox_echoes() {
        let keys = SshKeys::new(["ssh-ed25519 AAAA a@b", "ssh-rsa BBBB+/= c"]);
        let encoded = keys.to_string();
        // (case, wanted, observed, same?)
        let cases: Vec<(&str, Want, Option<&str>, bool)> = vec![
            (
                "tags order and case",
                Want::Tags(Tags::new(["web", "Prod"])),
                Some("prod;web"),
                true,
            ),
            (
                "tags differ",
                Want::Tags(Tags::new(["web"])),
                Some("web;db"),
                false,
            ),
            ("cores default", Want::Cores(1), None, true),
            ("cores differ", Want::Cores(2), Some("1"), false),
            ("memory default", Want::Memory(512), None, true),
            (
                "memory property form",
                Want::Memory(2048),
                Some("current=2048"),
                true,
            ),
            ("onboot absent means off", Want::OnBoot(false), None, true),
            (
                "onboot as PVE reads it",
                Want::OnBoot(true),
                Some("on"),
                true,
            ),
            (
                "agent with options",
                Want::Agent(true),
                Some("enabled=1,fstrim_cloned_disks=1"),
                true,
            ),
            ("agent plain", Want::Agent(true), Some("0"), false),
            (
                "agent as PVE reads it",
                Want::Agent(true),
                Some("yes"),
                true,
            ),
            (
                "cpu with flags",
                Want::CpuType("host".into()),
                Some("cputype=host,flags=+aes"),
                true,
            ),
            (
                "generated mac ignored",
                net("virtio,bridge=vmbr0,tag=10"),
                Some("virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10"),
                true,
            ),
            (
                "declared mac compared",
                net("virtio=BC:24:11:00:00:02,bridge=vmbr0"),
                Some("virtio=bc:24:11:00:00:01,bridge=vmbr0"),
                false,
            ),
            (
                "declared mac in any case",
                net("virtio=BC:24:11:00:00:02,bridge=vmbr0"),
                Some("virtio=bc:24:11:00:00:02,bridge=vmbr0"),
                true,
            ),
            (
                "bridge differs",
                net("virtio,bridge=vmbr1"),
                Some("virtio=BC:24:11:00:00:01,bridge=vmbr0"),
                false,
            ),
            (
                "ipconfig order",
                Want::IpConfig {
                    index: 0,
                    config: IpConfig::parse("ip=10.0.0.5/24,gw=10.0.0.1").unwrap(),
                },
                Some("gw=10.0.0.1,ip=10.0.0.5/24"),
                true,
            ),
            (
                "nameservers",
                Want::Nameservers(Nameservers::new(["1.1.1.1", "9.9.9.9"])),
                Some("1.1.1.1,9.9.9.9"),
                true,
            ),
            (
                "ssh keys as echoed",
                Want::SshKeys(keys.clone()),
                Some(encoded.as_str()),
                true,
            ),
            (
                "ssh keys missing one",
                Want::SshKeys(keys),
                Some("ssh-ed25519%20AAAA%20a%40b"),
                false,
            ),
            (
                "description user part",
                Want::Description(
                    "notes\n\nManaged by crossplane-provider-proxmox: x uid=1".into(),
                ),
                Some("notes\n\nManaged by crossplane-provider-proxmox: x uid=1\n"),
                true,
            ),
            (
                "scsihw",
                Want::ScsiHw(ScsiHw::VirtioScsiSingle),
                Some("virtio-scsi-single"),
                true,
            ),
            ("name absent", Want::Name("web".into()), None, false),
        ];
        for (name, w, observed, same) in cases {
            assert_eq!(w.matches(observed), same, "{name}");
        }
    }

    #[test]
    fn a_changed_device_keeps_its_generated_mac() {
        let w = net("virtio,bridge=vmbr1,tag=5");
        let mut set = VmParams::default();
        w.apply(Some("virtio=BC:24:11:00:00:01,bridge=vmbr0"), &mut set);
        assert_eq!(
            set.nets[&0].to_string(),
            "virtio=BC:24:11:00:00:01,bridge=vmbr1,tag=5"
        );
        let declared = Want::Net {
            index: 1,
            nic: Nic {
                mac: "BC:24:11:00:00:09".parse().ok(),
                ..Nic::new(NicModel::E1000, "vmbr0")
            },
        };
        declared.apply(Some("virtio=BC:24:11:00:00:01,bridge=vmbr0"), &mut set);
        assert_eq!(
            set.nets[&1].to_string(),
            "e1000=BC:24:11:00:00:09,bridge=vmbr0"
        );
        assert_eq!(declared.key(), "net1");
    }
}
