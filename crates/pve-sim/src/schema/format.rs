//! Registered ("named") string formats and their checks, with the messages
//! pve-common and qemu-server die with. Messages end in `\n` like Perl's
//! `die "...\n"`, because PVE puts `$@` verbatim after `invalid format - `.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{propstr, regex_matches};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Named {
    PveVmid,
    PveNode,
    PveStorageId,
    PveBridgeId,
    DnsName,
    Urlencoded,
    PveConfigid,
    PveConfigidList,
    PveTagList,
    AddressList,
    MacAddr,
    DiskSize,
    PveVolumeId,
    VolumeIdOrQmPath,
    VolumeIdOrAbsolutePath,
    PveStorageContent,
    PveStorageContentList,
    PveRealm,
    PvePoolid,
    PveTaskStatusTypeList,
    PveStartupOrder,
    PveHotplugFeatures,
    PveQmIpconfig,
    PveQmBoot,
    PveQmBootOrder,
    PveQmCicustom,
    PveVmCpuConf,
    PveQmSmbios1,
    PveQmHostpci,
    PveQmRng,
    Ipv4,
    Ipv6,
    Ipv4Config,
    Ipv6Config,
}

/// Content types a storage can hold.
pub const CONTENT_TYPES: &[&str] = &[
    "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import",
];

