//! The container's config as `status.atProvider` shows it, in the shape of
//! `spec.forProvider`. Pure, and read from the config the pass already
//! has: showing it costs no request.

use pve_client::lxc::{ContainerConfig, ContainerNet, ContainerVolume, Features};
use pve_client::vm::{Tags, net_index, parse_bool};

use crate::api::container::{
    ContainerObserved, ObservedContainerCpu, ObservedContainerDns, ObservedContainerNetwork,
    ObservedFeatures, ObservedMountPoint, ObservedRootFs,
};
use crate::api::vm::{PowerState, quantity_of};
use crate::reconcile::common::owner::user_part;

const MIB: u64 = 1 << 20;
/// PVE's default memory and swap of a container, MiB.
const DEFAULT_MIB: u64 = 512;

/// What `config` shows; `running` is the container's power state.
pub fn config(config: &ContainerConfig, running: bool) -> ContainerObserved {
    let mib = |key: &str| {
        config
            .get(key)
            .map_or(Some(DEFAULT_MIB), |v| v.trim().parse::<u64>().ok())
            .map(|m| quantity_of(m * MIB))
    };
    // Absent keys are off, PVE's default.
    let features = config
        .get("features")
        .map(Features::parse)
        .unwrap_or_default();
    ContainerObserved {
        hostname: config.get("hostname").map(str::to_owned),
        cpu: config
            .get("cores")
            .and_then(|c| c.trim().parse().ok())
            .map(|cores| ObservedContainerCpu { cores }),
        memory: mib("memory"),
        swap: mib("swap"),
        rootfs: config.get("rootfs").map(|r| ObservedRootFs {
            storage: ContainerVolume::observed_storage(r),
            size: ContainerVolume::observed_size(r).map(quantity_of),
        }),
        networks: config
            .raw
            .iter()
            .filter(|(key, _)| net_index(key).is_some())
            .map(|(key, value)| {
                let net = ContainerNet::parse(value);
                ObservedContainerNetwork {
                    slot: key.clone(),
                    name: net.name,
                    bridge: net.bridge,
                    vlan: net.tag,
                    ip: net.ip,
                    gateway: net.gw,
                    ip6: net.ip6,
                    firewall: net.firewall.unwrap_or(false),
                }
            })
            .collect(),
        unprivileged: Some(config.get("unprivileged").and_then(parse_bool) == Some(true)),
        features: Some(ObservedFeatures {
            nesting: features.nesting,
            keyctl: features.keyctl,
            fuse: features.fuse,
        }),
        start_on_boot: Some(config.get("onboot").and_then(parse_bool) == Some(true)),
        power_state: Some(if running {
            PowerState::Running
        } else {
            PowerState::Stopped
        }),
        tags: config
            .get("tags")
            .map(|t| Tags::parse(t).as_slice().to_vec())
            .unwrap_or_default(),
        description: config
            .get("description")
            .map(user_part)
            .filter(|d| !d.is_empty()),
        dns: dns(config),
        mount_points: config
            .raw
            .iter()
            .filter(|(key, _)| {
                key.strip_prefix("mp")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(|(key, value)| ObservedMountPoint {
                slot: key.clone(),
                storage: ContainerVolume::observed_storage(value),
                size: ContainerVolume::observed_size(value).map(quantity_of),
                path: ContainerVolume::observed_path(value),
            })
            .collect(),
    }
}

/// `nameserver` (space-separated) and `searchdomain`, when either is set
/// (unset: the container uses its host's).
fn dns(config: &ContainerConfig) -> Option<ObservedContainerDns> {
    let nameservers: Vec<String> = config
        .get("nameserver")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let search_domain = config.get("searchdomain").map(str::to_owned);
    (!nameservers.is_empty() || search_domain.is_some()).then_some(ObservedContainerDns {
        nameservers,
        search_domain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::common::owner::{description, marker_line_of};

    fn ct(pairs: &[(&str, &str)]) -> ContainerConfig {
        ContainerConfig {
            digest: Some("d".into()),
            raw: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn a_config_reads_as_the_spec_writes_it() {
        let marker = marker_line_of("ProxmoxContainer", "ns", "web", "u-1");
        let notes = description(Some("hand made"), &marker);
        let seen = config(
            &ct(&[
                ("hostname", "web"),
                ("cores", "2"),
                ("memory", "1024"),
                ("swap", "256"),
                ("rootfs", "local-lvm:vm-200-disk-0,size=8G"),
                (
                    "net0",
                    "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:02,ip=dhcp,type=veth",
                ),
                ("unprivileged", "1"),
                ("features", "nesting=1"),
                ("onboot", "1"),
                ("tags", "web"),
                ("description", notes.as_str()),
                ("nameserver", "10.0.0.53 9.9.9.9"),
                ("searchdomain", "lab.example"),
                ("mp0", "local-lvm:vm-200-disk-1,mp=/data,size=2G"),
                ("mp1", "/mnt/host,mp=/shared"),
            ]),
            true,
        );
        let want = ContainerObserved {
            hostname: Some("web".into()),
            cpu: Some(ObservedContainerCpu { cores: 2 }),
            memory: Some("1Gi".into()),
            swap: Some("256Mi".into()),
            rootfs: Some(ObservedRootFs {
                storage: Some("local-lvm".into()),
                size: Some("8Gi".into()),
            }),
            networks: vec![ObservedContainerNetwork {
                slot: "net0".into(),
                name: "eth0".into(),
                bridge: Some("vmbr0".into()),
                vlan: None,
                ip: Some("dhcp".into()),
                gateway: None,
                ip6: None,
                firewall: false,
            }],
            unprivileged: Some(true),
            features: Some(ObservedFeatures {
                nesting: true,
                keyctl: false,
                fuse: false,
            }),
            start_on_boot: Some(true),
            power_state: Some(PowerState::Running),
            tags: vec!["web".into()],
            description: Some("hand made".into()),
            dns: Some(ObservedContainerDns {
                nameservers: vec!["10.0.0.53".into(), "9.9.9.9".into()],
                search_domain: Some("lab.example".into()),
            }),
            mount_points: vec![
                ObservedMountPoint {
                    slot: "mp0".into(),
                    storage: Some("local-lvm".into()),
                    size: Some("2Gi".into()),
                    path: Some("/data".into()),
                },
                ObservedMountPoint {
                    slot: "mp1".into(),
                    storage: None,
                    size: None,
                    path: Some("/shared".into()),
                },
            ],
        };
        assert_eq!(seen, want);
    }

    #[test]
    fn absent_keys_read_as_pve_defaults_or_nothing() {
        let seen = config(&ct(&[("memory", "lots")]), false);
        assert_eq!(seen.memory, None, "unreadable memory");
        assert_eq!(seen.swap.as_deref(), Some("512Mi"), "default swap");
        assert_eq!(seen.cpu, None, "no cores: no limit, nothing to copy");
        assert_eq!(seen.unprivileged, Some(false));
        assert_eq!(seen.start_on_boot, Some(false));
        assert_eq!(seen.power_state, Some(PowerState::Stopped));
        assert_eq!(seen.rootfs, None);
        assert_eq!(seen.description, None);
        assert_eq!(seen.dns, None, "the host's DNS");
        assert!(seen.mount_points.is_empty());
    }
}
