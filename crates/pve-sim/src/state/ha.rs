//! HA configuration (`/etc/pve/ha/resources.cfg`, `groups.cfg` on PVE 8,
//! `rules.cfg` on PVE 9) and what the HA manager reports about it.

use std::collections::BTreeMap;

use super::Vm;

/// One HA resource (`vm:100`): its requested state and options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HaResource {
    /// `started`, `stopped`, `disabled` or `ignored`.
    pub state: String,
    /// Other options as written (`group`, `comment`, `max_restart`, ...).
    pub options: BTreeMap<String, String>,
}

/// A section of groups.cfg or rules.cfg: its type and options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HaSection {
    pub kind: String,
    pub options: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default)]
pub struct Ha {
    pub resources: BTreeMap<String, HaResource>,
    /// PVE 8 HA groups.
    pub groups: BTreeMap<String, HaSection>,
    /// PVE 9 HA rules (`node-affinity`, `resource-affinity`).
    pub rules: BTreeMap<String, HaSection>,
}

impl Ha {
    /// The HA service ID of a guest (`vm:100`, `ct:101`).
    pub fn sid(vm: &Vm) -> String {
        format!("{}:{}", vm.kind.ha_type(), vm.vmid)
    }

    pub fn is_managed(&self, vm: &Vm) -> bool {
        self.resources.contains_key(&Self::sid(vm))
    }

    /// The manager's view of a guest's service (`hastate`), if HA-managed.
    pub fn service_state(&self, vm: &Vm) -> Option<String> {
        let res = self.resources.get(&Self::sid(vm))?;
        Some(match res.state.as_str() {
            "started" if vm.is_running() => "started".to_owned(),
            "started" => "starting".to_owned(),
            other => other.to_owned(),
        })
    }

    /// pve-ha-manager's `delete_service_from_config` with purge: the
    /// resource goes, and so does it from every rule (a rule left without
    /// resources goes too). Whether it was configured.
    pub fn remove_resource(&mut self, sid: &str) -> bool {
        if self.resources.remove(sid).is_none() {
            return false;
        }
        for rule in self.rules.values_mut() {
            if let Some(res) = rule.options.get_mut("resources") {
                *res = res
                    .split(',')
                    .map(str::trim)
                    .filter(|r| !r.is_empty() && *r != sid)
                    .collect::<Vec<_>>()
                    .join(",");
            }
        }
        self.rules
            .retain(|_, r| r.options.get("resources").is_some_and(|r| !r.is_empty()));
        true
    }

    /// The manager's node status (`online`), once anything is HA-managed.
    pub fn node_state(&self, _node: &str) -> Option<&'static str> {
        (!self.resources.is_empty()).then_some("online")
    }
}
