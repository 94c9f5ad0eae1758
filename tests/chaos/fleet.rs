//! The ProxmoxVMs of a run: every way of making a disk (import of a seeded
//! volume, download, linked and full clone of template 9000), VMIDs given
//! or allocated, and placement by `node`, by `allowedNodes` or by neither,
//! over three nodes. The mix is a fixed rotation (so even a small run has
//! every kind), shuffled by the seed.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde_json::{Value, json};

use crate::support;

/// The simulator's nodes; template 9000 lives on the first.
pub const NODES: [&str; 3] = ["pve", "pve2", "pve3"];
/// The seeded cloud image every node holds.
pub const SEEDED_IMAGE: &str = "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2";
/// The seeded template, by VMID and by name.
pub const TEMPLATE_VMID: u32 = 9000;
pub const TEMPLATE_NAME: &str = "ubuntu-24.04-cloudinit";
/// Images to download: pve-sim serves any unregistered URL, with the
/// SHA-256 of the URL text as its checksum.
const IMAGE_URLS: [&str; 2] = [
    "https://images.example/chaos/noble-a.qcow2",
    "https://images.example/chaos/noble-b.qcow2",
];
/// VMIDs given in the spec start here (allocation starts at 100).
const FIXED_VMIDS: u32 = 2000;

/// Where the disk comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Import,
    Download,
    LinkedClone,
    FullClone,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::Import => "import",
            Source::Download => "download",
            Source::LinkedClone => "linked clone",
            Source::FullClone => "full clone",
        }
    }

    fn is_clone(self) -> bool {
        matches!(self, Source::LinkedClone | Source::FullClone)
    }
}

/// Where the VM may go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    Node(String),
    Allowed(Vec<String>),
    Anywhere,
}

impl Placement {
    /// Whether a VM of this spec may run on `node`.
    pub fn allows(&self, node: &str) -> bool {
        match self {
            Placement::Node(n) => n == node,
            Placement::Allowed(nodes) => nodes.iter().any(|n| n == node),
            Placement::Anywhere => true,
        }
    }

    pub fn label(&self) -> String {
        match self {
            Placement::Node(n) => format!("node {n}"),
            Placement::Allowed(nodes) => format!("allowedNodes {}", nodes.join(",")),
            Placement::Anywhere => "any node".into(),
        }
    }
}

/// One ProxmoxVM of the run.
#[derive(Clone, Debug)]
pub struct VmSpec {
    pub name: String,
    pub source: Source,
    pub placement: Placement,
    /// `Some`: `spec.forProvider.vmid`; `None`: allocated by the provider.
    pub vmid: Option<u32>,
    /// The ProviderConfig it uses (`token` or `login`).
    pub config: &'static str,
    /// Whether it takes a cloud-init password from the password Secret.
    pub password: bool,
    /// Which wave applies it.
    pub wave: usize,
}

/// The ProviderConfigs: one authenticates with an API token, the other
/// logs in with a password (tickets, CSRF tokens).
pub const CONFIGS: [&str; 2] = ["token", "login"];
/// The Secret holding the cloud-init password.
pub const PASSWORD_SECRET: &str = "chaos-password";

/// `count` VMs, deterministic for a seed.
pub fn fleet(count: usize, waves: usize, rng: &mut StdRng) -> Vec<VmSpec> {
    const SOURCES: [Source; 4] = [
        Source::Import,
        Source::Download,
        Source::LinkedClone,
        Source::FullClone,
    ];
    let mut order: Vec<usize> = (0..count).collect();
    order.shuffle(rng);
    order
        .into_iter()
        .enumerate()
        .map(|(i, slot)| {
            let source = SOURCES[slot % SOURCES.len()];
            let placement = placement(source, slot / SOURCES.len(), rng);
            // Two of five name their VMID; the others race for allocated ones.
            let vmid = (slot % 5 < 2).then(|| FIXED_VMIDS + slot as u32);
            let name = format!(
                "c{slot:02}-{}-{}",
                source.label().replace(' ', "-"),
                match &placement {
                    Placement::Node(n) => n.clone(),
                    Placement::Allowed(_) => "allowed".into(),
                    Placement::Anywhere => "any".into(),
                }
            );
            VmSpec {
                name,
                source,
                placement,
                vmid,
                config: CONFIGS[slot % CONFIGS.len()],
                password: slot % 3 == 0,
                wave: i * waves / count.max(1),
            }
        })
        .collect()
}

/// Placement rotates through node / allowedNodes / neither. A clone can
/// only be made on the template's node (local storage), so clones are
/// pinned there or left to placement.
fn placement(source: Source, round: usize, rng: &mut StdRng) -> Placement {
    let mut nodes: Vec<String> = NODES.iter().map(|n| (*n).to_owned()).collect();
    nodes.shuffle(rng);
    if source.is_clone() {
        return if round.is_multiple_of(2) {
            Placement::Node(NODES[0].into())
        } else {
            Placement::Anywhere
        };
    }
    match round % 3 {
        0 => Placement::Node(nodes[0].clone()),
        1 => {
            let mut two = nodes[..2].to_vec();
            two.sort();
            Placement::Allowed(two)
        }
        _ => Placement::Anywhere,
    }
}

