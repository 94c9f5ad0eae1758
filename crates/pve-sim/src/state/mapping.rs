//! Cluster resource mappings (`/etc/pve/mapping/pci.cfg`, `usb.cfg`): a
//! name for a device and, per node, which device it is there. Guests name
//! a mapping (`hostpci0: mapping=gpu`); qemu-server looks it up on the node
//! the guest starts on and reserves the PCI device it picks
//! (`/run/qemu-server/pci-id-reservations`), so two running guests never
//! share one.

use std::collections::{BTreeMap, BTreeSet};

use crate::schema::propstr::{HOSTPCI, PCI_MAP, PropFormat, USB_MAP};

/// One mapping: its per-node entries (`node=pve,path=0000:01:00.0,...`),
/// checked against [`PCI_MAP`] or [`USB_MAP`] when written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mapping {
    pub description: Option<String>,
    pub map: Vec<String>,
}

impl Mapping {
    /// The parsed entries that name `node` (`find_on_current_node`).
    fn on_node(&self, format: &PropFormat, node: &str) -> Vec<BTreeMap<String, String>> {
        self.map
            .iter()
            .filter_map(|entry| format.parse("map", entry).ok())
            .filter(|entry| entry.get("node").map(String::as_str) == Some(node))
            .collect()
    }
}

/// The PCI and USB mappings of the cluster, by ID, and the PCI devices
/// running guests hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mappings {
    pub pci: BTreeMap<String, Mapping>,
    pub usb: BTreeMap<String, Mapping>,
    /// (node, PCI ID) → the VMID that reserved it at its last start. A
    /// reservation of a guest that no longer runs is stale and taken over,
    /// as qemu-server does ("leftover PCI reservation found").
    pub reserved: BTreeMap<(String, String), u32>,
}

/// `hostpci` indexes qemu-server walks (`$MAX_HOSTPCI_DEVICES`).
const MAX_HOSTPCI: u32 = 16;

impl Mappings {
    /// The mappings of a kind (`pci` or `usb`).
    pub fn of(&self, kind: &str) -> &BTreeMap<String, Mapping> {
        if kind == "usb" { &self.usb } else { &self.pci }
    }

    pub fn of_mut(&mut self, kind: &str) -> &mut BTreeMap<String, Mapping> {
        if kind == "usb" {
            &mut self.usb
        } else {
            &mut self.pci
        }
    }

    /// The entry format of a kind.
    pub fn format(kind: &str) -> &'static PropFormat {
        if kind == "usb" { &USB_MAP } else { &PCI_MAP }
    }

    /// What a start of `vmid` with `config` on `node` does with its
    /// passthrough devices: the PCI IDs it reserves, or qemu-server's
    /// error. `running` says whether a VMID still runs on `node`.
    pub fn start_devices(
        &self,
        config: &BTreeMap<String, String>,
        node: &str,
        vmid: u32,
        running: impl Fn(u32) -> bool,
    ) -> Result<Vec<String>, String> {
        self.check_usb(config, node)?;
        let held_by_other = |id: &str| {
            self.reserved
                .get(&(node.to_owned(), id.to_owned()))
                .copied()
                .filter(|&other| other != vmid && running(other))
        };
        let mut used = BTreeSet::new();
        for i in 0..MAX_HOSTPCI {
            let key = format!("hostpci{i}");
            let Some(value) = config.get(&key) else {
                continue;
            };
            let dev = HOSTPCI.parse(&key, value)?;
            let alternatives = self.pci_alternatives(&dev, node)?;
            if dev.contains_key("mdev") {
                // Mediated devices are picked when they are created.
                continue;
            }
            let chosen = match alternatives.as_slice() {
                [only] => only.clone(),
                _ => alternatives
                    .iter()
                    .find(|id| !used.contains(*id) && held_by_other(id).is_none())
                    .cloned()
                    .ok_or_else(|| format!("could not find a free device for '{key}'"))?,
            };
            if !used.insert(chosen.clone()) {
                return Err(format!("device '{chosen}' assigned more than once"));
            }
        }
        if let Some((id, other)) = used
            .iter()
            .find_map(|id| held_by_other(id).map(|other| (id, other)))
        {
            return Err(format!(
                "PCI device '{id}' already in use by VMID '{other}'"
            ));
        }
        Ok(used.into_iter().collect())
    }

    /// Records the PCI IDs a started guest holds.
    pub fn reserve(&mut self, node: &str, vmid: u32, ids: Vec<String>) {
        self.reserved.retain(|(n, _), v| !(n == node && *v == vmid));
        for id in ids {
            self.reserved.insert((node.to_owned(), id), vmid);
        }
    }

    /// The PCI IDs one `hostpciN` may use on `node`, in order of preference
    /// (`parse_hostpci`: a `;` list, from the node's mapping entries or `host`).
    fn pci_alternatives(
        &self,
        dev: &BTreeMap<String, String>,
        node: &str,
    ) -> Result<Vec<String>, String> {
        let paths: Vec<String> = match (dev.get("host"), dev.get("mapping")) {
            (Some(_), Some(_)) => return Err("Cannot set both 'host' and 'mapping'.".into()),
            (_, Some(name)) => {
                let entries = self
                    .pci
                    .get(name)
                    .map(|m| m.on_node(&PCI_MAP, node))
                    .unwrap_or_default();
                if entries.is_empty() {
                    return Err(format!("PCI device mapping not found for '{name}'"));
                }
                entries
                    .iter()
                    .filter_map(|e| e.get("path").cloned())
                    .collect()
            }
            (Some(host), None) => vec![host.clone()],
            (None, None) => return Err("Either 'host' or 'mapping' must be set.".into()),
        };
        Ok(paths
            .iter()
            .flat_map(|p| p.split(';'))
            .map(full_pci_id)
            .collect())
    }

    /// `usbN: mapping=NAME` needs exactly one entry for `node`.
    fn check_usb(&self, config: &BTreeMap<String, String>, node: &str) -> Result<(), String> {
        for (_, value) in config.iter().filter(|(k, _)| k.starts_with("usb")) {
            let Some(name) = value
                .split(',')
                .find_map(|part| part.strip_prefix("mapping="))
            else {
                continue;
            };
            let entries = self
                .usb
                .get(name)
                .map(|m| m.on_node(&USB_MAP, node))
                .unwrap_or_default();
            match entries.len() {
                0 => return Err(format!("USB device mapping not found for '{name}'")),
                1 => {}
                _ => return Err("More than one USB mapping per host not supported".into()),
            }
        }
        Ok(())
    }
}

