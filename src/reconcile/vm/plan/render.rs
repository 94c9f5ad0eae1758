//! The spec, as Proxmox settings in pve-client's typed model: the create
//! call's parameters and the managed keys drift is checked against.
//!
//! The decisions are the plan's: which keys are managed, that sizes round
//! up to what Proxmox allocates, the SCSI controller and boot order a new
//! VM gets. How each value is written is the model's.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::str::FromStr;

use pve_client::Secret;
use pve_client::vm::{
    Boot, Drive, DriveKey, IpConfig, Nameservers, Nic, NicModel, ScsiHw, SshKeys, Tags, VmParams,
    net_index,
};

use super::compare::Want;
use super::context::Ctx;
use super::hardware;
use super::input::NamedImage;
use super::output::{Params, Sensitive};
use super::owner;
use crate::api::{
    quantity::parse_bytes,
    vm::{CloudInit, Disk, IpConfig as IpSpec, NetworkDevice, NetworkModel, ScsiController},
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Bytes rounded up to whole MiB (Proxmox sizes are MiB-exact).
pub(super) fn ceil_mib(bytes: u64) -> u64 {
    bytes.div_ceil(MIB) * MIB
}

/// Bytes rounded up to whole GiB (new empty disks are allocated in GiB).
pub(super) fn ceil_gib(bytes: u64) -> u64 {
    bytes.div_ceil(GIB).max(1) * GIB
}

/// The size of a disk in the spec, in bytes.
pub(super) fn disk_bytes(disk: &Disk) -> Result<Option<u64>, String> {
    disk.size
        .as_ref()
        .map(|q| parse_bytes(&q.0).map_err(|e| format!("disk {}: {e}", disk.slot)))
        .transpose()
}

/// A drive slot of the spec (`scsi0`, `ide2`).
pub(super) fn drive_key(slot: &str) -> Result<DriveKey, String> {
    slot.parse().map_err(|e| format!("{e}"))
}

/// The drive that creates a disk: an import (`import-from`) of the image or
/// volume, or a new empty volume of the spec's size rounded up to GiB.
pub(super) fn disk_create(
    disk: &Disk,
    named: &BTreeMap<String, NamedImage>,
) -> Result<Drive, String> {
    let image = disk.image.as_ref();
    let source = disk
        .import_from
        .clone()
        .or_else(|| image.and_then(|i| i.volume()))
        .or_else(|| {
            // A ProxmoxImage's volume, once `images::named` found it ready.
            match named.get(image?.name.as_deref()?)? {
                NamedImage::Found { volume, .. } => volume.clone(),
                NamedImage::Unknown | NamedImage::NotFound => None,
            }
        });
    if let (None, Some(name)) = (&source, image.and_then(|i| i.name.as_deref())) {
        return Err(format!(
            "disk {}: ProxmoxImage {name} has no volume yet",
            disk.slot
        ));
    }
    match source {
        Some(volume) => Ok(Drive::import(&disk.storage, &volume)),
        None => {
            let bytes = disk_bytes(disk)?.unwrap_or(GIB);
            Ok(Drive::alloc(&disk.storage, ceil_gib(bytes) / GIB))
        }
    }
}

/// The cloud-init drive.
pub(super) fn cloud_init_drive(ci: &CloudInit) -> Drive {
    Drive::cloud_init(&ci.storage)
}

fn nic_model(model: NetworkModel) -> NicModel {
    match model {
        NetworkModel::Virtio => NicModel::Virtio,
        NetworkModel::E1000 => NicModel::E1000,
        NetworkModel::E1000e => NicModel::E1000e,
        NetworkModel::Rtl8139 => NicModel::Rtl8139,
        NetworkModel::Vmxnet3 => NicModel::Vmxnet3,
    }
}

fn scsi_hw(hw: ScsiController) -> ScsiHw {
    match hw {
        ScsiController::Lsi => ScsiHw::Lsi,
        ScsiController::Lsi53c810 => ScsiHw::Lsi53c810,
        ScsiController::VirtioScsiPci => ScsiHw::VirtioScsiPci,
        ScsiController::VirtioScsiSingle => ScsiHw::VirtioScsiSingle,
        ScsiController::Megasas => ScsiHw::Megasas,
        ScsiController::Pvscsi => ScsiHw::Pvscsi,
    }
}

fn nic_index(slot: &str) -> Result<u32, String> {
    net_index(slot).ok_or_else(|| format!("{slot:?} is not a network device slot"))
}

/// A network device of the spec.
fn device(dev: &NetworkDevice) -> Result<Want, String> {
    Ok(Want::Net {
        index: nic_index(&dev.slot)?,
        nic: Nic {
            mac: spec_value(&dev.slot, "mac", &dev.mac)?,
            tag: dev.vlan_tag,
            firewall: dev.firewall,
            ..Nic::new(nic_model(dev.model), &dev.bridge)
        },
    })
}

/// An optional spec field read as a model value.
fn spec_value<T: FromStr<Err: Display>>(
    owner: &str,
    field: &str,
    value: &Option<String>,
) -> Result<Option<T>, String> {
    value
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|e| format!("{owner} {field}: {e}"))
}

/// The addresses of one interface, or `None` when the entry sets nothing.
fn ip_config(ic: &IpSpec) -> Result<Option<Want>, String> {
    let config = IpConfig {
        ip: spec_value(&ic.interface, "ip", &ic.ip)?,
        gw: spec_value(&ic.interface, "gateway", &ic.gateway)?,
        ip6: spec_value(&ic.interface, "ip6", &ic.ip6)?,
        gw6: spec_value(&ic.interface, "gateway6", &ic.gateway6)?,
    };
    if config.is_empty() {
        return Ok(None);
    }
    Ok(Some(Want::IpConfig {
        index: nic_index(&ic.interface)?,
        config,
    }))
}

