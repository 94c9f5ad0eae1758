//! The spec, rendered as Proxmox config values, each with the way an
//! observed value is compared with it (Proxmox does not echo everything back
//! as written: tag order and case, MAC addresses it generated, URL-encoded
//! SSH keys, `cputype=` prefixes, defaults left out).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use super::context::Ctx;
use super::output::{Param, Params, Sensitive};
use super::owner;
use crate::api::{
    quantity::parse_bytes,
    vm::{CloudInit, Disk, IpConfig, NetworkDevice, ScsiController},
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// How an observed value is compared with the wanted one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Cmp {
    /// Equal after trimming.
    Text,
    /// Equal numbers; an absent key means `default`.
    Number(u64),
    /// Equal booleans (`1`/`0`); an absent key means `default`.
    Flag(bool),
    /// The agent option: `1`, `0` or `enabled=1,...`.
    Agent,
    /// The CPU model: first item, without a `cputype=` prefix.
    CpuType,
    /// Tags: same set, ignoring case and order.
    Tags,
    /// The description: the user's part must match (the marker is checked
    /// by ownership).
    Description,
    /// A network device; the MAC only counts when declared.
    Net {
        /// Whether the spec declares the MAC.
        mac: bool,
    },
    /// `k=v,k=v` lists compared as maps (ipconfig).
    KeyValues,
    /// Lists separated by space, `,` or `;` (nameserver).
    List,
    /// URL-encoded SSH keys, compared key by key.
    SshKeys,
}

/// One managed config key and its wanted value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Want {
    pub key: String,
    pub value: String,
    pub cmp: Cmp,
}

impl Want {
    fn new(key: impl Into<String>, value: impl Into<String>, cmp: Cmp) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            cmp,
        }
    }

    /// Whether `observed` (absent: `None`) already says what is wanted.
    pub fn matches(&self, observed: Option<&str>) -> bool {
        let want = self.value.as_str();
        match (&self.cmp, observed) {
            (Cmp::Number(default), None) => want.parse() == Ok(*default),
            (Cmp::Flag(default), None) => flag(want) == *default,
            (Cmp::Description, None) => owner::user_part(want).is_empty(),
            (_, None) => false,
            (Cmp::Text, Some(have)) => have.trim() == want.trim(),
            (Cmp::Number(_), Some(have)) => have.trim().parse::<u64>() == want.parse(),
            (Cmp::Flag(_), Some(have)) => flag(have) == flag(want),
            (Cmp::Agent, Some(have)) => agent_enabled(have) == flag(want),
            (Cmp::CpuType, Some(have)) => cpu_type(have) == want,
            (Cmp::Tags, Some(have)) => tag_set(have) == tag_set(want),
            (Cmp::Description, Some(have)) => owner::user_part(have) == owner::user_part(want),
            (Cmp::Net { mac }, Some(have)) => Net::parse(have).same_as(&Net::parse(want), *mac),
            (Cmp::KeyValues, Some(have)) => key_values(have) == key_values(want),
            (Cmp::List, Some(have)) => list(have) == list(want),
            (Cmp::SshKeys, Some(have)) => ssh_key_lines(have) == ssh_key_lines(want),
        }
    }

    /// The value to write, keeping what Proxmox chose and the spec leaves
    /// open (a generated MAC address).
    pub fn value_given(&self, observed: Option<&str>) -> String {
        match (&self.cmp, observed) {
            (Cmp::Net { mac: false }, Some(have)) => match Net::parse(have).mac {
                Some(mac) => with_mac(&self.value, &mac),
                None => self.value.clone(),
            },
            _ => self.value.clone(),
        }
    }
}

fn flag(v: &str) -> bool {
    matches!(v.trim(), "1" | "on" | "yes" | "true")
}

pub(super) fn agent_enabled(v: &str) -> bool {
    let first = v.split(',').next().unwrap_or_default();
    match first.split_once('=') {
        Some(("enabled", value)) => flag(value),
        Some(_) => false,
        None => flag(first),
    }
}

fn cpu_type(v: &str) -> &str {
    let first = v.split(',').next().unwrap_or_default().trim();
    first.strip_prefix("cputype=").unwrap_or(first)
}

