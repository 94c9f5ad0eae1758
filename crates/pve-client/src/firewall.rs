//! The cluster firewall's shared objects: security groups with their
//! ordered rules (`/cluster/firewall/groups`) and IP sets with their
//! entries (`/cluster/firewall/ipset`). Plain calls that answer at once.
//!
//! Every list carries a digest of its content; a change sent with the
//! digest it was decided on is refused when the list changed since, so a
//! rule is never changed or deleted by a position that moved.

use reqwest::Method;
use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;

/// An entry of `GET /cluster/firewall/groups` or `/cluster/firewall/ipset`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Named {
    /// The group's or set's name.
    #[serde(alias = "group")]
    pub name: String,
    #[serde(default)]
    pub comment: Option<String>,
}

/// A rule of a security group, as listed (`GET .../groups/{group}`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Rule {
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub pos: Option<u64>,
    /// `in`, `out` or `forward`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `ACCEPT`, `DROP` or `REJECT`.
    pub action: String,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub enable: Option<u64>,
    #[serde(default)]
    pub proto: Option<String>,
    #[serde(default)]
    pub dport: Option<String>,
    #[serde(default)]
    pub sport: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub dest: Option<String>,
    #[serde(default)]
    pub iface: Option<String>,
    #[serde(default)]
    pub log: Option<String>,
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default, rename = "icmp-type")]
    pub icmp_type: Option<String>,
    #[serde(default, rename = "macro")]
    pub macro_name: Option<String>,
    /// The rule list's digest.
    #[serde(default)]
    pub digest: Option<String>,
}

/// The properties of a rule to create or set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleSpec {
    pub kind: String,
    pub action: String,
    pub enable: bool,
    pub proto: Option<String>,
    pub dport: Option<String>,
    pub sport: Option<String>,
    pub source: Option<String>,
    pub dest: Option<String>,
    pub iface: Option<String>,
    pub log: Option<String>,
    pub comment: Option<String>,
    pub icmp_type: Option<String>,
    /// A PVE macro (`SSH`, `HTTP`, ...): never sent by this provider, read
    /// so a rule given one on Proxmox differs from one without.
    pub macro_name: Option<String>,
}

/// The optional properties a [`RuleSpec`] may leave out, by API name.
pub const RULE_OPTIONAL: &[&str] = &[
    "proto",
    "dport",
    "sport",
    "source",
    "dest",
    "iface",
    "log",
    "comment",
    "icmp-type",
    "macro",
];

impl RuleSpec {
    pub(crate) fn params(&self) -> Params {
        Params::new()
            .text("type", &self.kind)
            .text("action", &self.action)
            .text("enable", u8::from(self.enable))
            .opt("proto", self.proto.as_deref())
            .opt("dport", self.dport.as_deref())
            .opt("sport", self.sport.as_deref())
            .opt("source", self.source.as_deref())
            .opt("dest", self.dest.as_deref())
            .opt("iface", self.iface.as_deref())
            .opt("log", self.log.as_deref())
            .opt("comment", self.comment.as_deref())
            .opt("icmp-type", self.icmp_type.as_deref())
            .opt("macro", self.macro_name.as_deref())
    }

    /// The optional properties it leaves out (to delete from a rule it
    /// replaces).
    pub fn absent(&self) -> Vec<&'static str> {
        let set = [
            self.proto.is_some(),
            self.dport.is_some(),
            self.sport.is_some(),
            self.source.is_some(),
            self.dest.is_some(),
            self.iface.is_some(),
            self.log.is_some(),
            self.comment.is_some(),
            self.icmp_type.is_some(),
            self.macro_name.is_some(),
        ];
        RULE_OPTIONAL
            .iter()
            .zip(set)
            .filter(|(_, present)| !present)
            .map(|(k, _)| *k)
            .collect()
    }
}

/// An IP set entry, as listed (`GET /cluster/firewall/ipset/{name}`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// As PVE stores it (host bits cleared, `/32` dropped).
    pub cidr: String,
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub nomatch: bool,
    #[serde(default)]
    pub comment: Option<String>,
    /// The entry list's digest.
    #[serde(default)]
    pub digest: Option<String>,
}

impl Client {
    pub(crate) async fn fw_write(
        &self,
        method: Method,
        path: ApiPath,
        params: Params,
    ) -> Result<()> {
        let _: serde_json::Value = self.write(method, path, params).await?;
        Ok(())
    }

    /// `GET /cluster/firewall/groups`.
    pub async fn security_groups(&self) -> Result<Vec<Named>> {
        self.get(ApiPath::new("/cluster/firewall/groups", &[]), Params::new())
            .await
    }

