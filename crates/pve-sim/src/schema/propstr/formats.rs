//! The property-string formats of the VM options the simulator accepts
//! (drives, NICs, agent, memory, VGA, ipconfig, boot, cicustom, cpu, smbios1).

use super::PropFormat;
use crate::schema::Param;
use crate::schema::format::Named;

const FILE: Param = Param::string("file")
    .format(Named::VolumeIdOrQmPath)
    .default_key();
const VOLUME: Param = Param::alias("volume", "file");
const SIZE: Param = Param::string("size").format(Named::DiskSize).opt();
const IMPORT_FROM: Param = Param::string("import-from")
    .format(Named::VolumeIdOrAbsolutePath)
    .opt();
const IMAGE_FORMATS: &[&str] = &["raw", "qcow", "qed", "qcow2", "vmdk", "cloop"];

macro_rules! drive_format {
    ($($extra:expr),* $(,)?) => {
        PropFormat {
            keys: &[
                FILE,
                VOLUME,
                SIZE,
                IMPORT_FROM,
                Param::string("format").enums(IMAGE_FORMATS).opt(),
                Param::string("media").enums(&["cdrom", "disk"]).opt(),
                Param::string("cache").enums(&["none", "writethrough", "writeback", "unsafe", "directsync"]).opt(),
                Param::string("discard").enums(&["ignore", "on"]).opt(),
                Param::string("aio").enums(&["native", "threads", "io_uring"]).opt(),
                Param::boolean("backup").opt(),
                Param::boolean("replicate").opt(),
                Param::boolean("detect_zeroes").opt(),
                Param::boolean("snapshot").opt(),
                Param::boolean("shared").opt(),
                Param::string("serial").format(Named::Urlencoded).max_len(60).opt(),
                Param::string("werror").enums(&["enospc", "ignore", "report", "stop"]).opt(),
                Param::string("rerror").enums(&["ignore", "report", "stop"]).opt(),
                Param::integer("iops").opt(),
                Param::number("mbps").opt(),
                $($extra),*
            ],
        }
    };
}

pub static SCSI: PropFormat = drive_format!(
    Param::boolean("iothread").opt(),
    Param::boolean("ssd").opt(),
    Param::boolean("ro").opt(),
    Param::integer("queues").min(2).opt(),
);
pub static SATA: PropFormat = drive_format!(Param::boolean("ssd").opt());
pub static IDE: PropFormat = drive_format!(Param::boolean("ssd").opt());
pub static VIRTIO: PropFormat =
    drive_format!(Param::boolean("iothread").opt(), Param::boolean("ro").opt());

pub static EFIDISK: PropFormat = PropFormat {
    keys: &[
        FILE,
        VOLUME,
        SIZE,
        IMPORT_FROM,
        Param::string("efitype").enums(&["2m", "4m"]).opt(),
        Param::string("format").enums(IMAGE_FORMATS).opt(),
        Param::boolean("pre-enrolled-keys").opt(),
        Param::string("ms-cert")
            .enums(&["2011", "2023", "2023w", "2023k"])
            .opt(),
    ],
};

pub static TPMSTATE: PropFormat = PropFormat {
    keys: &[
        FILE,
        VOLUME,
        SIZE,
        IMPORT_FROM,
        Param::string("format")
            .enums(&["raw", "qcow2", "vmdk"])
            .opt(),
        Param::string("version").enums(&["v1.2", "v2.0"]).opt(),
    ],
};

pub static UNUSED: PropFormat = PropFormat {
    keys: &[
        Param::string("file")
            .format(Named::PveVolumeId)
            .default_key(),
        VOLUME,
    ],
};

pub const NET_MODELS: &[&str] = &[
    "e1000",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "e1000e",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio",
    "vmxnet3",
];

