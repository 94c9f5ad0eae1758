//! The spec's firmware, machine, console, devices, protection and startup
//! as managed config keys: what each key should hold, when an observed
//! value already says so (absent = Proxmox's default), and how it is set.
//!
//! Each [`HwWant`] is one key, carried in the plan's [`super::compare::Want`]
//! list, so it is created with the VM, compared and corrected like every
//! other managed key, and reported in `pendingChanges` while Proxmox keeps
//! it for the next start. The EFI disk and the TPM state are volumes, not
//! plain values: see [`volumes`].

pub(super) mod volumes;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use pve_client::vm::{
    Bios, Chipset, CpuConfig, HostPci, Hotplug, HotplugFeature, Machine, MachineType, Rng,
    RngSource, SerialPort, Startup, Usb, Vga, VgaType, Viommu, defaults, parse_bool,
};

use super::render::ceil_mib;
use crate::api::quantity::parse_bytes;
use crate::api::vm::{self as spec, VmParameters};

/// One managed key of the hardware and its wanted value.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum HwWant {
    Bios(Bios),
    /// The chipset; a version only when the spec pins one (any pinned
    /// version counts otherwise: Proxmox pins Windows guests at creation).
    Machine {
        chipset: Chipset,
        version: Option<String>,
        viommu: Option<Viommu>,
    },
    OsType(&'static str),
    Serial {
        index: u32,
        port: SerialPort,
    },
    /// The type; the memory only when the spec declares it.
    Vga {
        type_: VgaType,
        memory: Option<u32>,
    },
    /// A device by mapping; the flags the spec declares.
    HostPci {
        index: u32,
        dev: HostPci,
    },
    Usb {
        index: u32,
        dev: Usb,
    },
    /// The source; the limits the spec declares.
    Rng(Rng),
    Hotplug(Hotplug),
    /// MiB; 0: no balloon device. `None`: the device, never ballooning
    /// below memory (what Proxmox does without `balloon`).
    Balloon {
        target: Option<u64>,
        memory: u64,
    },
    Numa(bool),
    /// The flags of `cpu`, as a set (its model and other options are left
    /// alone).
    CpuFlags(BTreeSet<String>),
    Protection(bool),
    Startup(Startup),
}

impl HwWant {
    /// The config key.
    pub fn key(&self) -> String {
        match self {
            Self::Bios(_) => "bios".into(),
            Self::Machine { .. } => "machine".into(),
            Self::OsType(_) => "ostype".into(),
            Self::Serial { index, .. } => format!("serial{index}"),
            Self::Vga { .. } => "vga".into(),
            Self::HostPci { index, .. } => format!("hostpci{index}"),
            Self::Usb { index, .. } => format!("usb{index}"),
            Self::Rng(_) => "rng0".into(),
            Self::Hotplug(_) => "hotplug".into(),
            Self::Balloon { .. } => "balloon".into(),
            Self::Numa(_) => "numa".into(),
            Self::CpuFlags(_) => "cpu".into(),
            Self::Protection(_) => "protection".into(),
            Self::Startup(_) => "startup".into(),
        }
    }

    /// Whether `observed` (absent: `None`, read as Proxmox's default)
    /// already says what is wanted.
    pub fn matches(&self, observed: Option<&str>) -> bool {
        match self {
            Self::Bios(want) => observed.map_or(Ok(Bios::SeaBios), str::parse) == Ok(*want),
            Self::Machine {
                chipset,
                version,
                viommu,
            } => read(observed, Machine::default()).is_some_and(|have| {
                have.chipset() == *chipset
                    && have.viommu == *viommu
                    && version.as_ref().is_none_or(|v| same_version(&have, v))
            }),
            Self::OsType(want) => observed.unwrap_or("other") == *want,
            Self::Serial { port, .. } => observed.map(str::parse) == Some(Ok(port.clone())),
            Self::Vga { type_, memory } => read(observed, Vga::default()).is_some_and(|have| {
                have.type_or_default() == *type_ && memory.is_none_or(|m| have.memory == Some(m))
            }),
            Self::HostPci { dev, .. } => observed
                .and_then(|v| v.parse::<HostPci>().ok())
                .is_some_and(|have| same_pci(&have, dev)),
            Self::Usb { dev, .. } => {
                observed
                    .and_then(|v| v.parse::<Usb>().ok())
                    .is_some_and(|have| {
                        have.host.is_none()
                            && have.mapping == dev.mapping
                            && dev.usb3.is_none_or(|u| have.usb3.unwrap_or(false) == u)
                    })
            }
            Self::Rng(want) => observed
                .and_then(|v| v.parse::<Rng>().ok())
                .is_some_and(|have| {
                    have.source == want.source
                        && want.max_bytes.is_none_or(|b| have.max_bytes == Some(b))
                        && want.period.is_none_or(|p| have.period == Some(p))
                }),
            Self::Hotplug(want) => read(observed, Hotplug::pve_default()).as_ref() == Some(want),
            Self::Balloon { target, memory } => {
                let have = observed.map(|v| v.trim().parse::<u64>());
                match (target, have) {
                    (Some(t), Some(Ok(h))) => h == *t,
                    // The device with no minimum: Proxmox's default, or a
                    // target of all the memory.
                    (None, None) => true,
                    (None, Some(Ok(h))) => h == *memory,
                    (Some(_), None) | (_, Some(Err(_))) => false,
                }
            }
            Self::Numa(on) => observed.map_or(Some(defaults::NUMA), parse_bool) == Some(*on),
            Self::CpuFlags(flags) => {
                let have = read(observed, CpuConfig::default()).map(|c| c.flags());
                have.is_some_and(|h| h.into_iter().collect::<BTreeSet<_>>() == *flags)
            }
            Self::Protection(on) => {
                observed.map_or(Some(defaults::PROTECTION), parse_bool) == Some(*on)
            }
            Self::Startup(want) => read(observed, Startup::default()).as_ref() == Some(want),
        }
    }