/// The config keys the spec manages, with their wanted values.
pub(super) fn managed(ctx: &Ctx) -> Result<Vec<Want>, String> {
    let spec = ctx.spec;
    let memory = parse_bytes(&spec.memory.0).map_err(|e| format!("memory: {e}"))?;
    let mut wants = vec![
        Want::Name(ctx.vm_name()),
        Want::Cores(spec.cpu.cores),
        Want::Sockets(spec.cpu.sockets),
        Want::Memory(ceil_mib(memory) / MIB),
    ];
    // Notes are only managed when declared; the marker itself is what
    // ownership checks.
    if spec.description.is_some() {
        wants.push(Want::Description(description_value(ctx)));
    }
    if let Some(cpu) = &spec.cpu.type_ {
        wants.push(Want::CpuType(cpu.clone()));
    }
    if let Some(agent) = &spec.agent {
        wants.push(Want::Agent(agent.enabled));
    }
    if let Some(on_boot) = spec.on_boot {
        wants.push(Want::OnBoot(on_boot));
    }
    if !spec.tags.is_empty() {
        wants.push(Want::Tags(Tags::new(spec.tags.iter().cloned())));
    }
    if let Some(hw) = spec.scsi_controller {
        wants.push(Want::ScsiHw(scsi_hw(hw)));
    }
    for dev in &spec.networks {
        wants.push(device(dev)?);
    }
    if let Some(ci) = &spec.cloud_init {
        wants.extend(cloud_init_wants(ci)?);
    }
    wants.extend(super::seed::want(ctx)?);
    wants.extend(hardware::wants(spec)?.into_iter().map(Want::Hw));
    Ok(wants)
}

fn cloud_init_wants(ci: &CloudInit) -> Result<Vec<Want>, String> {
    let mut wants = vec![];
    if let Some(user) = &ci.user {
        wants.push(Want::CiUser(user.clone()));
    }
    if !ci.ssh_keys.is_empty() {
        wants.push(Want::SshKeys(SshKeys::new(&ci.ssh_keys)));
    }
    for ic in &ci.ip_configs {
        wants.extend(ip_config(ic)?);
    }
    if !ci.nameservers.is_empty() {
        let servers = Nameservers::new(ci.nameservers.iter().cloned());
        wants.push(Want::Nameservers(servers));
    }
    if let Some(domain) = &ci.search_domain {
        wants.push(Want::SearchDomain(domain.clone()));
    }
    Ok(wants)
}

/// The description with the owner marker, as created.
pub(super) fn description_value(ctx: &Ctx) -> String {
    owner::description(ctx.spec.description.as_deref(), &ctx.marker_line())
}

/// Every parameter of the create call (except `vmid`), boxed for the step.
pub(super) fn create_params(
    ctx: &Ctx,
    password: Option<&Sensitive>,
) -> Result<Box<Params>, String> {
    let spec = ctx.spec;
    let mut vm = VmParams::default();
    for want in managed(ctx)? {
        want.apply(None, &mut vm);
    }
    vm.description = Some(description_value(ctx).into());
    for disk in &spec.disks {
        vm.disks.insert(
            drive_key(&disk.slot)?,
            disk_create(disk, &ctx.obs.named_images)?,
        );
    }
    if let Some(first) = spec.disks.first() {
        vm.boot = Some(Boot::order([first.slot.as_str()]));
    }
    vm.scsihw.get_or_insert(ScsiHw::VirtioScsiSingle);
    hardware::volumes::create(spec, &mut vm);
    if let Some(ci) = &spec.cloud_init {
        vm.disks
            .insert(drive_key(&ci.drive_slot)?, cloud_init_drive(ci));
        if let Some(password) = password {
            vm.cipassword = Some(Secret::new(password.expose()));
        }
    }
    Ok(Box::new(Params {
        settings: vm,
        pool: spec.pool.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_disks_in_the_model() {
        let dev = NetworkDevice {
            slot: "net0".into(),
            model: NetworkModel::E1000,
            bridge: "vmbr0".into(),
            vlan_tag: Some(20),
            mac: Some("bc:24:11:00:00:09".into()),
            firewall: true,
            vnet: None,
        };
        let Want::Net { index, nic } = device(&dev).unwrap() else {
            panic!("a NIC")
        };
        assert_eq!(index, 0);
        assert_eq!(
            nic.to_string(),
            "e1000=BC:24:11:00:00:09,bridge=vmbr0,firewall=1,tag=20"
        );
        let bad = NetworkDevice {
            mac: Some("01:00:5e:00:00:01".into()),
            ..dev
        };
        assert!(device(&bad).is_err(), "a multicast MAC");

        let empty = Disk {
            slot: "scsi1".into(),
            storage: "local-lvm".into(),
            size: Some("1536Mi".into()),
            import_from: None,
            image: None,
        };
        assert_eq!(
            disk_create(&empty, &BTreeMap::new()).unwrap(),
            Drive::alloc("local-lvm", 2)
        );
        let import = Disk {
            import_from: Some("local:import/x.qcow2".into()),
            ..empty
        };
        assert_eq!(
            disk_create(&import, &BTreeMap::new()).unwrap(),
            Drive::import("local-lvm", "local:import/x.qcow2")
        );
    }

    #[test]
    fn sizes_round_up_to_what_proxmox_allocates() {
        assert_eq!(ceil_mib(1), MIB);
        assert_eq!(ceil_mib(2 * MIB), 2 * MIB);
        assert_eq!(ceil_gib(0), GIB);
        assert_eq!(ceil_gib(GIB + 1), 2 * GIB);
    }
}