pub static NET: PropFormat = PropFormat {
    keys: &[
        Param::string("model").enums(NET_MODELS).default_key(),
        Param::string("bridge").format(Named::PveBridgeId).opt(),
        Param::boolean("firewall").opt(),
        Param::boolean("link_down").opt(),
        Param::string("macaddr").format(Named::MacAddr).opt(),
        Param::integer("mtu").min(1).max(65520).opt(),
        Param::integer("queues").min(0).max(64).opt(),
        Param::number("rate").min(0).opt(),
        Param::integer("tag").min(1).max(4094).opt(),
        Param::string("trunks")
            .pattern(r"\d+(?:-\d+)?(?:;\d+(?:-\d+)?)*")
            .opt(),
        Param::key_alias("e1000", "macaddr", "model"),
        Param::key_alias("e1000-82540em", "macaddr", "model"),
        Param::key_alias("e1000-82544gc", "macaddr", "model"),
        Param::key_alias("e1000-82545em", "macaddr", "model"),
        Param::key_alias("e1000e", "macaddr", "model"),
        Param::key_alias("i82551", "macaddr", "model"),
        Param::key_alias("i82557b", "macaddr", "model"),
        Param::key_alias("i82559er", "macaddr", "model"),
        Param::key_alias("ne2k_isa", "macaddr", "model"),
        Param::key_alias("ne2k_pci", "macaddr", "model"),
        Param::key_alias("pcnet", "macaddr", "model"),
        Param::key_alias("rtl8139", "macaddr", "model"),
        Param::key_alias("virtio", "macaddr", "model"),
        Param::key_alias("vmxnet3", "macaddr", "model"),
    ],
};

pub static AGENT: PropFormat = PropFormat {
    keys: &[
        Param::boolean("enabled").default_key(),
        Param::boolean("freeze-fs").opt(),
        Param::alias("freeze-fs-on-backup", "freeze-fs"),
        Param::alias("guest-fsfreeze", "freeze-fs"),
        Param::boolean("fstrim_cloned_disks").opt(),
        Param::string("type").enums(&["virtio", "isa"]).opt(),
    ],
};

pub static MEMORY: PropFormat = PropFormat {
    keys: &[Param::integer("current").min(16).default_key()],
};

pub static VGA: PropFormat = PropFormat {
    keys: &[
        Param::string("type")
            .enums(&[
                "cirrus",
                "qxl",
                "qxl2",
                "qxl3",
                "qxl4",
                "none",
                "serial0",
                "serial1",
                "serial2",
                "serial3",
                "std",
                "virtio",
                "virtio-gl",
                "vmware",
            ])
            .default_key()
            .opt(),
        Param::integer("memory").min(4).max(512).opt(),
        Param::string("clipboard").enums(&["vnc"]).opt(),
    ],
};

pub static IPCONFIG: PropFormat = PropFormat {
    keys: &[
        Param::string("ip").format(Named::Ipv4Config).opt(),
        Param::string("gw").format(Named::Ipv4).opt(),
        Param::string("ip6").format(Named::Ipv6Config).opt(),
        Param::string("gw6").format(Named::Ipv6).opt(),
    ],
};

pub static BOOT: PropFormat = PropFormat {
    keys: &[
        Param::string("legacy")
            .pattern("[acdn]{1,4}")
            .default_key()
            .opt(),
        Param::string("order").format(Named::PveQmBootOrder).opt(),
    ],
};

pub static CICUSTOM: PropFormat = PropFormat {
    keys: &[
        Param::string("meta").format(Named::PveVolumeId).opt(),
        Param::string("network").format(Named::PveVolumeId).opt(),
        Param::string("user").format(Named::PveVolumeId).opt(),
        Param::string("vendor").format(Named::PveVolumeId).opt(),
    ],
};