impl Named {
    /// The format's name in the PVE schema.
    pub fn name(self) -> &'static str {
        match self {
            Self::PveVmid => "pve-vmid",
            Self::PveNode => "pve-node",
            Self::PveStorageId => "pve-storage-id",
            Self::PveBridgeId => "pve-bridge-id",
            Self::DnsName => "dns-name",
            Self::Urlencoded => "urlencoded",
            Self::PveConfigid => "pve-configid",
            Self::PveConfigidList => "pve-configid-list",
            Self::PveTagList => "pve-tag-list",
            Self::AddressList => "address-list",
            Self::MacAddr => "mac-addr",
            Self::DiskSize => "disk-size",
            Self::PveVolumeId => "pve-volume-id",
            Self::VolumeIdOrQmPath => "pve-volume-id-or-qm-path",
            Self::VolumeIdOrAbsolutePath => "pve-volume-id-or-absolute-path",
            Self::PveStorageContent => "pve-storage-content",
            Self::PveStorageContentList => "pve-storage-content-list",
            Self::PveRealm => "pve-realm",
            Self::PvePoolid => "pve-poolid",
            Self::PveTaskStatusTypeList => "pve-task-status-type-list",
            Self::PveStartupOrder => "pve-startup-order",
            Self::PveHotplugFeatures => "pve-hotplug-features",
            Self::PveQmIpconfig => "pve-qm-ipconfig",
            Self::PveQmBoot => "pve-qm-boot",
            Self::PveQmBootOrder => "pve-qm-bootorder",
            Self::PveQmCicustom => "pve-qm-cicustom",
            Self::PveVmCpuConf => "pve-vm-cpu-conf",
            Self::PveQmSmbios1 => "pve-qm-smbios1",
            Self::PveQmHostpci => "pve-qm-hostpci",
            Self::PveQmRng => "pve-qm-rng",
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
            Self::Ipv4Config => "pve-ipv4-config",
            Self::Ipv6Config => "pve-ipv6-config",
        }
    }

    /// Checks a value; the error is the text after `invalid format - `.
    pub fn check(self, path: &str, v: &str) -> Result<(), String> {
        let ok = |cond: bool, msg: String| if cond { Ok(()) } else { Err(msg) };
        match self {
            Self::PveVmid => ok(
                regex_matches("[1-9][0-9]{2,8}", v),
                "value does not look like a valid VM ID\n".into(),
            ),
            Self::PveNode => ok(
                crate::config::is_node_name(v),
                "value does not look like a valid node name\n".into(),
            ),
            Self::PveStorageId => ok(
                is_storage_id(v),
                format!("storage ID '{v}' contains illegal characters\n"),
            ),
            Self::PveBridgeId => ok(
                regex_matches(r"[-_.\w\d]+", v),
                format!("invalid bridge ID '{v}'\n"),
            ),
            Self::DnsName => ok(
                is_dns_name(v),
                "value does not look like a valid DNS name\n".into(),
            ),
            Self::Urlencoded => ok(
                regex_matches(r"[-%a-zA-Z0-9_.!~*'()]*", v),
                format!("invalid urlencoded string: {v}\n"),
            ),
            Self::PveConfigid => ok(is_configid(v), format!("invalid configuration ID '{v}'\n")),
            Self::PveConfigidList => list(v, |id| {
                ok(
                    is_configid(id),
                    format!("invalid configuration ID '{id}'\n"),
                )
            }),
            Self::PveTagList => list(v, |t| {
                ok(
                    regex_matches(r"(?i)[a-z0-9_][a-z0-9_\-+.]*", t),
                    "invalid characters in tag\n".into(),
                )
            }),
            Self::AddressList => list(v, |a| {
                ok(
                    a.parse::<Ipv4Addr>().is_ok()
                        || a.parse::<Ipv6Addr>().is_ok()
                        || is_dns_name(a),
                    format!("value does not look like a valid address: {a}\n"),
                )
            }),
            Self::MacAddr => ok(
                regex_matches(r"(?i)[a-f0-9][02468ace](?::[a-f0-9]{2}){5}", v),
                "value does not look like a valid unicast MAC address\n".into(),
            ),
            Self::DiskSize => ok(
                parse_size(v).is_some(),
                format!("value does not look like a valid disk size: {v}\n"),
            ),
            Self::PveVolumeId => ok(
                is_volume_id(v),
                format!("unable to parse volume ID '{v}'\n"),
            ),
            Self::VolumeIdOrQmPath => ok(
                is_volume_id(v) || v == "none" || v == "cdrom" || v.starts_with('/'),
                format!("unable to parse volume ID '{v}'\n"),
            ),
            Self::VolumeIdOrAbsolutePath => ok(
                is_volume_id(v) || v.starts_with('/'),
                format!("unable to parse volume ID '{v}'\n"),
            ),
            Self::PveStorageContent => ok(
                CONTENT_TYPES.contains(&v),
                format!("invalid content type '{v}'\n"),
            ),
            Self::PveStorageContentList => list(v, |c| {
                ok(
                    CONTENT_TYPES.contains(&c),
                    format!("invalid content type '{c}'\n"),
                )
            }),
            Self::PveRealm => ok(is_realm(v), format!("invalid realm '{v}'\n")),
            Self::PvePoolid => ok(
                regex_matches(r"[A-Za-z0-9_\-]+(/[A-Za-z0-9_\-]+){0,2}", v),
                format!("invalid pool ID '{v}'\n"),
            ),
            Self::PveTaskStatusTypeList => list(v, |s| {
                ok(
                    regex_matches("(?i)ok|error|warning|unknown", s),
                    format!("invalid status '{s}'\n"),
                )
            }),
            Self::PveStartupOrder => ok(
                v.split(',')
                    .filter(|p| !p.trim().is_empty())
                    .all(|p| regex_matches(r"(order=)?\d+|up=\d+|down=\d+", p)),
                "unable to parse startup options\n".into(),
            ),
            Self::PveHotplugFeatures => ok(
                v == "0"
                    || v == "1"
                    || v.split(',').all(|f| {
                        ["network", "disk", "cpu", "memory", "usb", "cloudinit"].contains(&f)
                    }),
                format!("invalid hotplug feature '{v}'\n"),
            ),
            Self::PveQmIpconfig => propstr::IPCONFIG
                .parse(path, v)
                .and_then(|c| check_ipconfig(&c)),
            Self::PveQmBoot => propstr::BOOT.parse(path, v).map(drop),
            Self::PveQmHostpci => propstr::HOSTPCI.parse(path, v).map(drop),
            Self::PveQmRng => propstr::RNG.parse(path, v).map(drop),
            Self::PveQmBootOrder => list_sep(v, ';', |d| {
                ok(
                    regex_matches(
                        r"(ide|sata|scsi|virtio|net|efidisk|tpmstate|hostpci|usb)\d+",
                        d,
                    ),
                    format!("invalid boot device '{d}'\n"),
                )
            }),
            Self::PveQmCicustom => propstr::CICUSTOM.parse(path, v).map(drop),
            Self::PveVmCpuConf => propstr::CPU.parse(path, v).and_then(|c| check_vm_cpu(&c)),
            Self::PveQmSmbios1 => propstr::SMBIOS1.parse(path, v).map(drop),
            Self::Ipv4 => ok(
                v.parse::<Ipv4Addr>().is_ok(),
                "value does not look like a valid IPv4 address\n".into(),
            ),
            Self::Ipv6 => ok(
                v.parse::<Ipv6Addr>().is_ok(),
                "value does not look like a valid IPv6 address\n".into(),
            ),
            Self::Ipv4Config => ok(
                v == "dhcp" || v == "manual" || parse_cidr4(v).is_some(),
                "value does not look like a valid ipv4 network configuration\n".into(),
            ),
            Self::Ipv6Config => ok(
                ["auto", "dhcp", "manual"].contains(&v) || parse_cidr6(v).is_some(),
                "value does not look like a valid ipv6 network configuration\n".into(),
            ),
        }
    }
}

