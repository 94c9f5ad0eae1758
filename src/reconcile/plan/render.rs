//! The spec, rendered as Proxmox config values: the create call's
//! parameters and the managed keys drift is checked against.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::compare::{Cmp, Want};
use super::context::Ctx;
use super::output::{Param, Params, Sensitive};
use super::owner;
use crate::api::{
    quantity::parse_bytes,
    vm::{CloudInit, Disk, IpConfig, NetworkDevice, ScsiController},
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// RFC 3986 unreserved characters stay; everything else is escaped, which
/// is what Proxmox's `sshkeys` format accepts (a space must be `%20`).
const SSH_KEYS: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The `sshkeys` value: keys joined by newlines, percent-encoded.
pub(super) fn ssh_keys_value(keys: &[String]) -> String {
    utf8_percent_encode(&keys.join("\n"), SSH_KEYS).to_string()
}

/// The `net<n>` value for a device.
pub(super) fn net_value(dev: &NetworkDevice) -> String {
    let mut v = dev.model.as_str().to_owned();
    if let Some(mac) = &dev.mac {
        v.push('=');
        v.push_str(&mac.to_uppercase());
    }
    v.push_str(",bridge=");
    v.push_str(&dev.bridge);
    if let Some(tag) = dev.vlan_tag {
        v.push_str(&format!(",tag={tag}"));
    }
    if dev.firewall {
        v.push_str(",firewall=1");
    }
    v
}

/// The `ipconfig<n>` value, or `None` when the entry sets nothing.
pub(super) fn ip_config_value(ic: &IpConfig) -> Option<String> {
    let parts: Vec<String> = [
        ("ip", &ic.ip),
        ("gw", &ic.gateway),
        ("ip6", &ic.ip6),
        ("gw6", &ic.gateway6),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
    .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

/// Bytes rounded up to whole MiB (Proxmox sizes are MiB-exact).
pub(super) fn ceil_mib(bytes: u64) -> u64 {
    bytes.div_ceil(MIB) * MIB
}

/// Bytes rounded up to whole GiB (new empty disks are allocated in GiB).
pub(super) fn ceil_gib(bytes: u64) -> u64 {
    bytes.div_ceil(GIB).max(1) * GIB
}

/// A disk size as Proxmox writes it in a drive string (`size=2252M`).
pub(super) fn drive_size(value: &str) -> Option<u64> {
    let size = value
        .split(',')
        .find_map(|item| item.strip_prefix("size="))?;
    let (number, unit) = size.split_at(
        size.find(|c: char| c.is_ascii_alphabetic())
            .unwrap_or(size.len()),
    );
    let n: f64 = number.parse().ok()?;
    let scale = match unit {
        "" => 1u64,
        "K" => 1 << 10,
        "M" => MIB,
        "G" => GIB,
        "T" => 1 << 40,
        _ => return None,
    };
    Some((n * scale as f64).round() as u64)
}

/// The size of a disk in the spec, in bytes.
pub(super) fn disk_bytes(disk: &Disk) -> Result<Option<u64>, String> {
    disk.size
        .as_ref()
        .map(|q| parse_bytes(&q.0).map_err(|e| format!("disk {}: {e}", disk.slot)))
        .transpose()
}

/// The drive value that creates a disk: `local-lvm:0,import-from=...` for an
/// import, `local-lvm:<GiB>` for an empty disk.
pub(super) fn disk_create_value(disk: &Disk) -> Result<String, String> {
    let source = disk
        .import_from
        .clone()
        .or_else(|| disk.image.as_ref().map(|i| i.volume()));
    match source {
        Some(volume) => Ok(format!("{}:0,import-from={volume}", disk.storage)),
        None => {
            let bytes = disk_bytes(disk)?.unwrap_or(GIB);
            Ok(format!("{}:{}", disk.storage, ceil_gib(bytes) / GIB))
        }
    }
}

/// The cloud-init drive value (`local-lvm:cloudinit`).
pub(super) fn cloud_init_drive(ci: &CloudInit) -> String {
    format!("{}:cloudinit", ci.storage)
}

/// The config keys the spec manages, with their wanted values.
pub(super) fn managed(ctx: &Ctx) -> Result<Vec<Want>, String> {
    let spec = ctx.spec;
    let memory = parse_bytes(&spec.memory.0).map_err(|e| format!("memory: {e}"))?;
    let mut wants = vec![
        Want::new("name", ctx.vm_name(), Cmp::Text),
        Want::new("cores", spec.cpu.cores.to_string(), Cmp::Number(1)),
        Want::new("sockets", spec.cpu.sockets.to_string(), Cmp::Number(1)),
        Want::new(
            "memory",
            (ceil_mib(memory) / MIB).to_string(),
            Cmp::Number(512),
        ),
    ];
    // Notes are only managed when declared; the marker itself is what
    // ownership checks.
    if spec.description.is_some() {
        wants.push(Want::new(
            "description",
            description_value(ctx),
            Cmp::Description,
        ));
    }
    if let Some(cpu) = &spec.cpu.type_ {
        wants.push(Want::new("cpu", cpu.clone(), Cmp::CpuType));
    }
    if let Some(agent) = &spec.agent {
        wants.push(Want::new("agent", bool_value(agent.enabled), Cmp::Agent));
    }
    if let Some(on_boot) = spec.on_boot {
        wants.push(Want::new("onboot", bool_value(on_boot), Cmp::Flag(false)));
    }
    if !spec.tags.is_empty() {
        wants.push(Want::new("tags", spec.tags.join(";"), Cmp::Tags));
    }
    if let Some(hw) = spec.scsi_controller {
        wants.push(Want::new("scsihw", hw.as_str(), Cmp::Text));
    }
    for dev in &spec.networks {
        let cmp = Cmp::Net {
            mac: dev.mac.is_some(),
        };
        wants.push(Want::new(dev.slot.clone(), net_value(dev), cmp));
    }
    if let Some(ci) = &spec.cloud_init {
        wants.extend(cloud_init_wants(ci));
    }
    Ok(wants)
}

fn cloud_init_wants(ci: &CloudInit) -> Vec<Want> {
    let mut wants = vec![];
    if let Some(user) = &ci.user {
        wants.push(Want::new("ciuser", user.clone(), Cmp::Text));
    }
    if !ci.ssh_keys.is_empty() {
        wants.push(Want::new(
            "sshkeys",
            ssh_keys_value(&ci.ssh_keys),
            Cmp::SshKeys,
        ));
    }
    for ic in &ci.ip_configs {
        if let Some(value) = ip_config_value(ic) {
            let n = ic.interface.trim_start_matches("net");
            wants.push(Want::new(format!("ipconfig{n}"), value, Cmp::KeyValues));
        }
    }
    if !ci.nameservers.is_empty() {
        wants.push(Want::new("nameserver", ci.nameservers.join(" "), Cmp::List));
    }
    if let Some(domain) = &ci.search_domain {
        wants.push(Want::new("searchdomain", domain.clone(), Cmp::Text));
    }
    wants
}

/// The description with the owner marker, as created.
pub(super) fn description_value(ctx: &Ctx) -> String {
    owner::description(ctx.spec.description.as_deref(), &ctx.marker_line())
}

fn bool_value(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// Every parameter of the create call (except `vmid`).
pub(super) fn create_params(ctx: &Ctx, password: Option<&Sensitive>) -> Result<Params, String> {
    let spec = ctx.spec;
    let mut params: Params = managed(ctx)?
        .into_iter()
        .map(|w| (w.key, Param::Plain(w.value)))
        .collect();
    let plain = |v: String| Param::Plain(v);
    params.insert("description".into(), plain(description_value(ctx)));
    for disk in &spec.disks {
        params.insert(disk.slot.clone(), plain(disk_create_value(disk)?));
    }
    if let Some(first) = spec.disks.first() {
        params.insert("boot".into(), plain(format!("order={}", first.slot)));
    }
    if !params.contains_key("scsihw") {
        let hw = ScsiController::VirtioScsiSingle.as_str().to_owned();
        params.insert("scsihw".into(), plain(hw));
    }
    if let Some(ci) = &spec.cloud_init {
        params.insert(ci.drive_slot.clone(), plain(cloud_init_drive(ci)));
        if let Some(password) = password {
            params.insert("cipassword".into(), Param::Secret(password.clone()));
        }
    }
    if let Some(pool) = &spec.pool {
        params.insert("pool".into(), plain(pool.clone()));
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vm::NetworkModel;

    #[test]
    fn ssh_keys_encode_as_proxmox_wants() {
        let v = ssh_keys_value(&["ssh-ed25519 AA+B= me@host".into(), "ssh-rsa CC x".into()]);
        assert_eq!(v, "ssh-ed25519%20AA%2BB%3D%20me%40host%0Assh-rsa%20CC%20x");
    }

    #[test]
    fn renders_devices_and_disks() {
        let dev = NetworkDevice {
            slot: "net0".into(),
            model: NetworkModel::E1000,
            bridge: "vmbr0".into(),
            vlan_tag: Some(20),
            mac: Some("bc:24:11:00:00:09".into()),
            firewall: true,
        };
        assert_eq!(
            net_value(&dev),
            "e1000=BC:24:11:00:00:09,bridge=vmbr0,tag=20,firewall=1"
        );
        let empty = Disk {
            slot: "scsi1".into(),
            storage: "local-lvm".into(),
            size: Some("1536Mi".into()),
            import_from: None,
            image: None,
        };
        assert_eq!(disk_create_value(&empty).unwrap(), "local-lvm:2");
        let import = Disk {
            import_from: Some("local:import/x.qcow2".into()),
            ..empty
        };
        assert_eq!(
            disk_create_value(&import).unwrap(),
            "local-lvm:0,import-from=local:import/x.qcow2"
        );
    }

    #[test]
    fn reads_drive_sizes() {
        assert_eq!(
            drive_size("local-lvm:vm-100-disk-0,size=2252M"),
            Some(2252 * MIB)
        );
        assert_eq!(
            drive_size("local-lvm:vm-100-disk-0,discard=on,size=10G"),
            Some(10 * GIB)
        );
        assert_eq!(
            drive_size("local:100/vm-100-disk-0.qcow2,size=512K"),
            Some(512 * 1024)
        );
        assert_eq!(drive_size("local-lvm:vm-100-cloudinit,media=cdrom"), None);
    }
}