pub static CPU: PropFormat = PropFormat {
    keys: &[
        Param::string("cputype")
            .pattern(r"[a-zA-Z0-9\-_.]+")
            .default_key()
            .opt(),
        Param::string("flags")
            .pattern(r"([+-])([a-zA-Z0-9\-_.]+)(;([+-])([a-zA-Z0-9\-_.]+))*")
            .opt(),
        Param::integer("guest-phys-bits").min(32).max(64).opt(),
        Param::boolean("hidden").opt(),
        Param::string("hv-vendor-id")
            .pattern(r"[a-zA-Z0-9]{1,12}")
            .opt(),
        Param::string("phys-bits")
            .pattern(r"([89]|[1-5][0-9]|6[0-4]|host)")
            .opt(),
        Param::string("reported-model").opt(),
    ],
};

/// The CPU flags a VM's own config may set (qemu-server's
/// `$supported_vm_specific_cpu_flags_by_arch`, x86_64); custom CPU models
/// may set any.
pub const VM_CPU_FLAGS: &[&str] = &[
    "aes",
    "amd-no-ssb",
    "amd-ssbd",
    "hv-evmcs",
    "hv-tlbflush",
    "ibpb",
    "md-clear",
    "nested-virt",
    "pcid",
    "pdpe1gb",
    "spec-ctrl",
    "ssbd",
    "virt-ssbd",
];

pub static SMBIOS1: PropFormat = PropFormat {
    keys: &[
        Param::string("uuid")
            .pattern(r"[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}")
            .opt(),
        Param::boolean("base64").opt(),
        Param::string("family").opt(),
        Param::string("manufacturer").opt(),
        Param::string("product").opt(),
        Param::string("serial").opt(),
        Param::string("sku").opt(),
        Param::string("version").opt(),
    ],
};

/// datacenter.cfg `next-id`: the range `nextid` hands out from.
pub static NEXT_ID: PropFormat = PropFormat {
    keys: &[
        Param::integer("lower").min(100).max(999_999_999).opt(),
        Param::integer("upper").min(100).max(1_000_000_000).opt(),
    ],
};

/// `hostpciN`: a host PCI device by ID or a cluster mapping.
pub static HOSTPCI: PropFormat = PropFormat {
    keys: &[
        Param::string("host")
            .pattern(r"(?:[a-f0-9]{4,}:)?[a-f0-9]{2}:[a-f0-9]{2}(?:\.[a-f0-9])?(?:;(?:[a-f0-9]{4,}:)?[a-f0-9]{2}:[a-f0-9]{2}(?:\.[a-f0-9])?)*")
            .default_key()
            .opt(),
        Param::string("mapping").format(Named::PveConfigid).opt(),
        Param::string("driver").enums(&["vfio", "keep"]).opt(),
        Param::boolean("pcie").opt(),
        Param::boolean("rombar").opt(),
        Param::string("romfile").opt(),
        Param::boolean("x-vga").opt(),
        Param::boolean("legacy-igd").opt(),
        Param::string("mdev").opt(),
        Param::string("device-id").opt(),
        Param::string("vendor-id").opt(),
        Param::string("sub-device-id").opt(),
        Param::string("sub-vendor-id").opt(),
    ],
};

/// `usbN`: a host USB device, `spice`, or a cluster mapping.
pub static USB: PropFormat = PropFormat {
    keys: &[
        Param::string("host")
            .pattern(r"(?:(?:(?:0x)?[0-9A-Fa-f]{4}:(?:0x)?[0-9A-Fa-f]{4})|(?:\d+-\d+(?:\.\d+)*)|[Ss][Pp][Ii][Cc][Ee])")
            .default_key()
            .opt(),
        Param::string("mapping").format(Named::PveConfigid).opt(),
        Param::boolean("usb3").opt(),
    ],
};

/// `rng0`: the VirtIO RNG source.
pub static RNG: PropFormat = PropFormat {
    keys: &[
        Param::string("source")
            .enums(&["/dev/urandom", "/dev/random", "/dev/hwrng"])
            .default_key(),
        Param::integer("max_bytes").opt(),
        Param::integer("period").opt(),
    ],
};

