//! Which changes a running VM takes at once, after qemu-server's
//! `vmconfig_hotplug_pending`: the "fast plug" options, and what the VM's
//! `hotplug` features cover. Everything else waits in the pending config
//! for the next start.

use std::collections::BTreeMap;

use crate::schema::propstr;

/// Options that never touch the running VM (qemu-server's
/// `$fast_plug_option`), and `cipassword`, which the API writes directly.
const FAST: &[&str] = &[
    "name",
    "description",
    "tags",
    "onboot",
    "protection",
    "startup",
    "cipassword",
    "hookscript",
    "shares",
    "migrate_downtime",
    "migrate_speed",
    "vmstatestorage",
];

/// `parse_hotplug_features`: `0` none, `1` (or absent) the default
/// `network,disk,usb`.
fn features(config: &BTreeMap<String, String>) -> Vec<&str> {
    match config.get("hotplug").map(String::as_str) {
        Some("0") => vec![],
        None | Some("1") => vec!["network", "disk", "usb"],
        Some(list) => list
            .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
            .filter(|f| !f.is_empty())
            .collect(),
    }
}

/// `windows_version` > 7 or Linux: the guests qemu-server hot-plugs USB
/// into (machine version 7.1 or later, which every machine the simulator
/// starts is, unless pinned older).
fn usb_hotplug_guest(config: &BTreeMap<String, String>) -> bool {
    let modern_os = matches!(
        config.get("ostype").map(String::as_str),
        Some("l26" | "win8" | "win10" | "win11")
    );
    let version = config
        .get("machine")
        .and_then(|m| propstr::MACHINE.parse("machine", m).ok())
        .and_then(|m| m.get("type").cloned())
        .and_then(|t| {
            // `pc-q35-6.2+pve1` → `6.2`; `q35`, `pc`: the newest.
            let digits: String = t
                .rsplit('-')
                .next()?
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let mut parts = digits.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next()??))
        });
    modern_os && version.is_none_or(|v| v >= (7, 1))
}

/// The balloon device exists unless `balloon` is 0.
fn balloon_enabled(value: Option<&str>) -> bool {
    value.is_none_or(|b| b.trim() != "0")
}

/// Whether setting `key` to `value` (`None`: deleting it) on the running
/// VM with `config` takes effect at once.
pub fn applies_now(config: &BTreeMap<String, String>, key: &str, value: Option<&str>) -> bool {
    let indexed = |prefix: &str| {
        key.strip_prefix(prefix)
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
    };
    let has = |feature: &str| features(config).contains(&feature);
    if FAST.contains(&key) || indexed("unused") {
        return true;
    }
    if indexed("net") {
        return has("network");
    }
    if indexed("scsi") || indexed("virtio") {
        return has("disk");
    }
    if indexed("usb") {
        return has("usb") && usb_hotplug_guest(config);
    }
    let cpu_or_memory =
        |v: Option<&str>| v.is_some_and(|h| h.contains("cpu") || h.contains("memory"));
    match key {
        // Hot-plug itself changes at once unless CPU or memory hot-plug
        // is involved on either side.
        "hotplug" => {
            !cpu_or_memory(config.get("hotplug").map(String::as_str)) && !cpu_or_memory(value)
        }
        // The balloon target moves at once; adding or removing the device
        // waits.
        "balloon" => {
            balloon_enabled(config.get("balloon").map(String::as_str)) == balloon_enabled(value)
        }
        "cpuunits" | "cpulimit" => true,
        "vcpus" => has("cpu"),
        "memory" => has("memory"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn what_a_running_vm_takes_at_once() {
        let plain = config(&[("ostype", "l26")]);
        for (key, value, now) in [
            ("name", Some("x"), true),
            ("protection", Some("1"), true),
            ("startup", Some("order=1"), true),
            ("net0", Some("virtio,bridge=vmbr0"), true),
            ("scsi1", Some("local-lvm:1"), true),
            ("sata1", Some("local-lvm:1"), false),
            ("efidisk0", Some("local-lvm:1"), false),
            ("usb0", Some("mapping=token"), true),
            ("hostpci0", Some("mapping=gpu"), false),
            ("serial0", Some("socket"), false),
            ("vga", Some("serial0"), false),
            ("bios", Some("ovmf"), false),
            ("machine", Some("q35"), false),
            ("cpu", Some("host"), false),
            ("numa", Some("1"), false),
            ("rng0", Some("/dev/urandom"), false),
            ("balloon", Some("1024"), true),
            ("balloon", Some("0"), false),
            ("hotplug", Some("network"), true),
            ("hotplug", Some("network,memory"), false),
            ("memory", Some("4096"), false),
        ] {
            assert_eq!(applies_now(&plain, key, value), now, "{key}={value:?}");
        }
        let none = config(&[("hotplug", "0"), ("ostype", "l26"), ("balloon", "0")]);
        assert!(!applies_now(&none, "net0", Some("virtio,bridge=vmbr0")));
        assert!(
            !applies_now(&none, "balloon", Some("1024")),
            "adding the device"
        );
        assert!(!applies_now(&none, "balloon", None));
        let other_os = config(&[]);
        assert!(!applies_now(&other_os, "usb0", Some("mapping=token")));
        let old_machine = config(&[("ostype", "win11"), ("machine", "pc-q35-6.2")]);
        assert!(!applies_now(&old_machine, "usb0", Some("mapping=token")));
        let mem = config(&[("hotplug", "network,disk,memory"), ("numa", "1")]);
        assert!(applies_now(&mem, "memory", Some("4096")));
        assert!(!applies_now(&mem, "hotplug", Some("network")));
    }
}