    /// `POST /cluster/firewall/groups`: a new, empty group.
    pub async fn create_security_group(&self, group: &str, comment: &str) -> Result<()> {
        let params = Params::new().text("group", group).text("comment", comment);
        self.fw_write(
            Method::POST,
            ApiPath::new("/cluster/firewall/groups", &[]),
            params,
        )
        .await
    }

    /// `POST /cluster/firewall/groups` with `rename` = `group`: sets the
    /// comment of an existing group.
    pub async fn set_security_group_comment(&self, group: &str, comment: &str) -> Result<()> {
        let params = Params::new()
            .text("group", group)
            .text("rename", group)
            .text("comment", comment);
        self.fw_write(
            Method::POST,
            ApiPath::new("/cluster/firewall/groups", &[]),
            params,
        )
        .await
    }

    /// `DELETE /cluster/firewall/groups/{group}` (PVE refuses a group that
    /// still has rules).
    pub async fn delete_security_group(&self, group: &str) -> Result<()> {
        let path = ApiPath::new("/cluster/firewall/groups/{group}", &[group]);
        self.fw_write(Method::DELETE, path, Params::new()).await
    }

    /// `GET /cluster/firewall/groups/{group}`: its rules in order.
    pub async fn security_group_rules(&self, group: &str) -> Result<Vec<Rule>> {
        let path = ApiPath::new("/cluster/firewall/groups/{group}", &[group]);
        self.get(path, Params::new()).await
    }

    /// `POST /cluster/firewall/groups/{group}`: the rule becomes the
    /// group's first (PVE has no other place for a new rule).
    pub async fn create_security_group_rule(&self, group: &str, rule: &RuleSpec) -> Result<()> {
        let path = ApiPath::new("/cluster/firewall/groups/{group}", &[group]);
        self.fw_write(Method::POST, path, rule.params()).await
    }

    /// `PUT /cluster/firewall/groups/{group}/{pos}`: the rule at `pos`
    /// becomes `rule` (the properties it leaves out deleted), if the list
    /// still has `digest`.
    pub async fn set_security_group_rule(
        &self,
        group: &str,
        pos: usize,
        rule: &RuleSpec,
        digest: &str,
    ) -> Result<()> {
        let pos = pos.to_string();
        let path = ApiPath::new("/cluster/firewall/groups/{group}/{pos}", &[group, &pos]);
        let absent = rule.absent().join(",");
        let params = rule
            .params()
            .opt("delete", (!absent.is_empty()).then_some(absent))
            .text("digest", digest);
        self.fw_write(Method::PUT, path, params).await
    }

    /// `PUT /cluster/firewall/groups/{group}/{pos}` with `moveto`: the rule
    /// goes before the one at `moveto` (counted before the move), or last.
    pub async fn move_security_group_rule(
        &self,
        group: &str,
        pos: usize,
        moveto: usize,
        digest: Option<&str>,
    ) -> Result<()> {
        let pos = pos.to_string();
        let path = ApiPath::new("/cluster/firewall/groups/{group}/{pos}", &[group, &pos]);
        let params = Params::new().text("moveto", moveto).opt("digest", digest);
        self.fw_write(Method::PUT, path, params).await
    }

    /// `DELETE /cluster/firewall/groups/{group}/{pos}`, if the list still
    /// has `digest`.
    pub async fn delete_security_group_rule(
        &self,
        group: &str,
        pos: usize,
        digest: Option<&str>,
    ) -> Result<()> {
        let pos = pos.to_string();
        let path = ApiPath::new("/cluster/firewall/groups/{group}/{pos}", &[group, &pos]);
        self.fw_write(Method::DELETE, path, Params::new().opt("digest", digest))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_what_pve_lists() {
        let rules: Vec<Rule> = serde_json::from_value(json!([
            {"pos": 0, "type": "in", "action": "ACCEPT", "enable": 1, "proto": "tcp",
             "dport": "22", "ipversion": 4, "source": "10.0.0.0/8", "digest": "ab"}
        ]))
        .unwrap();
        assert_eq!(rules[0].enable, Some(1));
        assert_eq!(rules[0].dport.as_deref(), Some("22"));
        let groups: Vec<Named> =
            serde_json::from_value(json!([{"group": "web", "digest": "x"}])).unwrap();
        assert_eq!(groups[0].name, "web");
        let entries: Vec<Entry> =
            serde_json::from_value(json!([{"cidr": "10.0.0.1", "nomatch": 1}])).unwrap();
        assert!(entries[0].nomatch);
    }

    #[test]
    fn a_replaced_rule_deletes_what_it_leaves_out() {
        let spec = RuleSpec {
            kind: "in".into(),
            action: "DROP".into(),
            proto: Some("tcp".into()),
            ..RuleSpec::default()
        };
        let absent = spec.absent();
        assert!(absent.contains(&"dport") && absent.contains(&"macro"));
        assert!(!absent.contains(&"proto"));
    }
}