    /// Sets the wanted value in `set`, keeping what the spec leaves open
    /// (a pinned machine version, a device's undeclared options, the CPU
    /// model) from `observed`.
    pub fn apply(&self, observed: Option<&str>, set: &mut pve_client::vm::VmParams) {
        let hw = &mut set.hardware;
        match self {
            Self::Bios(b) => hw.bios = Some(*b),
            Self::Machine {
                chipset,
                version,
                viommu,
            } => {
                let mut m = read(observed, Machine::default()).unwrap_or_default();
                let kept = m
                    .type_
                    .filter(|t| t.chipset == *chipset && version.is_none())
                    .and_then(|t| t.version);
                m.type_ = Some(MachineType {
                    version: version.clone().or(kept),
                    ..MachineType::latest(*chipset)
                });
                m.viommu = *viommu;
                hw.machine = Some(m);
            }
            Self::OsType(os) => set.ostype = Some((*os).to_owned()),
            Self::Serial { index, port } => {
                hw.serial.insert(*index, port.clone());
            }
            Self::Vga { type_, memory } => {
                let mut v = read(observed, Vga::default()).unwrap_or_default();
                v.type_ = Some(*type_);
                if memory.is_some() {
                    v.memory = *memory;
                }
                hw.vga = Some(v);
            }
            Self::HostPci { index, dev } => {
                let mut d = observed
                    .and_then(|v| v.parse::<HostPci>().ok())
                    .filter(|h| h.host.is_none() && h.mapping == dev.mapping)
                    .unwrap_or_else(|| dev.clone());
                d.pcie = dev.pcie.or(d.pcie);
                d.x_vga = dev.x_vga.or(d.x_vga);
                d.rombar = dev.rombar.or(d.rombar);
                hw.hostpci.insert(*index, d);
            }
            Self::Usb { index, dev } => {
                hw.usb.insert(*index, dev.clone());
            }
            Self::Rng(r) => hw.rng0 = Some(r.clone()),
            Self::Hotplug(h) => hw.hotplug = Some(h.clone()),
            Self::Balloon { target, memory } => hw.balloon = Some(target.unwrap_or(*memory)),
            Self::Numa(on) => hw.numa = Some(*on),
            Self::CpuFlags(flags) => {
                let mut cpu = set
                    .cpu
                    .take()
                    .or_else(|| read(observed, CpuConfig::default()))
                    .unwrap_or_default();
                cpu.set_flags(&flags.iter().cloned().collect::<Vec<_>>());
                set.cpu = Some(cpu);
            }
            Self::Protection(on) => set.protection = Some(*on),
            Self::Startup(s) => set.startup = Some(*s),
        }
    }
}

/// An observed value read with the model, or `default` when absent; `None`
/// when it does not read (it then matches nothing).
fn read<T: std::str::FromStr>(observed: Option<&str>, default: T) -> Option<T> {
    match observed {
        None => Some(default),
        Some(v) => v.parse().ok(),
    }
}

/// A pinned version matches the same version with any `+pve` revision,
/// unless the spec names the revision too.
fn same_version(have: &Machine, want: &str) -> bool {
    let Some(t) = &have.type_ else {
        return false;
    };
    if want.contains("+pve") {
        t.version.as_deref() == Some(want)
    } else {
        t.base_version() == Some(want)
    }
}

/// The same mapped device with the flags the spec declares (absent flags
/// read as Proxmox's defaults: no PCIe, not the primary GPU, ROM exposed).
fn same_pci(have: &HostPci, want: &HostPci) -> bool {
    let flag = |declared: Option<bool>, observed: Option<bool>, default: bool| {
        declared.is_none_or(|d| observed.unwrap_or(default) == d)
    };
    have.host.is_none()
        && have.mapping == want.mapping
        && flag(want.pcie, have.pcie, false)
        && flag(want.x_vga, have.x_vga, false)
        && flag(want.rombar, have.rombar, true)
}