/// `machine`: the QEMU machine type and its options.
pub static MACHINE: PropFormat = PropFormat {
    keys: &[
        Param::string("type")
            .pattern(r"(pc|pc(-i440fx)?-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|q35|pc-q35-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|virt(?:-\d+(\.\d+)+)?(\+pve\d+)?)")
            .max_len(40)
            .default_key()
            .opt(),
        Param::string("viommu").enums(&["intel", "virtio"]).opt(),
        Param::number("aw-bits").min(32).max(64).opt(),
        Param::boolean("enable-s3").opt(),
        Param::boolean("enable-s4").opt(),
    ],
};

/// A container's `rootfs`: `STORAGE:SIZE_GB` for a new volume, or a volume.
pub static LXC_ROOTFS: PropFormat = PropFormat {
    keys: &[
        Param::string("volume").default_key(),
        Param::string("size").format(Named::DiskSize).opt(),
        Param::boolean("acl").opt(),
        Param::boolean("quota").opt(),
        Param::boolean("replicate").opt(),
        Param::boolean("ro").opt(),
        Param::boolean("shared").opt(),
        Param::string("mountoptions").opt(),
    ],
};

/// A container NIC: `name=eth0,bridge=vmbr0,ip=dhcp`.
pub static LXC_NET: PropFormat = PropFormat {
    keys: &[
        Param::string("name").pattern(r"[-_.\w\d]+"),
        Param::string("bridge").pattern(r"[-_.\w\d]+").opt(),
        Param::string("hwaddr").format(Named::MacAddr).opt(),
        Param::string("ip").opt(),
        Param::string("gw").format(Named::Ipv4).opt(),
        Param::string("ip6").opt(),
        Param::string("gw6").format(Named::Ipv6).opt(),
        Param::boolean("firewall").opt(),
        Param::boolean("link_down").opt(),
        Param::integer("mtu").min(64).max(65535).opt(),
        Param::number("rate").min(0).opt(),
        Param::integer("tag").min(1).max(4094).opt(),
        Param::string("trunks").opt(),
        Param::string("type").enums(&["veth"]).opt(),
    ],
};

/// Container features: `nesting=1,keyctl=1`.
pub static LXC_FEATURES: PropFormat = PropFormat {
    keys: &[
        Param::boolean("nesting").opt(),
        Param::boolean("keyctl").opt(),
        Param::boolean("fuse").opt(),
        Param::string("mount").opt(),
        Param::boolean("mknod").opt(),
        Param::boolean("force_rw_sys").opt(),
    ],
};

const USB_OR_PCI_ID: &str = "[0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}";

/// One node's entry of a PCI resource mapping (`/cluster/mapping/pci`).
pub static PCI_MAP: PropFormat = PropFormat {
    keys: &[
        Param::string("node").format(Named::PveNode),
        Param::string("path").pattern(
            r"(?:[a-f0-9]{4,}:[a-f0-9]{2}:[a-f0-9]{2}(?:.[a-f0-9])?;)*[a-f0-9]{4,}:[a-f0-9]{2}:[a-f0-9]{2}(?:.[a-f0-9])?",
        ),
        Param::string("id").pattern(USB_OR_PCI_ID),
        Param::string("subsystem-id").pattern(USB_OR_PCI_ID).opt(),
        Param::integer("iommugroup").opt(),
        Param::string("description").max_len(4096).opt(),
    ],
};

/// One node's entry of a USB resource mapping (`/cluster/mapping/usb`).
pub static USB_MAP: PropFormat = PropFormat {
    keys: &[
        Param::string("node").format(Named::PveNode),
        Param::string("id").pattern(USB_OR_PCI_ID),
        Param::string("path").pattern(r"(\d+)\-(\d+(\.\d+)*)").opt(),
        Param::string("description").max_len(4096).opt(),
    ],
};
