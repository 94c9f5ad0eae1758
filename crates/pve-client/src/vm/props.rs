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

fn bios() -> impl Strategy<Value = Bios> {
    prop_oneof![Just(Bios::SeaBios), Just(Bios::Ovmf)]
}

fn machine_type() -> impl Strategy<Value = MachineType> {
    let chipset = prop_oneof![
        Just(Chipset::I440fx),
        Just(Chipset::Q35),
        Just(Chipset::Virt)
    ];
    (
        chipset,
        option::of("[0-9]{1,2}\\.[0-9]{1,2}(\\.[0-9])?(\\+pve[0-9])?"),
        any::<bool>(),
    )
        .prop_map(|(chipset, version, pxe)| MachineType {
            chipset,
            pxe: pxe && chipset != Chipset::Virt && version.is_some(),
            version,
        })
}

fn machine() -> impl Strategy<Value = Machine> {
    (
        option::of(machine_type()),
        option::of(prop_oneof![Just(Viommu::Intel), Just(Viommu::Virtio)]),
        options("(aw-bits|enable-s3|enable-s4)"),
    )
        .prop_map(|(type_, viommu, options)| Machine {
            type_,
            viommu,
            options,
        })
}

/// A drive as `efidisk0` and `tpmstate0` hold it (no `media`).
fn volume_drive() -> impl Strategy<Value = Drive> {
    drive().prop_map(|d| Drive { media: None, ..d })
}

fn efi_disk() -> impl Strategy<Value = EfiDisk> {
    (
        volume_drive(),
        option::of(prop_oneof![Just(EfiType::TwoMb), Just(EfiType::FourMb)]),
        option::of(any::<bool>()),
    )
        .prop_map(|(drive, efitype, pre_enrolled_keys)| EfiDisk {
            drive,
            efitype,
            pre_enrolled_keys,
        })
}

fn tpm_state() -> impl Strategy<Value = TpmState> {
    (
        volume_drive(),
        option::of(prop_oneof![Just(TpmVersion::V1_2), Just(TpmVersion::V2_0)]),
    )
        .prop_map(|(drive, version)| TpmState { drive, version })
}

fn serial_port() -> impl Strategy<Value = SerialPort> {
    prop_oneof![
        Just(SerialPort::Socket),
        "/dev/tty[A-Z]{1,3}[0-9]".prop_map(SerialPort::Device),
    ]
}

fn vga() -> impl Strategy<Value = Vga> {
    let type_ = prop_oneof![
        "(cirrus|qxl|qxl2|qxl3|qxl4|none|std|virtio|virtio-gl|vmware|serial[0-3])"
            .prop_map(|t| t.parse::<VgaType>().unwrap()),
    ];
    (
        option::of(type_),
        option::of(4..=512u32),
        options("(clipboard)"),
    )
        .prop_map(|(type_, memory, options)| Vga {
            type_,
            memory,
            options,
        })
}

fn startup() -> impl Strategy<Value = Startup> {
    (
        option::of(any::<u32>()),
        option::of(any::<u32>()),
        option::of(any::<u32>()),
    )
        .prop_map(|(order, up, down)| Startup { order, up, down })
}

fn host_pci() -> impl Strategy<Value = HostPci> {
    let host = "0000:0[0-9]:00\\.[0-7]";
    let mapping = "[a-z][a-z0-9_-]{0,8}";
    (
        prop_oneof![
            (Just(None::<String>), mapping.prop_map(Some)),
            (host.prop_map(Some), option::of(mapping)),
        ],
        option::of(any::<bool>()),
        option::of(any::<bool>()),
        option::of(any::<bool>()),
        options("(mdev|romfile|device-id)"),
    )
        .prop_map(|((host, mapping), pcie, rombar, x_vga, options)| HostPci {
            host,
            mapping,
            pcie,
            rombar,
            x_vga,
            options,
        })
}

fn usb() -> impl Strategy<Value = Usb> {
    let mapping = "[a-z][a-z0-9_-]{0,8}";
    (
        prop_oneof![
            (Just(None::<String>), mapping.prop_map(Some)),
            (
                "(spice|[0-9]-[0-9](\\.[0-9])?|[0-9a-f]{4}:[0-9a-f]{4})".prop_map(Some),
                Just(None)
            ),
        ],
        option::of(any::<bool>()),
    )
        .prop_map(|((host, mapping), usb3)| Usb {
            host,
            mapping,
            usb3,
            options: BTreeMap::new(),
        })
}

fn rng() -> impl Strategy<Value = super::Rng> {
    (
        select(RngSource::ALL.to_vec()),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
    )
        .prop_map(|(source, max_bytes, period)| super::Rng {
            source,
            max_bytes,
            period,
        })
}

fn hotplug() -> impl Strategy<Value = Hotplug> {
    proptest::sample::subsequence(HotplugFeature::ALL.to_vec(), 0..=6)
        .prop_map(|f| Hotplug(f.into_iter().collect()))
}

// --- Text close to valid, to reach deep into the parsers ---------------