/// `01:00.0` is `0000:01:00.0` (lspci names the PCI domain).
fn full_pci_id(id: &str) -> String {
    if id.matches(':').count() == 1 {
        format!("0000:{id}")
    } else {
        id.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn gpu_on_pve() -> Mappings {
        let mut m = Mappings::default();
        m.pci.insert(
            "gpu".into(),
            Mapping {
                description: None,
                map: vec!["node=pve,path=0000:01:00.0;0000:02:00.0,id=10de:2204".into()],
            },
        );
        m.usb.insert(
            "key".into(),
            Mapping {
                description: None,
                map: vec!["node=pve,id=1050:0407".into()],
            },
        );
        m
    }

    #[test]
    fn a_guest_starts_where_its_mappings_are() {
        let m = gpu_on_pve();
        let cfg = config(&[("hostpci0", "mapping=gpu,pcie=1"), ("usb0", "mapping=key")]);
        assert_eq!(
            m.start_devices(&cfg, "pve", 100, |_| false),
            Ok(vec!["0000:01:00.0".to_owned()])
        );
        assert_eq!(
            m.start_devices(&cfg, "pve2", 100, |_| false),
            Err("USB device mapping not found for 'key'".to_owned())
        );
        let pci_only = config(&[("hostpci0", "mapping=gpu")]);
        assert_eq!(
            m.start_devices(&pci_only, "pve2", 100, |_| false),
            Err("PCI device mapping not found for 'gpu'".to_owned())
        );
    }

    #[test]
    fn a_running_guest_keeps_its_device_and_others_take_the_next() {
        let mut m = gpu_on_pve();
        let gpu = config(&[("hostpci0", "mapping=gpu")]);
        let first = m
            .start_devices(&gpu, "pve", 100, |_| false)
            .unwrap_or_default();
        m.reserve("pve", 100, first);
        assert_eq!(
            m.start_devices(&gpu, "pve", 101, |v| v == 100),
            Ok(vec!["0000:02:00.0".to_owned()])
        );
        m.reserve("pve", 101, vec!["0000:02:00.0".to_owned()]);
        assert_eq!(
            m.start_devices(&gpu, "pve", 102, |v| v == 100 || v == 101),
            Err("could not find a free device for 'hostpci0'".to_owned())
        );
        // A stopped holder's reservation is stale.
        assert!(m.start_devices(&gpu, "pve", 102, |v| v == 101).is_ok());
        // One device, no alternative: qemu-server's reservation error.
        let host = config(&[("hostpci0", "host=02:00.0")]);
        assert_eq!(
            m.start_devices(&host, "pve", 102, |v| v == 101),
            Err("PCI device '0000:02:00.0' already in use by VMID '101'".to_owned())
        );
    }
}