/// PVE's `split_list`: separators are `;`, `,`, whitespace and NUL.
pub fn split_list(v: &str) -> impl Iterator<Item = &str> {
    v.split(|c: char| c == ';' || c == ',' || c == '\0' || c.is_whitespace())
        .filter(|s| !s.is_empty())
}

fn list(v: &str, each: impl Fn(&str) -> Result<(), String>) -> Result<(), String> {
    split_list(v).try_for_each(each)
}

/// qemu-server's `validate_vm_cpu_conf`: a VM's own config may only set
/// the per-VM flags and never `reported-model`.
fn check_vm_cpu(cpu: &std::collections::BTreeMap<String, String>) -> Result<(), String> {
    let allowed = cpu.get("flags").is_none_or(|flags| {
        flags
            .split(';')
            .all(|f| propstr::VM_CPU_FLAGS.contains(&f.get(1..).unwrap_or_default()))
    });
    if !allowed {
        return Err(format!(
            "VM-specific CPU flags must be a subset of: {}\n",
            propstr::VM_CPU_FLAGS.join(", ")
        ));
    }
    if cpu.contains_key("reported-model") {
        return Err("Property 'reported-model' not allowed in VM-specific CPU config.\n".into());
    }
    Ok(())
}

fn list_sep(v: &str, sep: char, each: impl Fn(&str) -> Result<(), String>) -> Result<(), String> {
    v.split(sep).filter(|s| !s.is_empty()).try_for_each(each)
}

fn check_ipconfig(c: &std::collections::BTreeMap<String, String>) -> Result<(), String> {
    let ip = c.get("ip").map(String::as_str);
    if c.contains_key("gw") && matches!(ip, None | Some("dhcp") | Some("manual")) {
        return Err("gateway specified without specifying an IP address\n".into());
    }
    let ip6 = c.get("ip6").map(String::as_str);
    if c.contains_key("gw6") && matches!(ip6, None | Some("dhcp") | Some("auto") | Some("manual")) {
        return Err("gateway specified without specifying an IP address\n".into());
    }
    Ok(())
}

pub fn is_storage_id(v: &str) -> bool {
    regex_matches(r"(?i)[a-z][a-z0-9\-_.]*[a-z0-9]", v)
}

/// A realm name; PVE's API token names follow the same syntax
/// (`token_subid_regex` is the realm regex).
pub fn is_realm(v: &str) -> bool {
    regex_matches(r"[A-Za-z][A-Za-z0-9.\-_]+", v)
}