const DRIVE_NOISE: &str = "( ?(none|cdrom|/dev/sd[ab]|local(-lvm)?:(vm-1-disk-0|vm-1-cloudinit|cloudinit|[0-9]{1,2}(\\.[0-9]?)?|iso/x\\.iso)|1x:y|x)? ?(,( ?(file|volume|media|size|import-from|ssd|cache) ?= ?(disk|cdrom|[0-9]{1,3}(\\.[0-9])?([KMGT](iB)?)?|local:import/a\\.qcow2|/a|on|1)?)?){0,4})";
const NET_NOISE: &str = "((model=)?(virtio|e1000|tulip)(=([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2})?)?(,(bridge|tag|firewall|link_down|mtu|macaddr|queues|virtio)=(vmbr0|[0-9]{1,5}|on|no|bc:24:11:00:00:01|x y)){0,4}";
const IPCONFIG_NOISE: &str = "((ip|gw|ip6|gw6|mtu)=(dhcp|auto|10\\.0\\.0\\.[0-9]{1,3}(/[0-9]{1,3})?|fd00::[0-9a-f]{1,4}(/[0-9]{1,3})?)?,?){0,5}";
const AGENT_NOISE: &str = "((enabled=)?(1|0|on|off|yes|x))?(,(fstrim_cloned_disks|freeze-fs|freeze-fs-on-backup|guest-fsfreeze|type|future)=(1|0|virtio|isa|x)){0,3}";
const BOOT_NOISE: &str =
    "([acdnx]{0,5})?(,order=((scsi|ide|net|efidisk|usb|x)[0-9]{1,2}[;, ]?){0,4})?(,legacy=c)?";
const SSHKEYS_NOISE: &str = "(ssh-ed25519|%20|%0A|%0D|%2B|%FF|%C3%A9|%|[A-Za-z0-9._~!*'()-]){0,30}";

const MACHINE_NOISE: &str = "((type=)?(pc|q35|virt|pc-(i440fx-|q35-)?[0-9x]{1,2}(\\.[0-9]{1,2}){0,2}(\\+pve[0-9x])?)(\\.pxe)?)?(,(viommu|aw-bits|type)=(intel|virtio|amd|39)){0,2}";
const VOLUME_NOISE: &str = "(local(-lvm)?:(vm-1-disk-0|[0-9])|none)?(,(efitype|pre-enrolled-keys|version|media|size|ms-cert)=(2m|4m|8m|1|0|v1\\.2|v2\\.0|v3|cdrom|528K|2023k)){0,3}";
const DEVICE_NOISE: &str = "((host=)?(0000:01:00\\.0|spice|1-2|x))?(,(mapping|pcie|rombar|x-vga|usb3|mdev)=(gpu|1x|1|0|on|maybe)){0,3}";

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
    fn firmware_values(
        b in bios(),
        t in machine_type(),
        m in machine(),
        e in efi_disk(),
        v in tpm_state(),
        s in noise(MACHINE_NOISE),
        d in noise(VOLUME_NOISE),
    ) {
        round_trip(&b, str::parse)?;
        round_trip(&t, str::parse)?;
        round_trip(&m, str::parse)?;
        round_trip(&e, str::parse)?;
        round_trip(&v, str::parse)?;
        stable(&s, |s| s.parse::<Machine>())?;
        stable(&s, |s| s.parse::<MachineType>())?;
        stable(&d, |s| s.parse::<EfiDisk>())?;
        stable(&d, |s| s.parse::<TpmState>())?;
    }

    #[test]
    fn console_values(
        p in serial_port(),
        g in vga(),
        u in startup(),
        s in noise("(socket|/dev/tty[S0-9]{0,2}|serial[0-5]|(type=)?(std|virtio|qxl9)(,(memory|clipboard)=(2|64|vnc|x)){0,2})"),
        o in noise("((order=)?[0-9x]{1,3})?(,(up|down|order|later)=[0-9x-]{1,3}){0,3}"),
    ) {
        round_trip(&p, str::parse)?;
        round_trip(&g, str::parse)?;
        round_trip(&u, str::parse)?;
        stable(&s, |s| s.parse::<SerialPort>())?;
        stable(&s, |s| s.parse::<Vga>())?;
        stable(&o, |s| s.parse::<Startup>())?;
    }

    #[test]
    fn device_values(
        pci in host_pci(),
        dev in usb(),
        r in rng(),
        h in hotplug(),
        s in noise(DEVICE_NOISE),
        q in noise("((source=)?/dev/(urandom|random|hwrng|zero))?(,(max_bytes|period|x)=[0-9x]{1,4}){0,2}|[01]|(network|disk|cpu|memory|usb|cloudinit|sound)([,; ](network|disk|usb)){0,3}"),
    ) {
        round_trip(&pci, str::parse)?;
        round_trip(&dev, str::parse)?;
        round_trip(&r, str::parse)?;
        round_trip(&h, str::parse)?;
        stable(&s, |s| s.parse::<HostPci>())?;
        stable(&s, |s| s.parse::<Usb>())?;
        stable(&q, |s| s.parse::<super::Rng>())?;
        stable(&q, |s| s.parse::<Hotplug>())?;
    }

    #[test]
    fn a_config_reads_any_map(raw in btree_map("(scsi0|ide2|net0|ipconfig0|agent|boot|tags|sshkeys|memory|cpu|scsihw|onboot)", "\\PC{0,30}", 0..8)) {
        // The typed view never panics and keeps every key raw.
        let c = VmConfig::from_raw(raw.clone());
        prop_assert_eq!(c.raw, raw);
    }
}
