//! A guest's own firewall (`/nodes/{node}/{qemu|lxc}/{vmid}/firewall`):
//! its options and its ordered rules, plain calls that answer at once.
//! The rules are [`crate::firewall::Rule`]s as a security group's are; a
//! guest's may also be `type: group` (the `action` naming the group) and
//! name an interface `netN`. Changes carry the digest they were decided
//! on, so a rule is never changed or deleted by a position that moved.

use reqwest::Method;
use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::firewall::{Rule, RuleSpec};
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;
use crate::snapshot::{Guest, GuestType};

/// A guest's firewall options (`$vm_option_properties`), as read or to
/// set; `None`: not set (PVE's default applies).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct FirewallOptions {
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub enable: Option<bool>,
    #[serde(default)]
    pub policy_in: Option<String>,
    #[serde(default)]
    pub policy_out: Option<String>,
    #[serde(default)]
    pub log_level_in: Option<String>,
    #[serde(default)]
    pub log_level_out: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub macfilter: Option<bool>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub ipfilter: Option<bool>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub dhcp: Option<bool>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub ndp: Option<bool>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub radv: Option<bool>,
    /// The options' digest, as read (never sent from here).
    #[serde(default)]
    pub digest: Option<String>,
}

impl FirewallOptions {
    fn params(&self) -> Params {
        Params::new()
            .opt_flag("enable", self.enable)
            .opt("policy_in", self.policy_in.as_deref())
            .opt("policy_out", self.policy_out.as_deref())
            .opt("log_level_in", self.log_level_in.as_deref())
            .opt("log_level_out", self.log_level_out.as_deref())
            .opt_flag("macfilter", self.macfilter)
            .opt_flag("ipfilter", self.ipfilter)
            .opt_flag("dhcp", self.dhcp)
            .opt_flag("ndp", self.ndp)
            .opt_flag("radv", self.radv)
    }
}

fn path(guest: &Guest, tail: &'static str, pos: Option<usize>) -> ApiPath {
    let vmid = guest.vmid.to_string();
    let pos = pos.map(|p| p.to_string()).unwrap_or_default();
    let template = match (guest.kind, tail, !pos.is_empty()) {
        (GuestType::Qemu, "options", _) => "/nodes/{node}/qemu/{vmid}/firewall/options",
        (GuestType::Qemu, _, false) => "/nodes/{node}/qemu/{vmid}/firewall/rules",
        (GuestType::Qemu, _, true) => "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}",
        (GuestType::Lxc, "options", _) => "/nodes/{node}/lxc/{vmid}/firewall/options",
        (GuestType::Lxc, _, false) => "/nodes/{node}/lxc/{vmid}/firewall/rules",
        (GuestType::Lxc, _, true) => "/nodes/{node}/lxc/{vmid}/firewall/rules/{pos}",
    };
    ApiPath::new(template, &[&guest.node, &vmid, &pos])
}

impl Client {
    /// `GET .../firewall/options`.
    pub async fn guest_firewall_options(&self, guest: &Guest) -> Result<FirewallOptions> {
        self.get(path(guest, "options", None), Params::new()).await
    }

    /// `PUT .../firewall/options`: sets what `set` has, deletes `delete`,
    /// if the options still have `digest`.
    pub async fn set_guest_firewall_options(
        &self,
        guest: &Guest,
        set: &FirewallOptions,
        delete: &[&str],
        digest: Option<&str>,
    ) -> Result<()> {
        let delete = delete.join(",");
        let params = set
            .params()
            .opt("delete", (!delete.is_empty()).then_some(delete))
            .opt("digest", digest);
        self.fw_write(Method::PUT, path(guest, "options", None), params)
            .await
    }

    /// `GET .../firewall/rules`: the rules in order, with the list digest.
    pub async fn guest_firewall_rules(&self, guest: &Guest) -> Result<Vec<Rule>> {
        self.get(path(guest, "rules", None), Params::new()).await
    }

    /// `POST .../firewall/rules`: the rule becomes the guest's first.
    pub async fn create_guest_firewall_rule(&self, guest: &Guest, rule: &RuleSpec) -> Result<()> {
        self.fw_write(Method::POST, path(guest, "rules", None), rule.params())
            .await
    }

    /// `PUT .../firewall/rules/{pos}`: the rule at `pos` becomes `rule`
    /// (the properties it leaves out deleted), if the list still has
    /// `digest`.
    pub async fn set_guest_firewall_rule(
        &self,
        guest: &Guest,
        pos: usize,
        rule: &RuleSpec,
        digest: &str,
    ) -> Result<()> {
        let absent = rule.absent().join(",");
        let params = rule
            .params()
            .opt("delete", (!absent.is_empty()).then_some(absent))
            .text("digest", digest);
        self.fw_write(Method::PUT, path(guest, "rules", Some(pos)), params)
            .await
    }

    /// `PUT .../firewall/rules/{pos}` with `moveto`: the rule goes before
    /// the one at `moveto` (counted before the move), or last.
    pub async fn move_guest_firewall_rule(
        &self,
        guest: &Guest,
        pos: usize,
        moveto: usize,
        digest: Option<&str>,
    ) -> Result<()> {
        let params = Params::new().text("moveto", moveto).opt("digest", digest);
        self.fw_write(Method::PUT, path(guest, "rules", Some(pos)), params)
            .await
    }

    /// `DELETE .../firewall/rules/{pos}`, if the list still has `digest`.
    pub async fn delete_guest_firewall_rule(
        &self,
        guest: &Guest,
        pos: usize,
        digest: Option<&str>,
    ) -> Result<()> {
        let params = Params::new().opt("digest", digest);
        self.fw_write(Method::DELETE, path(guest, "rules", Some(pos)), params)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_read_as_pve_shows_them() {
        let o: FirewallOptions = serde_json::from_value(json!({
            "enable": 1, "ndp": 0, "policy_in": "DROP", "digest": "ab"
        }))
        .unwrap();
        assert_eq!(o.enable, Some(true));
        assert_eq!(o.ndp, Some(false));
        assert_eq!(o.radv, None);
        assert_eq!(o.policy_in.as_deref(), Some("DROP"));
    }

    #[test]
    fn paths_follow_the_guest_type() {
        let ct = Guest {
            kind: GuestType::Lxc,
            node: "pve".into(),
            vmid: 200,
        };
        assert_eq!(
            path(&ct, "rules", Some(3)).rendered,
            "/nodes/pve/lxc/200/firewall/rules/3"
        );
        let vm = Guest {
            kind: GuestType::Qemu,
            ..ct
        };
        assert_eq!(
            path(&vm, "options", None).rendered,
            "/nodes/pve/qemu/200/firewall/options"
        );
    }
}
