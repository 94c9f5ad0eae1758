//! Property tests of every parse/render pair of the model:
//!
//! * parsing never panics, on any text and on text close to valid;
//! * a value written and read back is the same value (render → parse);
//! * a text that parses, written and read again, reads the same
//!   (parse → render → parse is stable).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::{Debug, Display};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;

use super::value::bool_text;
use super::*;

/// What every pair must satisfy for a text `s`: no panic, and if it
/// parses, its rendering parses to the same value.
fn stable<T, E>(s: &str, parse: impl Fn(&str) -> Result<T, E>) -> Result<(), TestCaseError>
where
    T: Display + PartialEq + Debug,
{
    if let Ok(v) = parse(s) {
        let text = v.to_string();
        let again = parse(&text).ok();
        prop_assert_eq!(again.as_ref(), Some(&v), "{:?} → {:?}", s, text);
    }
    Ok(())
}

/// A value rendered and read back is itself.
fn round_trip<T, E>(v: &T, parse: impl Fn(&str) -> Result<T, E>) -> Result<(), TestCaseError>
where
    T: Display + PartialEq + Debug,
    E: Debug,
{
    let text = v.to_string();
    match parse(&text) {
        Ok(back) => prop_assert_eq!(&back, v, "via {:?}", text),
        Err(e) => prop_assert!(false, "{:?} does not read back: {:?}", text, e),
    }
    Ok(())
}

// --- Strategies for valid values -------------------------------------

fn storage() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9.-]{0,8}[a-z0-9]"
}

fn drive_file() -> impl Strategy<Value = DriveFile> {
    let volume = "(vm-[0-9]{1,4}-disk-[0-9]|iso/[a-z]{1,6}\\.iso|[0-9]{1,3}/vm-[0-9]{1,3}-disk-[0-9]\\.qcow2|vm-[0-9]{1,3}-cloudinit)";
    prop_oneof![
        Just(DriveFile::None),
        Just(DriveFile::HostCdrom),
        "/dev/[a-z]{1,5}".prop_map(DriveFile::Path),
        (storage(), any::<u64>()).prop_map(|(storage, gib)| DriveFile::Alloc { storage, gib }),
        storage().prop_map(|storage| DriveFile::AllocCloudInit { storage }),
        (storage(), volume).prop_map(|(storage, name)| DriveFile::Volume { storage, name }),
    ]
}

fn options(keys: &'static str) -> impl Strategy<Value = BTreeMap<String, String>> {
    btree_map(keys, "[a-z0-9][a-z0-9.+]{0,5}", 0..3)
}

fn drive() -> impl Strategy<Value = Drive> {
    let source = prop_oneof![
        (storage(), "import/[a-z]{1,8}\\.qcow2").prop_map(|(s, n)| format!("{s}:{n}")),
        "/tmp/[a-z]{1,6}",
    ];
    (
        drive_file(),
        option::of(prop_oneof![Just(Media::Disk), Just(Media::Cdrom)]),
        option::of(any::<u64>()),
        option::of(source),
        options("(cache|discard|ssd|iothread|backup|serial)"),
    )
        .prop_map(|(file, media, size, import_from, options)| Drive {
            file,
            media,
            size,
            import_from,
            options,
        })
}

fn mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(|mut b| {
        b[0] &= 0xfe;
        MacAddr(b)
    })
}

fn nic() -> impl Strategy<Value = Nic> {
    (
        select(NicModel::ALL),
        option::of(mac()),
        option::of("vmbr[0-9]{1,2}"),
        option::of(1..=4094u16),
        any::<(bool, bool)>(),
        option::of(1..=65520u16),
        options("(queues|rate|trunks)"),
    )
        .prop_map(
            |(model, mac, bridge, tag, (firewall, link_down), mtu, options)| Nic {
                model,
                mac,
                bridge,
                tag,
                firewall,
                link_down,
                mtu,
                options,
            },
        )
}

fn ip_config() -> impl Strategy<Value = IpConfig> {
    let v4 = prop_oneof![
        Just(Ipv4Config::Dhcp),
        (any::<Ipv4Addr>(), 0..=32u8)
            .prop_map(|(addr, prefix)| Ipv4Config::Static(Cidr { addr, prefix })),
    ];
    let v6 = prop_oneof![
        Just(Ipv6Config::Dhcp),
        Just(Ipv6Config::Auto),
        (any::<Ipv6Addr>(), 0..=128u8)
            .prop_map(|(addr, prefix)| Ipv6Config::Static(Cidr { addr, prefix })),
    ];
    (
        option::of((v4, option::of(any::<Ipv4Addr>()))),
        option::of((v6, option::of(any::<Ipv6Addr>()))),
    )
        .prop_map(|(v4, v6)| IpConfig {
            ip: v4.map(|(ip, _)| ip),
            gw: v4.and_then(|(_, gw)| gw),
            ip6: v6.map(|(ip, _)| ip),
            gw6: v6.and_then(|(_, gw)| gw),
        })
}