fn tag_set(v: &str) -> std::collections::BTreeSet<String> {
    v.split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn key_values(v: &str) -> std::collections::BTreeMap<String, String> {
    v.split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn list(v: &str) -> Vec<&str> {
    v.split([' ', ',', ';']).filter(|s| !s.is_empty()).collect()
}

/// RFC 3986 unreserved characters stay; everything else is escaped, which
/// is what Proxmox's `sshkeys` format accepts (a space must be `%20`).
const SSH_KEYS: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn ssh_key_lines(encoded: &str) -> Vec<String> {
    percent_decode_str(encoded)
        .decode_utf8_lossy()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect()
}

/// The `sshkeys` value: keys joined by newlines, percent-encoded.
pub(super) fn ssh_keys_value(keys: &[String]) -> String {
    utf8_percent_encode(&keys.join("\n"), SSH_KEYS).to_string()
}

/// A `net<n>` value, parsed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Net {
    model: String,
    mac: Option<String>,
    bridge: Option<String>,
    tag: Option<String>,
    firewall: bool,
}

impl Net {
    fn parse(v: &str) -> Self {
        let mut net = Net::default();
        for (i, item) in v.split(',').enumerate() {
            let (k, val) = item.split_once('=').unwrap_or((item, ""));
            match k {
                "bridge" => net.bridge = Some(val.to_owned()),
                "tag" => net.tag = Some(val.to_owned()),
                "firewall" => net.firewall = flag(val),
                "macaddr" => net.mac = Some(val.to_uppercase()),
                _ if i == 0 => {
                    net.model = k.to_owned();
                    net.mac = (!val.is_empty()).then(|| val.to_uppercase());
                }
                _ => {}
            }
        }
        net
    }

    fn same_as(&self, want: &Net, compare_mac: bool) -> bool {
        self.model == want.model
            && self.bridge == want.bridge
            && self.tag == want.tag
            && self.firewall == want.firewall
            && (!compare_mac || self.mac == want.mac)
    }
}

fn with_mac(value: &str, mac: &str) -> String {
    match value.split_once(',') {
        Some((model, rest)) => format!("{}={mac},{rest}", model.split('=').next().unwrap_or(model)),
        None => format!("{value}={mac}"),
    }
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
    let marker = owner::marker_line(
        ctx.vm.metadata.namespace.as_deref().unwrap_or_default(),
        ctx.vm.metadata.name.as_deref().unwrap_or_default(),
        ctx.uid(),
    );
    owner::description(ctx.spec.description.as_deref(), &marker)
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

    fn want(value: &str, cmp: Cmp) -> Want {
        Want::new("k", value, cmp)
    }

    #[test]
    fn comparisons_normalise_what_proxmox_echoes() {
        let keys = ssh_keys_value(&["ssh-ed25519 AAAA a@b".into(), "ssh-rsa BBBB+/= c".into()]);
        // (case, wanted, observed, same?)
        let cases: Vec<(&str, Want, Option<&str>, bool)> = vec![
            (
                "tags order and case",
                want("web;Prod", Cmp::Tags),
                Some("prod;web"),
                true,
            ),
            ("tags differ", want("web", Cmp::Tags), Some("web;db"), false),
            ("cores default", want("1", Cmp::Number(1)), None, true),
            ("cores differ", want("2", Cmp::Number(1)), Some("1"), false),
            (
                "onboot absent means off",
                want("0", Cmp::Flag(false)),
                None,
                true,
            ),
            (
                "agent with options",
                want("1", Cmp::Agent),
                Some("enabled=1,fstrim_cloned_disks=1"),
                true,
            ),
            ("agent plain", want("1", Cmp::Agent), Some("0"), false),
            (
                "cpu with flags",
                want("host", Cmp::CpuType),
                Some("cputype=host,flags=+aes"),
                true,
            ),
            (
                "generated mac ignored",
                want("virtio,bridge=vmbr0,tag=10", Cmp::Net { mac: false }),
                Some("virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10"),
                true,
            ),
            (
                "declared mac compared",
                want(
                    "virtio=BC:24:11:00:00:02,bridge=vmbr0",
                    Cmp::Net { mac: true },
                ),
                Some("virtio=bc:24:11:00:00:01,bridge=vmbr0"),
                false,
            ),
            (
                "bridge differs",
                want("virtio,bridge=vmbr1", Cmp::Net { mac: false }),
                Some("virtio=BC:24:11:00:00:01,bridge=vmbr0"),
                false,
            ),
            (
                "ipconfig order",
                want("ip=10.0.0.5/24,gw=10.0.0.1", Cmp::KeyValues),
                Some("gw=10.0.0.1,ip=10.0.0.5/24"),
                true,
            ),
            (
                "nameservers",
                want("1.1.1.1 9.9.9.9", Cmp::List),
                Some("1.1.1.1,9.9.9.9"),
                true,
            ),
            (
                "ssh keys as echoed",
                want(&keys, Cmp::SshKeys),
                Some(keys.as_str()),
                true,
            ),
            (
                "ssh keys missing one",
                want(&keys, Cmp::SshKeys),
                Some("ssh-ed25519%20AAAA%20a%40b"),
                false,
            ),
            (
                "description user part",
                want(
                    "notes\n\nManaged by crossplane-provider-proxmox: x uid=1",
                    Cmp::Description,
                ),
                Some("notes\n\nManaged by crossplane-provider-proxmox: x uid=1\n"),
                true,
            ),
        ];
        for (name, w, observed, same) in cases {
            assert_eq!(w.matches(observed), same, "{name}");
        }
    }

    #[test]
    fn ssh_keys_encode_as_proxmox_wants() {
        let v = ssh_keys_value(&["ssh-ed25519 AA+B= me@host".into(), "ssh-rsa CC x".into()]);
        assert_eq!(v, "ssh-ed25519%20AA%2BB%3D%20me%40host%0Assh-rsa%20CC%20x");
    }

    #[test]
    fn a_changed_device_keeps_its_generated_mac() {
        let w = want("virtio,bridge=vmbr1,tag=5", Cmp::Net { mac: false });
        let observed = "virtio=BC:24:11:00:00:01,bridge=vmbr0";
        assert_eq!(
            w.value_given(Some(observed)),
            "virtio=BC:24:11:00:00:01,bridge=vmbr1,tag=5"
        );
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
