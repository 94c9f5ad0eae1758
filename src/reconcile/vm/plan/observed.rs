//! The VM's config as `status.atProvider` shows it: the keys the spec
//! manages, read with pve-client's model into the shape of
//! `spec.forProvider`, so an import copies it field by field.
//!
//! Read from the config the pass already has: showing it costs no request.

use pve_client::vm::{
    AgentConfig, CpuConfig, Drive, DriveKey, IpConfig, Nameservers, Nic, ScsiHw, SshKeys, Tags,
    defaults, ipconfig_index, net_index, parse_bool, parse_memory,
};

use super::input::{Power, VmConfig};
use super::owner;
use crate::api::vm::{
    GuestAgent, NetworkModel, ObservedCloudInit, ObservedCpu, ObservedDisk, ObservedIpConfig,
    ObservedNetwork, PowerState, ScsiController, VmObserved, quantity_of,
};

const MIB: u64 = 1 << 20;

/// The configuration `config` shows, with the power state.
pub(super) fn config(config: &VmConfig, power: Power) -> VmObserved {
    let get = |key: &str| config.current.get(key).map(String::as_str);
    let count = |key: &str, default: u32| {
        get(key)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default)
    };
    let memory = get("memory").map_or(Ok(defaults::MEMORY_MIB), parse_memory);
    VmObserved {
        name: get("name").map(str::to_owned),
        cpu: Some(ObservedCpu {
            cores: count("cores", defaults::CORES),
            sockets: count("sockets", defaults::SOCKETS),
            type_: get("cpu")
                .and_then(|c| c.parse::<CpuConfig>().ok())
                .and_then(|c| c.cputype),
            numa: get("numa").and_then(parse_bool),
        }),
        memory: memory.ok().map(|mib| quantity_of(mib * MIB)),
        disks: disks(config),
        networks: networks(config),
        cloud_init: cloud_init(config),
        agent: get("agent").map(|a| GuestAgent {
            enabled: AgentConfig::parse(a).enabled,
        }),
        power_state: match power {
            Power::Running => Some(PowerState::Running),
            Power::Stopped => Some(PowerState::Stopped),
            Power::Paused | Power::Unknown => None,
        },
        tags: get("tags")
            .map(|t| Tags::parse(t).as_slice().to_vec())
            .unwrap_or_default(),
        description: get("description")
            .map(owner::user_part)
            .filter(|d| !d.is_empty()),
        on_boot: get("onboot").and_then(parse_bool),
        scsi_controller: get("scsihw")
            .and_then(|s| s.parse::<ScsiHw>().ok())
            .map(scsi_controller),
        // From the VM's status, read in every look (`report::observed`).
        template: None,
    }
}

/// Every drive that is a disk: not a CD-ROM, not the cloud-init drive.
fn disks(config: &VmConfig) -> Vec<ObservedDisk> {
    config
        .current
        .iter()
        .filter(|(key, _)| key.parse::<DriveKey>().is_ok())
        .filter_map(|(key, value)| {
            let drive = Drive::parse(value).ok()?;
            if drive.is_cdrom() || drive.is_cloudinit() {
                return None;
            }
            Some(ObservedDisk {
                slot: key.clone(),
                storage: drive.storage()?.to_owned(),
                size: drive.size.map(quantity_of),
            })
        })
        .collect()
}

fn networks(config: &VmConfig) -> Vec<ObservedNetwork> {
    config
        .current
        .iter()
        .filter(|(key, _)| net_index(key).is_some())
        .filter_map(|(key, value)| {
            let nic = Nic::parse(value).ok()?;
            Some(ObservedNetwork {
                slot: key.clone(),
                model: NetworkModel::parse(nic.model.as_str())?,
                bridge: nic.bridge,
                vlan_tag: nic.tag,
                mac: nic.mac.map(|m| m.to_string()),
                firewall: nic.firewall,
            })
        })
        .collect()
}

/// The cloud-init keys and drive, when the VM has any of them.
fn cloud_init(config: &VmConfig) -> Option<ObservedCloudInit> {
    let get = |key: &str| config.current.get(key).map(String::as_str);
    let drive = config.current.iter().find_map(|(key, value)| {
        key.parse::<DriveKey>().ok()?;
        let drive = Drive::parse(value).ok().filter(Drive::is_cloudinit)?;
        Some((key.clone(), drive.storage().map(str::to_owned)))
    });
    let ip_configs: Vec<ObservedIpConfig> = config
        .current
        .iter()
        .filter_map(|(key, value)| {
            let index = ipconfig_index(key)?;
            let ip = IpConfig::parse(value).ok()?;
            Some(ObservedIpConfig {
                interface: format!("net{index}"),
                ip: ip.ip.map(|v| v.to_string()),
                gateway: ip.gw.map(|v| v.to_string()),
                ip6: ip.ip6.map(|v| v.to_string()),
                gateway6: ip.gw6.map(|v| v.to_string()),
            })
        })
        .collect();
    let ci = ObservedCloudInit {
        user: get("ciuser").map(str::to_owned),
        ssh_keys: get("sshkeys")
            .and_then(|k| SshKeys::parse(k).ok())
            .map(|k| k.keys().to_vec())
            .unwrap_or_default(),
        ip_configs,
        nameservers: get("nameserver")
            .and_then(|n| Nameservers::parse(n).ok())
            .map(|n| n.servers().to_vec())
            .unwrap_or_default(),
        search_domain: get("searchdomain").map(str::to_owned),
        storage: drive.as_ref().and_then(|(_, storage)| storage.clone()),
        drive_slot: drive.map(|(slot, _)| slot),
    };
    (ci != ObservedCloudInit::default()).then_some(ci)
}