fn ssh_keys() -> impl Strategy<Value = SshKeys> {
    let typical =
        "(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256) [A-Za-z0-9+/]{4,40}={0,2}( [a-z@.-]{1,12})?";
    vec(prop_oneof![typical, "\\PC{0,30}"], 0..4).prop_map(SshKeys::new)
}

fn nameservers() -> impl Strategy<Value = Nameservers> {
    let server = prop_oneof![
        any::<IpAddr>().prop_map(|ip| ip.to_string()),
        "[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?(\\.[a-z]{2,5}){0,2}",
    ];
    vec(server, 0..4).prop_map(Nameservers::new)
}

fn tags() -> impl Strategy<Value = Tags> {
    vec("[a-zA-Z0-9_][a-zA-Z0-9_+.-]{0,10}", 0..5).prop_map(Tags::new)
}

fn agent() -> impl Strategy<Value = AgentConfig> {
    (
        any::<bool>(),
        option::of(any::<bool>()),
        option::of(any::<bool>()),
        option::of(prop_oneof![Just(AgentType::Virtio), Just(AgentType::Isa)]),
        options("(x-future|newer)"),
    )
        .prop_map(
            |(enabled, fstrim_cloned_disks, freeze_fs, type_, options)| AgentConfig {
                enabled,
                fstrim_cloned_disks,
                freeze_fs,
                type_,
                options,
            },
        )
}

fn cpu() -> impl Strategy<Value = CpuConfig> {
    (
        option::of("[a-zA-Z0-9_.+-]{1,16}"),
        options("(flags|hidden|phys-bits|hv-vendor-id)"),
    )
        .prop_map(|(cputype, options)| CpuConfig { cputype, options })
}

fn drive_key() -> impl Strategy<Value = DriveKey> {
    (select(Bus::ALL.to_vec()), 0..31u32)
        .prop_map(|(bus, i)| DriveKey::new(bus, i % bus.slots()).unwrap())
}

fn boot() -> impl Strategy<Value = Boot> {
    let device = prop_oneof![
        drive_key().prop_map(|k| k.to_string()),
        "(net|usb|hostpci)[0-9]{1,2}",
    ];
    (option::of("[acdn]{1,4}"), vec(device, 0..4))
        .prop_map(|(legacy, order)| Boot { legacy, order })
}

// --- Text close to valid, to reach deep into the parsers ---------------

const DRIVE_NOISE: &str = "( ?(none|cdrom|/dev/sd[ab]|local(-lvm)?:(vm-1-disk-0|vm-1-cloudinit|cloudinit|[0-9]{1,2}(\\.[0-9]?)?|iso/x\\.iso)|1x:y|x)? ?(,( ?(file|volume|media|size|import-from|ssd|cache) ?= ?(disk|cdrom|[0-9]{1,3}(\\.[0-9])?([KMGT](iB)?)?|local:import/a\\.qcow2|/a|on|1)?)?){0,4})";
const NET_NOISE: &str = "((model=)?(virtio|e1000|tulip)(=([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2})?)?(,(bridge|tag|firewall|link_down|mtu|macaddr|queues|virtio)=(vmbr0|[0-9]{1,5}|on|no|bc:24:11:00:00:01|x y)){0,4}";
const IPCONFIG_NOISE: &str = "((ip|gw|ip6|gw6|mtu)=(dhcp|auto|10\\.0\\.0\\.[0-9]{1,3}(/[0-9]{1,3})?|fd00::[0-9a-f]{1,4}(/[0-9]{1,3})?)?,?){0,5}";
const AGENT_NOISE: &str = "((enabled=)?(1|0|on|off|yes|x))?(,(fstrim_cloned_disks|freeze-fs|freeze-fs-on-backup|guest-fsfreeze|type|future)=(1|0|virtio|isa|x)){0,3}";
const BOOT_NOISE: &str =
    "([acdnx]{0,5})?(,order=((scsi|ide|net|efidisk|usb|x)[0-9]{1,2}[;, ]?){0,4})?(,legacy=c)?";
const SSHKEYS_NOISE: &str = "(ssh-ed25519|%20|%0A|%0D|%2B|%FF|%C3%A9|%|[A-Za-z0-9._~!*'()-]){0,30}";

