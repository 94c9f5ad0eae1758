//! The VM configuration options the simulator accepts on create and config
//! updates, and what each needs (privileges, output type).

use serde_json::Value;

use super::format::Named;
use super::propstr::{self, PropFormat};
use super::{Kind, Param, find};

pub const OSTYPES: &[&str] = &[
    "other", "wxp", "w2k", "w2k3", "w2k8", "wvista", "win7", "win8", "win10", "win11", "l24",
    "l26", "solaris",
];

pub const NODE: Param = Param::string("node").format(Named::PveNode);
pub const VMID: Param = Param::integer("vmid")
    .format(Named::PveVmid)
    .min(100)
    .max(999_999_999);

/// Options shared by create and config updates.
pub const CONFIG: &[Param] = &[
    Param::boolean("acpi").opt(),
    Param::string("agent").prop(&propstr::AGENT).opt(),
    Param::integer("balloon").min(0).opt(),
    Param::string("bios").enums(&["seabios", "ovmf"]).opt(),
    Param::string("boot").format(Named::PveQmBoot).opt(),
    Param::string("cicustom").format(Named::PveQmCicustom).opt(),
    Param::string("cipassword").opt(),
    Param::string("citype")
        .enums(&["configdrive2", "nocloud", "opennebula"])
        .opt(),
    Param::boolean("ciupgrade").opt(),
    Param::string("ciuser").opt(),
    Param::integer("cores").min(1).opt(),
    Param::string("cpu").format(Named::PveVmCpuConf).opt(),
    Param::number("cpulimit").min(0).max(128).opt(),
    Param::integer("cpuunits").min(1).max(262_144).opt(),
    Param::string("description").max_len(8192).opt(),
    Param::string("efidisk0").prop(&propstr::EFIDISK).opt(),
    Param::string("hostpci[n]")
        .format(Named::PveQmHostpci)
        .indexed(16)
        .opt(),
    Param::string("hotplug")
        .format(Named::PveHotplugFeatures)
        .opt(),
    Param::string("ide[n]").prop(&propstr::IDE).indexed(4).opt(),
    Param::string("ipconfig[n]")
        .format(Named::PveQmIpconfig)
        .indexed(32)
        .opt(),
    Param::boolean("kvm").opt(),
    Param::boolean("localtime").opt(),
    Param::string("machine").prop(&propstr::MACHINE).opt(),
    Param::string("memory").prop(&propstr::MEMORY).opt(),
    Param::string("name").format(Named::DnsName).opt(),
    Param::string("nameserver").format(Named::AddressList).opt(),
    Param::string("net[n]")
        .prop(&propstr::NET)
        .indexed(32)
        .opt(),
    Param::boolean("numa").opt(),
    Param::boolean("onboot").opt(),
    Param::string("ostype").enums(OSTYPES).opt(),
    Param::boolean("protection").opt(),
    Param::string("rng0").format(Named::PveQmRng).opt(),
    Param::string("sata[n]")
        .prop(&propstr::SATA)
        .indexed(6)
        .opt(),
    Param::string("scsi[n]")
        .prop(&propstr::SCSI)
        .indexed(31)
        .opt(),
    Param::string("scsihw")
        .enums(&[
            "lsi",
            "lsi53c810",
            "virtio-scsi-pci",
            "virtio-scsi-single",
            "megasas",
            "pvscsi",
        ])
        .opt(),
    Param::string("searchdomain").opt(),
    Param::string("serial[n]")
        .pattern("(/dev/.+|socket)")
        .indexed(4)
        .opt(),
    Param::string("smbios1")
        .format(Named::PveQmSmbios1)
        .max_len(512)
        .opt(),
    Param::integer("sockets").min(1).opt(),
    Param::string("sshkeys").format(Named::Urlencoded).opt(),
    Param::string("startup")
        .format(Named::PveStartupOrder)
        .opt(),
    Param::boolean("tablet").opt(),
    Param::string("tags").format(Named::PveTagList).opt(),
    Param::boolean("template").opt(),
    Param::string("tpmstate0").prop(&propstr::TPMSTATE).opt(),
    Param::string("unused[n]")
        .prop(&propstr::UNUSED)
        .indexed(256)
        .opt(),
    Param::string("usb[n]")
        .prop(&propstr::USB)
        .indexed(14)
        .opt(),
    Param::integer("vcpus").min(1).opt(),
    Param::string("vga").prop(&propstr::VGA).opt(),
    Param::string("virtio[n]")
        .prop(&propstr::VIRTIO)
        .indexed(16)
        .opt(),
    Param::string("vmgenid")
        .pattern("(?:[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}|[01])")
        .opt(),
];