/// The managed hardware keys of a spec (the EFI disk and TPM state aside).
pub(super) fn wants(spec: &VmParameters) -> Result<Vec<HwWant>, String> {
    let hw = &spec.hardware;
    let mut wants = vec![];
    if let Some(b) = hw.bios {
        wants.push(HwWant::Bios(match b {
            spec::Bios::SeaBIOS => Bios::SeaBios,
            spec::Bios::OVMF => Bios::Ovmf,
        }));
    }
    if let Some(m) = &hw.machine {
        wants.push(HwWant::Machine {
            chipset: match m.type_ {
                spec::MachineType::I440fx => Chipset::I440fx,
                spec::MachineType::Q35 => Chipset::Q35,
            },
            version: m.version.clone(),
            viommu: m.viommu.map(|v| match v {
                spec::Viommu::Intel => Viommu::Intel,
                spec::Viommu::Virtio => Viommu::Virtio,
            }),
        });
    }
    if let Some(os) = hw.os_type {
        wants.push(HwWant::OsType(os.as_str()));
    }
    for port in &hw.serial_ports {
        wants.push(HwWant::Serial {
            index: slot_index(&port.slot, "serial")?,
            port: port
                .device
                .parse()
                .map_err(|e| format!("serial port {}: {e}", port.slot))?,
        });
    }
    if let Some(v) = &hw.vga {
        wants.push(HwWant::Vga {
            type_: v.type_.as_str().parse().map_err(|e| format!("vga: {e}"))?,
            memory: v.memory,
        });
    }
    for d in &hw.pci_devices {
        wants.push(HwWant::HostPci {
            index: slot_index(&d.slot, "hostpci")?,
            dev: HostPci {
                pcie: d.pcie,
                x_vga: d.primary_gpu,
                rombar: d.rombar,
                ..HostPci::mapped(&d.mapping)
            },
        });
    }
    for d in &hw.usb_devices {
        wants.push(HwWant::Usb {
            index: slot_index(&d.slot, "usb")?,
            dev: Usb {
                usb3: d.usb3,
                ..Usb::mapped(&d.mapping)
            },
        });
    }
    if let Some(r) = &hw.rng {
        wants.push(HwWant::Rng(Rng {
            max_bytes: r.max_bytes,
            period: r.period_ms,
            ..Rng::new(match r.source {
                spec::RngSource::Urandom => RngSource::Urandom,
                spec::RngSource::Random => RngSource::Random,
                spec::RngSource::Hwrng => RngSource::Hwrng,
            })
        }));
    }
    if let Some(features) = &hw.hotplug {
        wants.push(HwWant::Hotplug(Hotplug(
            features.iter().map(|f| hotplug_feature(*f)).collect(),
        )));
    }
    if let Some(b) = &hw.balloon {
        let memory = bytes(&spec.memory.0, "memory")?;
        let target = match (b.enabled, &b.minimum) {
            (false, _) => Some(0),
            (true, Some(min)) => Some(ceil_mib(bytes(&min.0, "balloon.minimum")?) >> 20),
            (true, None) => None,
        };
        wants.push(HwWant::Balloon {
            target,
            memory: ceil_mib(memory) >> 20,
        });
    }
    if let Some(numa) = spec.cpu.numa {
        wants.push(HwWant::Numa(numa));
    }
    if !spec.cpu.flags.is_empty() {
        wants.push(HwWant::CpuFlags(spec.cpu.flags.iter().cloned().collect()));
    }
    if let Some(p) = spec.lifecycle.protection {
        wants.push(HwWant::Protection(p));
    }
    if let Some(s) = spec.lifecycle.startup {
        wants.push(HwWant::Startup(Startup {
            order: s.order,
            up: s.up,
            down: s.down,
        }));
    }
    Ok(wants)
}

fn hotplug_feature(f: spec::HotplugFeature) -> HotplugFeature {
    match f {
        spec::HotplugFeature::Network => HotplugFeature::Network,
        spec::HotplugFeature::Disk => HotplugFeature::Disk,
        spec::HotplugFeature::Cpu => HotplugFeature::Cpu,
        spec::HotplugFeature::Memory => HotplugFeature::Memory,
        spec::HotplugFeature::Usb => HotplugFeature::Usb,
        spec::HotplugFeature::Cloudinit => HotplugFeature::Cloudinit,
    }
}

/// A quantity of the spec in bytes.
fn bytes(quantity: &str, field: &str) -> Result<u64, String> {
    parse_bytes(quantity).map_err(|e| format!("{field}: {e}"))
}

/// The index of a slot of the spec (`serial0` → 0).
fn slot_index(slot: &str, prefix: &str) -> Result<u32, String> {
    slot.strip_prefix(prefix)
        .and_then(|i| i.parse().ok())
        .ok_or_else(|| format!("{slot:?} is not a {prefix} slot"))
}
