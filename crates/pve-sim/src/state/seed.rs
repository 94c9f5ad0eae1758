//! The state a simulator starts with: on every node `local` (dir) with two
//! import images and `local-lvm` (lvmthin); on the first node the
//! cloud-init-ready template VM 9000.

use std::collections::BTreeMap;

use super::{Cluster, NodeState, Storage, StorageKind, Vm, Volume};
use crate::clock::Clock;
use crate::config::SimConfig;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

pub const UBUNTU_IMAGE: &str = "import/ubuntu-24.04-server-cloudimg-amd64.qcow2";
pub const CORRUPT_IMAGE: &str = "import/corrupt.qcow2";
pub const TEMPLATE_VMID: u32 = 9000;
/// A container template (`pveam download local debian-12-standard...`).
pub const DEBIAN_TEMPLATE: &str = "vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

pub fn cluster(config: &SimConfig) -> Cluster {
    let nodes = &config.nodes;
    let now = Clock::epoch_secs();
    let mut storages = BTreeMap::new();
    for node in nodes {
        let mut local = Storage {
            id: "local".into(),
            kind: StorageKind::Dir {
                path: "/var/lib/vz".into(),
            },
            content: vec!["iso", "vztmpl", "backup", "import", "snippets"],
            total: 100 * GIB,
            shared: false,
            volumes: BTreeMap::new(),
        };
        for (volname, size, virtual_size, corrupt) in [
            (UBUNTU_IMAGE, 600 * MIB, 3584 * MIB, false),
            (CORRUPT_IMAGE, 412 * MIB, 2252 * MIB, true),
        ] {
            local.volumes.insert(
                volname.into(),
                Volume {
                    volname: volname.into(),
                    content: "import",
                    format: "qcow2".into(),
                    size,
                    virtual_size,
                    vmid: None,
                    ctime: now,
                    corrupt,
                    checksums: BTreeMap::new(),
                    base: None,
                    contents: None,
                    backup: None,
                },
            );
        }
        local.volumes.insert(
            DEBIAN_TEMPLATE.into(),
            Volume {
                volname: DEBIAN_TEMPLATE.into(),
                content: "vztmpl",
                format: "tzst".into(),
                size: 123 * MIB,
                virtual_size: 123 * MIB,
                vmid: None,
                ctime: now,
                corrupt: false,
                checksums: BTreeMap::new(),
                base: None,
                contents: None,
                backup: None,
            },
        );
        let lvm = Storage {
            id: "local-lvm".into(),
            kind: StorageKind::LvmThin { vg: "pve".into() },
            content: vec!["images", "rootdir"],
            total: 400 * GIB,
            shared: false,
            volumes: BTreeMap::new(),
        };
        storages.insert(node.clone(), vec![local, lvm]);
    }
    let nodes_state = nodes
        .iter()
        .zip(1..)
        .map(|(name, id)| {
            let mut n = NodeState::new(name, id);
            if let Some(m) = config.node_memory.get(name).or(config.node_memory.get("*")) {
                n.memory = *m;
            }
            if let Some(c) = config.node_cpus.get(name).or(config.node_cpus.get("*")) {
                n.cpus = *c;
            }
            n
        })
        .collect();
    let mut cluster = Cluster {
        nodes: nodes_state,
        storages,
        vms: BTreeMap::new(),
        options: BTreeMap::new(),
        quorum_lost: false,
        pools: BTreeMap::new(),
        ha: Default::default(),
        mappings: Default::default(),
        firewall: Default::default(),
        backup_jobs: BTreeMap::new(),
        sdn: Default::default(),
    };
    if let Some(first) = nodes.first() {
        add_template(&mut cluster, first, now);
    }
    cluster
}

fn add_template(cluster: &mut Cluster, node: &str, now: u64) {
    let vmid = TEMPLATE_VMID;
    let disk = format!("base-{vmid}-disk-0");
    let cloudinit = format!("vm-{vmid}-cloudinit");
    if let Some(lvm) = cluster.storage_mut(node, "local-lvm") {
        for (name, size) in [(&disk, 3584 * MIB), (&cloudinit, 4 * MIB)] {
            lvm.volumes.insert(
                name.clone(),
                Volume {
                    volname: name.clone(),
                    content: "images",
                    format: "raw".into(),
                    size,
                    virtual_size: size,
                    vmid: Some(vmid),
                    ctime: now,
                    corrupt: false,
                    checksums: BTreeMap::new(),
                    base: None,
                    contents: None,
                    backup: None,
                },
            );
        }
    }
    let config: BTreeMap<String, String> = [
        ("agent", "1".to_owned()),
        ("boot", "order=scsi0".to_owned()),
        ("cores", "2".to_owned()),
        ("ide2", format!("local-lvm:{cloudinit},media=cdrom")),
        ("memory", "2048".to_owned()),
        ("meta", format!("creation-qemu=9.2.0,ctime={now}")),
        ("name", "ubuntu-24.04-cloudinit".to_owned()),
        ("net0", "virtio=BC:24:11:5E:90:00,bridge=vmbr0".to_owned()),
        ("ostype", "l26".to_owned()),
        ("scsi0", format!("local-lvm:{disk},size=3584M")),
        ("scsihw", "virtio-scsi-pci".to_owned()),
        ("serial0", "socket".to_owned()),
        (
            "smbios1",
            "uuid=5b0c0f5e-9000-4c1a-8d3e-2f6a1b7c9000".to_owned(),
        ),
        ("template", "1".to_owned()),
        ("vga", "serial0".to_owned()),
        ("vmgenid", "0f1e2d3c-9000-4b5a-8c7d-6e5f4a3b2c1d".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut vm = Vm::new(vmid, node, config);
    vm.created = None;
    cluster.vms.insert(vmid, vm);
}