/// Extra parameters of `POST /nodes/{node}/qemu`.
pub const CREATE: &[Param] = &[
    NODE,
    VMID,
    Param::boolean("start").opt(),
    Param::string("storage").format(Named::PveStorageId).opt(),
    Param::string("pool").format(Named::PvePoolid).opt(),
];

/// Extra parameters of `PUT .../config`.
pub const UPDATE: &[Param] = &[
    NODE,
    VMID,
    Param::string("delete").format(Named::PveConfigidList).opt(),
    Param::string("revert").format(Named::PveConfigidList).opt(),
    Param::string("digest").max_len(40).opt(),
    Param::boolean("skiplock").opt(),
];

/// `POST .../config` additionally accepts `background_delay`.
pub const UPDATE_ASYNC: &[Param] = &[Param::integer("background_delay").min(1).max(30).opt()];

/// The drive buses and their formats.
pub fn drive_format(key: &str) -> Option<&'static PropFormat> {
    let p = find(CONFIG.iter(), key)?;
    match p.name {
        "ide[n]" => Some(&propstr::IDE),
        "sata[n]" => Some(&propstr::SATA),
        "scsi[n]" => Some(&propstr::SCSI),
        "virtio[n]" => Some(&propstr::VIRTIO),
        "efidisk0" => Some(&propstr::EFIDISK),
        "tpmstate0" => Some(&propstr::TPMSTATE),
        _ => None,
    }
}

pub fn is_drive(key: &str) -> bool {
    drive_format(key).is_some()
}

/// The privileges (any one of them) an option needs on `/vms/{vmid}`,
/// after qemu-server's `check_vm_modify_config_perm`. `None`: root only.
pub fn option_privileges(key: &str) -> Option<&'static [&'static str]> {
    let name = find(CONFIG.iter(), key).map_or(key, |p| p.name);
    Some(match name {
        "cores" | "cpu" | "cpulimit" | "cpuunits" | "numa" | "sockets" | "vcpus" => {
            &["VM.Config.CPU"]
        }
        "memory" | "balloon" => &["VM.Config.Memory"],
        "acpi" | "hotplug" | "kvm" | "scsihw" | "smbios1" | "tablet" | "vga" | "serial[n]"
        | "machine" | "rng0" | "usb[n]" | "hostpci[n]" => &["VM.Config.HWType"],
        "agent" | "bios" | "description" | "localtime" | "name" | "onboot" | "ostype"
        | "protection" | "startup" | "tags" | "template" | "vmgenid" => &["VM.Config.Options"],
        "cicustom" | "cipassword" | "citype" | "ciupgrade" | "ciuser" | "nameserver"
        | "searchdomain" | "sshkeys" | "ipconfig[n]" => {
            &["VM.Config.Cloudinit", "VM.Config.Network"]
        }
        "net[n]" => &["VM.Config.Network"],
        "ide[n]" | "sata[n]" | "scsi[n]" | "virtio[n]" | "efidisk0" | "tpmstate0" | "unused[n]"
        | "boot" => &["VM.Config.Disk"],
        _ => return None,
    })
}

/// A config value as `GET .../config` returns it: integers and booleans as
/// JSON numbers, everything else as strings.
pub fn typed(key: &str, value: &str) -> Value {
    let kind = find(CONFIG.iter(), key).map(|p| p.kind);
    match kind {
        Some(Kind::Integer | Kind::Boolean) => value
            .parse::<i64>()
            .map_or_else(|_| Value::from(value), Value::from),
        Some(Kind::Number) => value
            .parse::<f64>()
            .map_or_else(|_| Value::from(value), Value::from),
        _ => Value::from(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_privileges_cover_indexed_keys() {
        assert_eq!(option_privileges("net3"), Some(&["VM.Config.Network"][..]));
        assert_eq!(option_privileges("scsi0"), Some(&["VM.Config.Disk"][..]));
        assert_eq!(option_privileges("args"), None);
        assert_eq!(typed("cores", "2"), Value::from(2));
        assert_eq!(typed("memory", "2048"), Value::from("2048"));
    }
}
