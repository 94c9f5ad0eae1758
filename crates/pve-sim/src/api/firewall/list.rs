//! An ordered rule list as pve-firewall's `PVE::API2::Firewall::Rules`
//! serves it, for a security group and a guest alike: rules by `pos`, the
//! list's digest, a new rule first (`unshift`) and disabled unless
//! `enable` is given, `moveto` moving a rule and ignoring every other
//! argument, changes and deletions refused on a stale `digest`.

use serde_json::{Value, json};

use super::check;
use super::rule::{Env, Known, verify};
use crate::http::{ApiError, Call};
use crate::schema::Param;
use crate::state::firewall::{Rule, digest};

const NAME: &str = "[A-Za-z][A-Za-z0-9\\-\\_]+";
const DIGEST: Param = Param::string("digest").max_len(64).opt();
pub const POS: Param = Param::integer("pos").min(0).opt();
const LOG: &[&str] = &[
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug", "nolog",
];

/// `pos` alone (a rule read).
pub const ONE: &[Param] = &[POS];
/// A deletion: `pos` and `digest`.
pub const DELETE: &[Param] = &[POS, DIGEST];

/// The rule properties of a create or update (`add_rule_properties`),
/// beside [`REQUIRED`] (a create) or [`CHANGE`] (an update).
pub const PROPS: &[Param] = &[
    DIGEST,
    POS,
    Param::string("comment").opt(),
    Param::string("dest").max_len(512).opt(),
    Param::string("dport").opt(),
    Param::integer("enable").min(0).opt(),
    Param::string("icmp-type").opt(),
    Param::string("iface").max_len(20).opt(),
    Param::string("log").enums(LOG).opt(),
    Param::string("macro").max_len(128).opt(),
    Param::string("proto").opt(),
    Param::string("source").max_len(512).opt(),
    Param::string("sport").opt(),
];
const ACTION: Param = Param::string("action").pattern(NAME).max_len(20);
const TYPE: Param = Param::string("type").enums(&["in", "out", "forward", "group"]);
/// A create needs `action` and `type`.
pub const REQUIRED: &[Param] = &[ACTION, TYPE];
/// An update may change them, delete properties or move the rule.
pub const CHANGE: &[Param] = &[
    ACTION.opt(),
    TYPE.opt(),
    Param::string("delete").opt(),
    Param::integer("moveto").min(0).opt(),
];

/// The properties a rule may carry (`$rule_properties`).
const PROPERTIES: &[&str] = &[
    "action",
    "type",
    "comment",
    "dest",
    "dport",
    "enable",
    "icmp-type",
    "iface",
    "log",
    "macro",
    "proto",
    "source",
    "sport",
];

/// A rule as the API shows it: numbers as numbers, with its position and
/// the list's digest.
fn rule_json(rule: &Rule, pos: usize, digest: &str) -> Value {
    let mut v = json!({});
    for (k, val) in rule {
        v[k] = match k.as_str() {
            "enable" | "ipversion" => json!(val.parse::<i64>().unwrap_or_default()),
            _ => json!(val),
        };
    }
    v["pos"] = json!(pos);
    v["digest"] = json!(digest);
    v
}

/// `GET ...rules`: the rules in order.
pub fn all(rules: &[Rule]) -> Vec<Value> {
    let d = digest(rules);
    rules
        .iter()
        .enumerate()
        .map(|(pos, r)| rule_json(r, pos, &d))
        .collect()
}

fn position(call: &Call, len: usize) -> Result<usize, ApiError> {
    let pos = call.params.int("pos").unwrap_or_default();
    match usize::try_from(pos) {
        Ok(p) if p < len => Ok(p),
        _ => Err(ApiError::internal(format!("no rule at position {pos}"))),
    }
}

/// `GET ...rules/{pos}`.
pub fn one(rules: &[Rule], call: &Call) -> Result<Value, ApiError> {
    let pos = position(call, rules.len())?;
    Ok(rule_json(&rules[pos], pos, &digest(rules)))
}

/// `copy_rule_data`: each property given; `''` or `-` removes it.
fn copy_rule_data(rule: &mut Rule, call: &Call) {
    for k in PROPERTIES {
        if let Some(v) = call.params.get(k) {
            if v.is_empty() || v == "-" {
                rule.remove(*k);
            } else {
                rule.insert((*k).to_owned(), v.to_owned());
            }
        }
    }
}

/// `POST ...rules`: a new rule, first in the list.
pub fn create(rules: &mut Vec<Rule>, call: &Call, known: &Known, env: Env) -> Result<(), ApiError> {
    let mut rule = Rule::new();
    copy_rule_data(&mut rule, call);
    verify(&mut rule, known, env)?;
    rule.entry("enable".into()).or_insert_with(|| "0".into());
    rules.insert(0, rule);
    Ok(())
}

/// `PUT ...rules/{pos}`: a move (`moveto`), or a change of the rule's
/// properties (`delete` removes some).
pub fn update(rules: &mut Vec<Rule>, call: &Call, known: &Known, env: Env) -> Result<(), ApiError> {
    check::digest(&digest(rules.iter()), call.params.get("digest"))?;
    let pos = position(call, rules.len())?;
    if let Some(moveto) = call
        .params
        .int("moveto")
        .and_then(|m| usize::try_from(m).ok())
        && moveto != pos
    {
        let rule = rules.remove(pos);
        // PVE inserts before the rule that was at `moveto`, counted in the
        // list before the move; at or past the end, the rule goes last.
        let at = if moveto > pos { moveto - 1 } else { moveto };
        let at = at.min(rules.len());
        rules.insert(at, rule);
        return Ok(());
    }
    let mut rule = rules[pos].clone();
    copy_rule_data(&mut rule, call);
    for opt in call
        .params
        .get("delete")
        .unwrap_or_default()
        .split([',', ';', ' '])
    {
        if opt.is_empty() {
            continue;
        }
        if !PROPERTIES.contains(&opt) {
            return Err(ApiError::param(
                "delete",
                format!("no such property ('{opt}')"),
            ));
        }
        if opt == "type" || opt == "action" {
            return Err(ApiError::param(
                "delete",
                format!("unable to delete required property '{opt}'"),
            ));
        }
        rule.remove(opt);
    }
    rule.remove("ipversion");
    verify(&mut rule, known, env)?;
    rules[pos] = rule;
    Ok(())
}

/// `DELETE ...rules/{pos}`.
pub fn delete(rules: &mut Vec<Rule>, call: &Call) -> Result<(), ApiError> {
    check::digest(&digest(rules.iter()), call.params.get("digest"))?;
    let pos = position(call, rules.len())?;
    rules.remove(pos);
    Ok(())
}