pub fn is_configid(v: &str) -> bool {
    regex_matches(r"(?i)[a-z][a-z0-9_-]+", v)
}

pub fn is_dns_name(v: &str) -> bool {
    regex_matches(
        r"(([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)\.)*([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)",
        v,
    )
}

/// `storage:volname` (pve-storage `parse_volume_id`).
pub fn is_volume_id(v: &str) -> bool {
    v.split_once(':')
        .is_some_and(|(s, name)| is_storage_id(s) && !name.is_empty())
}

/// PVE's `parse_size`: `N[.N][KMGT][iB]` in bytes (the `iB` spellings since
/// PVE 9). Whole numbers stay exact, as Perl keeps integers; fractions go
/// through a double, as in Perl.
pub fn parse_size(v: &str) -> Option<u64> {
    if !regex_matches(r"[0-9]+(\.[0-9]+)?([KMGT](iB)?)?", v) {
        return None;
    }
    let number_end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(number_end);
    let mult: u64 = match unit.chars().next() {
        Some('K') => 1 << 10,
        Some('M') => 1 << 20,
        Some('G') => 1 << 30,
        Some('T') => 1 << 40,
        _ => 1,
    };
    if let Some(bytes) = num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult)) {
        return Some(bytes);
    }
    let n: f64 = num.parse().ok()?;
    Some((n * mult as f64) as u64)
}

/// PVE's `format_size`: the largest unit that represents the size exactly.
pub fn format_size(bytes: u64) -> String {
    let units = ["K", "M", "G", "T"];
    let mut value = bytes;
    let mut unit = "";
    for u in units {
        if !value.is_multiple_of(1024) || value == 0 {
            break;
        }
        value /= 1024;
        unit = u;
    }
    format!("{value}{unit}")
}

pub fn parse_cidr4(v: &str) -> Option<(Ipv4Addr, u8)> {
    parse_cidr(v, 32)
}

pub fn parse_cidr6(v: &str) -> Option<(Ipv6Addr, u8)> {
    parse_cidr(v, 128)
}

/// `address/prefix` with a prefix length from 8 to `max_prefix`.
fn parse_cidr<A: std::str::FromStr>(v: &str, max_prefix: u8) -> Option<(A, u8)> {
    let (ip, prefix) = v.split_once('/')?;
    let prefix: u8 = prefix.parse().ok()?;
    (8..=max_prefix).contains(&prefix).then_some(())?;
    Some((ip.parse().ok()?, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_trip_like_pve() {
        assert_eq!(parse_size("32G"), Some(32 << 30));
        assert_eq!(parse_size("1.5G"), Some(3 << 29));
        assert_eq!(parse_size("32GiB"), Some(32 << 30));
        assert_eq!(parse_size("9153732338166021"), Some(9_153_732_338_166_021));
        assert_eq!(parse_size("32Gi"), None);
        assert_eq!(format_size(3584 << 20), "3584M");
        assert_eq!(format_size(32 << 30), "32G");
        assert_eq!(format_size(4 << 20), "4M");
        assert_eq!(format_size(1000), "1000");
    }

    #[test]
    fn sshkeys_must_be_fully_percent_encoded() {
        assert!(
            Named::Urlencoded
                .check("sshkeys", "ssh-ed25519%20AAAA%2B%3D")
                .is_ok()
        );
        let err = Named::Urlencoded
            .check("sshkeys", "ssh-ed25519 AAAA")
            .unwrap_err();
        assert_eq!(err, "invalid urlencoded string: ssh-ed25519 AAAA\n");
    }

    #[test]
    fn ipconfig_gateway_needs_static_ip() {
        assert!(
            Named::PveQmIpconfig
                .check("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1")
                .is_ok()
        );
        assert!(
            Named::PveQmIpconfig
                .check("ipconfig0", "ip=dhcp,gw=10.0.0.1")
                .is_err()
        );
        assert!(
            Named::PveQmIpconfig
                .check("ipconfig0", "ip=10.0.0.5")
                .is_err()
        );
    }
}
