//! `verify_rule` for a security group's rules (rule_env `group`) and a
//! guest's (rule_env `vm`, `ct`): the first refusal is a 400 naming the
//! parameter, as `raise_param_exc` gives it.

use super::check;
use crate::http::ApiError;
use crate::state::firewall::Rule;

fn refuse(key: &str, msg: impl Into<String>) -> ApiError {
    ApiError::param(key, msg)
}

/// Where a rule is (`$rule_env`): what types and keys it may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Env {
    /// A security group's rule: in, out or forward; no interface.
    Group,
    /// A VM's or container's rule: in, out or a security group
    /// (`type: group`, `action` naming it); an interface `netN`.
    Guest,
}

/// The names a rule's references may resolve to.
#[derive(Clone, Copy, Debug, Default)]
pub struct Known<'a> {
    /// IP sets: the cluster's, and for a guest also its own. As PVE's
    /// `verify_rule`, a `+guest/`/`+dc/` scope is not checked here.
    pub ipsets: &'a [String],
    /// Aliases (lowercased): a guest's own; the cluster's are not modelled.
    pub aliases: &'a [String],
}

/// Checks `rule` and records its `ipversion` as PVE does; `known`: the
/// IP sets and aliases it may reference (a reference must exist).
pub fn verify(rule: &mut Rule, known: &Known, env: Env) -> Result<(), ApiError> {
    let get = |k: &str| rule.get(k).cloned();
    let (Some(ty), Some(action)) = (get("type"), get("action")) else {
        let missing = if get("type").is_none() {
            "type"
        } else {
            "action"
        };
        return Err(refuse(missing, "missing property"));
    };
    let (types, name): (&[&str], &str) = match env {
        Env::Group => (&["in", "out", "forward"], "group"),
        Env::Guest => (&["in", "out", "group"], "vm"),
    };
    if !types.contains(&ty.as_str()) {
        return Err(refuse(
            "type",
            format!("invalid rule type '{ty}' for rule_env '{name}'"),
        ));
    }
    if ty == "group" {
        // The group is not looked up: PVE only warns when it compiles a
        // rule naming a group that does not exist.
        if !check::is_name(&action) {
            return Err(refuse(
                "action",
                "invalid characters in security group name",
            ));
        }
    } else if ty == "forward" && action == "REJECT" {
        return Err(refuse(
            "action",
            "cannot define REJECT rules on forward chain",
        ));
    } else if !["ACCEPT", "DROP", "REJECT"].contains(&action.as_str()) {
        return Err(refuse("action", format!("unknown action '{action}'")));
    }
    if let Some(iface) = get("iface") {
        if env == Env::Group {
            return Err(refuse(
                "type",
                "parameter -i not allowed for this rule type",
            ));
        }
        let index = iface.strip_prefix("net").unwrap_or_default();
        if index.is_empty() || !index.chars().all(|c| c.is_ascii_digit()) {
            return Err(refuse(
                "iface",
                "value does not match the regex pattern 'net\\d+'",
            ));
        }
    }
    if let Some(m) = get("macro") {
        return Err(refuse("macro", format!("unknown macro '{m}'")));
    }
    let mut version: Option<u8> = None;
    let mut set_version = |v: Option<u8>| -> Result<(), ApiError> {
        match (version, v) {
            (Some(old), Some(new)) if old != new => Err(ApiError::internal(
                "detected mixed ipv4/ipv6 addresses in rule",
            )),
            (_, Some(new)) => {
                version = Some(new);
                Ok(())
            }
            (_, None) => Ok(()),
        }
    };
    let proto = get("proto");
    let mut has_ports = false;
    let mut icmp = false;
    if let Some(p) = &proto {
        has_ports = check::protocol(p).map_err(|e| refuse("proto", e))?;
        icmp = check::is_icmp(p);
        set_version(match p.as_str() {
            "icmp" => Some(4),
            "icmpv6" | "ipv6-icmp" => Some(6),
            _ => None,
        })?;
    }
    for key in ["dport", "sport"] {
        if let Some(ports) = get(key) {
            check::ports(&ports).map_err(|e| refuse(key, e))?;
            let Some(p) = &proto else {
                return Err(refuse(
                    "proto",
                    format!("missing property - '{key}' requires this property"),
                ));
            };
            if !has_ports && (key != "dport" || !icmp) {
                return Err(refuse(
                    key,
                    format!("protocol '{p}' does not support ports"),
                ));
            }
        }
    }
    if get("icmp-type").is_some() && !icmp {
        return Err(refuse(
            "proto",
            "missing property - 'icmp-type' requires this property",
        ));
    }
    for key in ["source", "dest"] {
        let Some(addr) = get(key) else { continue };
        let v = check::address_list(&addr).map_err(|e| refuse(key, e))?;
        set_version(v)?;
        if let Some(set) = addr.strip_prefix('+') {
            let name = set
                .strip_prefix("dc/")
                .or_else(|| set.strip_prefix("guest/"))
                .unwrap_or(set);
            if !known.ipsets.iter().any(|s| s == name) {
                return Err(refuse(key, format!("no such ipset '{name}'")));
            }
        } else if v.is_none() {
            // A guest's own aliases only: the cluster's are not modelled.
            let alias = addr
                .strip_prefix("dc/")
                .or_else(|| addr.strip_prefix("guest/"))
                .unwrap_or(&addr)
                .to_lowercase();
            if !known.aliases.contains(&alias) {
                return Err(refuse(key, format!("no such alias '{addr}'")));
            }
        }
    }
    if let Some(v) = version {
        rule.insert("ipversion".into(), v.to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(ipsets: &[String]) -> Known<'_> {
        Known {
            ipsets,
            aliases: &[],
        }
    }

    fn rule(pairs: &[(&str, &str)]) -> Rule {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn rules_are_checked_as_pve_checks_a_groups_rules() {
        let ipsets = vec!["web".to_owned()];
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
        let cases: &[Case] = &[
            (
                &[
                    ("type", "in"),
                    ("action", "ACCEPT"),
                    ("proto", "tcp"),
                    ("dport", "22"),
                ],
                None,
            ),
            (
                &[("type", "in"), ("action", "ACCEPT"), ("source", "+web")],
                None,
            ),
            (
                &[("type", "in"), ("action", "ACCEPT"), ("source", "+db")],
                Some("source"),
            ),
            (&[("type", "group"), ("action", "other")], Some("type")),
            (&[("type", "in"), ("action", "ALLOW")], Some("action")),
            (
                &[("type", "in"), ("action", "ACCEPT"), ("dport", "22")],
                Some("proto"),
            ),
            (
                &[
                    ("type", "in"),
                    ("action", "ACCEPT"),
                    ("proto", "icmp"),
                    ("sport", "22"),
                ],
                Some("sport"),
            ),
            (&[("type", "forward"), ("action", "REJECT")], Some("action")),
            (
                &[
                    ("type", "in"),
                    ("action", "DROP"),
                    ("source", "10.0.0.0/8"),
                    ("dest", "fd00::1"),
                ],
                Some("-"),
            ),
        ];
        for (pairs, want) in cases {
            let got = verify(&mut rule(pairs), &known(&ipsets), Env::Group);
            let key = match &got {
                Ok(()) => None,
                Err(ApiError::Param(e)) => e.keys().next().map(String::as_str),
                Err(_) => Some("-"),
            };
            assert_eq!(key, *want, "{pairs:?}: {got:?}");
        }
        let mut r = rule(&[("type", "in"), ("action", "ACCEPT"), ("source", "10.0.0.1")]);
        verify(&mut r, &known(&ipsets), Env::Group).unwrap();
        assert_eq!(r.get("ipversion").map(String::as_str), Some("4"));
    }

    #[test]
    fn a_guests_rules_may_name_groups_and_interfaces() {
        let ipsets = vec!["web".to_owned()];
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
        let cases: &[Case] = &[
            (&[("type", "group"), ("action", "webservers")], None),
            (&[("type", "group"), ("action", "1bad")], Some("action")),
            (
                &[("type", "in"), ("action", "ACCEPT"), ("iface", "net0")],
                None,
            ),
            (
                &[("type", "in"), ("action", "ACCEPT"), ("iface", "eth0")],
                Some("iface"),
            ),
            (&[("type", "forward"), ("action", "ACCEPT")], Some("type")),
            (
                &[("type", "out"), ("action", "DROP"), ("dest", "+web")],
                None,
            ),
        ];
        for (pairs, want) in cases {
            let got = verify(&mut rule(pairs), &known(&ipsets), Env::Guest);
            let key = match &got {
                Ok(()) => None,
                Err(ApiError::Param(e)) => e.keys().next().map(String::as_str),
                Err(_) => Some("-"),
            };
            assert_eq!(key, *want, "{pairs:?}: {got:?}");
        }
        // A group's rule may name no interface.
        let mut r = rule(&[("type", "in"), ("action", "ACCEPT"), ("iface", "net0")]);
        assert!(verify(&mut r, &known(&ipsets), Env::Group).is_err());
    }
}