/// Any text, or (more often) text shaped like the value.
fn noise(pattern: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![1 => any::<String>(), 3 => pattern]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sizes(bytes in any::<u64>(), s in noise("\\+?[0-9]{0,22}(\\.[0-9]{0,30})?([KMGTk]|[KMGT]iB)?")) {
        prop_assert_eq!(parse_size(&format_size(bytes)), Some(bytes));
        round_trip(&DiskSize::Grow(bytes), str::parse)?;
        round_trip(&DiskSize::To(bytes), str::parse)?;
        stable(&s, |s| s.parse::<DiskSize>())?;
        if let Some(b) = parse_size(&s) {
            prop_assert_eq!(parse_size(&format_size(b)), Some(b));
        }
    }

    #[test]
    fn drive_keys(key in drive_key(), s in noise("(ide|sata|scsi|virtio|net)[0-9]{1,3}")) {
        round_trip(&key, str::parse)?;
        stable(&s, |s| s.parse::<DriveKey>())?;
    }

    #[test]
    fn drives(d in drive(), s in noise(DRIVE_NOISE)) {
        round_trip(&d, Drive::parse)?;
        round_trip(&d.file, str::parse)?;
        stable(&s, Drive::parse)?;
    }

    #[test]
    fn nics(n in nic(), s in noise(NET_NOISE)) {
        round_trip(&n, Nic::parse)?;
        round_trip(&n.model, str::parse)?;
        if let Some(mac) = &n.mac {
            round_trip(mac, str::parse)?;
        }
        stable(&s, Nic::parse)?;
        stable(&s, |s| s.parse::<MacAddr>())?;
    }

    #[test]
    fn ip_configs(c in ip_config(), s in noise(IPCONFIG_NOISE)) {
        round_trip(&c, IpConfig::parse)?;
        if let Some(ip) = &c.ip {
            round_trip(ip, str::parse)?;
        }
        if let Some(ip6) = &c.ip6 {
            round_trip(ip6, str::parse)?;
        }
        stable(&s, IpConfig::parse)?;
    }

    #[test]
    fn ssh_keys_values(k in ssh_keys(), s in noise(SSHKEYS_NOISE)) {
        round_trip(&k, SshKeys::parse)?;
        stable(&s, SshKeys::parse)?;
    }

    #[test]
    fn nameserver_lists(n in nameservers(), s in noise("([0-9.]{1,15}|[a-z-]{1,8}|fd00::1)([ ,;\\x00]{1,2}[0-9a-z.:-]{1,10}){0,3}")) {
        round_trip(&n, Nameservers::parse)?;
        stable(&s, Nameservers::parse)?;
    }

    #[test]
    fn tag_lists(t in tags(), s in noise("([a-zA-Z0-9_+.-]{0,6}[ ,;\\x00]{0,2}){0,5}")) {
        round_trip(&t, |s| s.parse::<Tags>())?;
        stable(&s, |s| s.parse::<Tags>())?;
    }

    #[test]
    fn agents(a in agent(), s in noise(AGENT_NOISE)) {
        round_trip(&a, str::parse)?;
        stable(&s, |s| s.parse::<AgentConfig>())?;
        // The lenient reading agrees with the strict one where both read.
        let lenient = AgentConfig::parse(&s);
        if let Ok(strict) = s.parse::<AgentConfig>() {
            prop_assert_eq!(lenient, strict);
        }
    }

    #[test]
    fn cpus(c in cpu(), s in noise("((cputype=)?[a-z0-9-]{0,8})?(,(flags|hidden|cputype)=[a-z0-9+;-]{0,6}){0,3}")) {
        round_trip(&c, str::parse)?;
        stable(&s, |s| s.parse::<CpuConfig>())?;
    }

    #[test]
    fn boots(b in boot(), s in noise(BOOT_NOISE)) {
        round_trip(&b, str::parse)?;
        stable(&s, |s| s.parse::<Boot>())?;
    }

    #[test]
    fn scalars(
        hw in select(ScsiHw::ALL.to_vec()),
        text in "\\PC{0,200}",
        mib in any::<u64>(),
        flag in any::<bool>(),
        s in noise("(current=)?[0-9]{0,21}(,x=1)?|virtio-scsi-(pci|single)|lsi|on|off"),
    ) {
        round_trip(&hw, str::parse)?;
        round_trip(&Description::from(text), str::parse)?;
        prop_assert_eq!(parse_memory(&mib.to_string()), Ok(mib));
        prop_assert_eq!(parse_bool(bool_text(flag)), Some(flag));
        stable(&s, |s| s.parse::<ScsiHw>())?;
        stable(&s, |s| s.parse::<Description>())?;
        if let Ok(m) = parse_memory(&s) {
            prop_assert_eq!(parse_memory(&m.to_string()), Ok(m));
        }
        if let Some(b) = parse_bool(&s) {
            prop_assert_eq!(parse_bool(bool_text(b)), Some(b));
        }
    }

    #[test]
    fn a_config_reads_any_map(raw in btree_map("(scsi0|ide2|net0|ipconfig0|agent|boot|tags|sshkeys|memory|cpu|scsihw|onboot)", "\\PC{0,30}", 0..8)) {
        // The typed view never panics and keeps every key raw.
        let c = VmConfig::from_raw(raw.clone());
        prop_assert_eq!(c.raw, raw);
    }
}