fn scsi_controller(hw: ScsiHw) -> ScsiController {
    match hw {
        ScsiHw::Lsi => ScsiController::Lsi,
        ScsiHw::Lsi53c810 => ScsiController::Lsi53c810,
        ScsiHw::VirtioScsiPci => ScsiController::VirtioScsiPci,
        ScsiHw::VirtioScsiSingle => ScsiController::VirtioScsiSingle,
        ScsiHw::Megasas => ScsiController::Megasas,
        ScsiHw::Pvscsi => ScsiController::Pvscsi,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(pairs: &[(&str, &str)]) -> VmConfig {
        VmConfig {
            current: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            pending: Default::default(),
        }
    }

    #[test]
    fn a_config_reads_as_the_spec_writes_it() {
        let notes = format!("hand made\n\n{}", owner::marker_line("ns", "web", "u-1"));
        let config = vm(&[
            ("name", "web"),
            ("cores", "2"),
            ("sockets", "1"),
            ("cpu", "host"),
            ("memory", "2048"),
            ("scsihw", "virtio-scsi-single"),
            ("scsi0", "local-lvm:vm-100-disk-0,size=32G"),
            ("ide2", "local-lvm:vm-100-cloudinit,media=cdrom"),
            ("ide0", "none,media=cdrom"),
            (
                "net0",
                "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,tag=20",
            ),
            ("ciuser", "ops"),
            ("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1"),
            ("nameserver", "1.1.1.1"),
            ("tags", "a;b"),
            ("description", notes.as_str()),
            ("onboot", "1"),
            ("agent", "1"),
            ("digest", "abc"),
        ]);
        let seen = super::config(&config, Power::Running);
        let want = VmObserved {
            name: Some("web".into()),
            cpu: Some(ObservedCpu {
                cores: 2,
                sockets: 1,
                type_: Some("host".into()),
                numa: None,
            }),
            memory: Some("2Gi".into()),
            disks: vec![ObservedDisk {
                slot: "scsi0".into(),
                storage: "local-lvm".into(),
                size: Some("32Gi".into()),
            }],
            networks: vec![ObservedNetwork {
                slot: "net0".into(),
                model: NetworkModel::Virtio,
                bridge: Some("vmbr0".into()),
                vlan_tag: Some(20),
                mac: Some("BC:24:11:00:00:01".into()),
                firewall: true,
            }],
            cloud_init: Some(ObservedCloudInit {
                user: Some("ops".into()),
                ssh_keys: vec![],
                ip_configs: vec![ObservedIpConfig {
                    interface: "net0".into(),
                    ip: Some("10.0.0.5/24".into()),
                    gateway: Some("10.0.0.1".into()),
                    ip6: None,
                    gateway6: None,
                }],
                nameservers: vec!["1.1.1.1".into()],
                search_domain: None,
                storage: Some("local-lvm".into()),
                drive_slot: Some("ide2".into()),
            }),
            agent: Some(GuestAgent { enabled: true }),
            power_state: Some(PowerState::Running),
            tags: vec!["a".into(), "b".into()],
            description: Some("hand made".into()),
            on_boot: Some(true),
            scsi_controller: Some(ScsiController::VirtioScsiSingle),
            template: None,
        };
        assert_eq!(seen, want);
    }

    #[test]
    fn absent_keys_read_as_proxmox_defaults_or_nothing() {
        let marker_only = owner::marker_line("ns", "x", "u");
        let cases = [
            ("empty config", vm(&[]), Some("512Mi"), 1, None, None),
            (
                "odd memory, marker-only notes",
                vm(&[
                    ("memory", "1536"),
                    ("cores", "4"),
                    ("description", marker_only.as_str()),
                ]),
                Some("1536Mi"),
                4,
                None,
                None,
            ),
            (
                "unreadable memory, an unknown card model",
                vm(&[("memory", "lots"), ("net1", "weird=x,bridge=vmbr0")]),
                None,
                1,
                None,
                None,
            ),
        ];
        for (name, config, memory, cores, description, ci) in cases {
            let seen = super::config(&config, Power::Stopped);
            assert_eq!(seen.memory.as_deref(), memory, "{name}");
            assert_eq!(seen.cpu.map(|c| c.cores), Some(cores), "{name}");
            assert_eq!(seen.description, description, "{name}");
            assert_eq!(seen.cloud_init, ci, "{name}");
            assert!(seen.networks.is_empty(), "{name}");
            assert_eq!(seen.power_state, Some(PowerState::Stopped), "{name}");
        }
    }
}