/// The ProxmoxVM manifest of a spec.
pub fn manifest(vm: &VmSpec, index: usize) -> Value {
    let mut fp = json!({
        "memory": "512Mi",
        "cpu": {"cores": 1},
        "networks": [{"slot": "net0", "bridge": "vmbr0"}],
        "cloudInit": {"user": "chaos", "ipConfigs": [{"interface": "net0", "ip": "dhcp"}]},
        "agent": {"enabled": true},
        "tags": ["chaos"],
    });
    match vm.source {
        Source::Import => {
            fp["disks"] = json!([{
                "slot": "scsi0", "storage": "local-lvm", "importFrom": SEEDED_IMAGE, "size": "4Gi",
            }]);
        }
        Source::Download => {
            let url = IMAGE_URLS[index % IMAGE_URLS.len()];
            fp["disks"] = json!([{
                "slot": "scsi0", "storage": "local-lvm", "size": "4Gi",
                "image": {"url": url, "checksum": support::sha256_hex(url), "checksumAlgorithm": "sha256"},
            }]);
        }
        Source::LinkedClone => fp["clone"] = json!({"templateVmid": TEMPLATE_VMID, "full": false}),
        Source::FullClone => fp["clone"] = json!({"templateName": TEMPLATE_NAME, "full": true}),
    }
    match &vm.placement {
        Placement::Node(node) => fp["node"] = json!(node),
        Placement::Allowed(nodes) => fp["allowedNodes"] = json!(nodes),
        Placement::Anywhere => {}
    }
    if let Some(vmid) = vm.vmid {
        fp["vmid"] = json!(vmid);
    }
    if vm.password {
        fp["cloudInit"]["passwordSecretRef"] = json!({"name": PASSWORD_SECRET, "key": "password"});
    }
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxVM",
        "metadata": {"name": vm.name, "labels": {"chaos": "true"}},
        "spec": {
            "forProvider": fp,
            "providerConfigRef": {"kind": "ProviderConfig", "name": vm.config},
        },
    })
}

/// One line per kind of VM, for the report: `import, node pve2: 3`.
pub fn mix(fleet: &[VmSpec]) -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for vm in fleet {
        let placement = match &vm.placement {
            Placement::Node(_) => "node",
            Placement::Allowed(_) => "allowedNodes",
            Placement::Anywhere => "neither",
        };
        let vmid = if vm.vmid.is_some() {
            "vmid given"
        } else {
            "vmid allocated"
        };
        *counts
            .entry(format!("{}, {placement}, {vmid}", vm.source.label()))
            .or_default() += 1;
    }
    counts.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn even_a_small_fleet_has_every_source_placement_and_vmid_mode() {
        let fleet = fleet(9, 1, &mut StdRng::seed_from_u64(7));
        for source in [
            Source::Import,
            Source::Download,
            Source::LinkedClone,
            Source::FullClone,
        ] {
            assert!(fleet.iter().any(|v| v.source == source), "{source:?}");
        }
        assert!(
            fleet
                .iter()
                .any(|v| matches!(v.placement, Placement::Node(_)))
        );
        assert!(
            fleet
                .iter()
                .any(|v| matches!(v.placement, Placement::Allowed(_)))
        );
        assert!(fleet.iter().any(|v| v.placement == Placement::Anywhere));
        assert!(fleet.iter().any(|v| v.vmid.is_some()));
        assert!(fleet.iter().any(|v| v.vmid.is_none()));
        assert!(fleet.iter().any(|v| v.password));
        for config in CONFIGS {
            assert!(fleet.iter().any(|v| v.config == config), "{config}");
        }
        let names: std::collections::BTreeSet<_> = fleet.iter().map(|v| &v.name).collect();
        assert_eq!(names.len(), fleet.len(), "names are unique");
    }

    #[test]
    fn clones_are_only_placed_where_the_template_is_or_left_to_placement() {
        for vm in fleet(50, 5, &mut StdRng::seed_from_u64(1)) {
            if vm.source.is_clone() {
                assert!(
                    matches!(&vm.placement, Placement::Node(n) if n == NODES[0])
                        || vm.placement == Placement::Anywhere,
                    "{vm:?}"
                );
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_fleet() {
        let a = fleet(20, 4, &mut StdRng::seed_from_u64(42));
        let b = fleet(20, 4, &mut StdRng::seed_from_u64(42));
        let names = |f: &[VmSpec]| f.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a), names(&b));
    }
}
