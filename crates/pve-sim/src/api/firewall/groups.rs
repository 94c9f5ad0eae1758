//! `/cluster/firewall/groups` (pve-firewall `PVE::API2::Firewall::Groups`
//! and `GroupRules`): security groups and their ordered rules.
//!
//! As PVE: a new rule goes first (`unshift`) and is disabled unless
//! `enable` is given; `moveto` moves a rule and ignores every other
//! argument; updates and deletions are refused when their `digest` is not
//! the rule list's current one; a group with rules cannot be deleted; a
//! group's rules may not name another group (`type` is in, out or
//! forward).

use std::sync::Arc;

use serde_json::{Value, json};

use super::check;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::state::firewall::{Group, Rule, digest, named_list};

const NAME: &str = "[A-Za-z][A-Za-z0-9\\-\\_]+";
const GROUP: Param = Param::string("group").pattern(NAME).max_len(18);
const DIGEST: Param = Param::string("digest").max_len(64).opt();
const POS: Param = Param::integer("pos").min(0).opt();
const LOG: &[&str] = &[
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug", "nolog",
];

pub const CREATE: &[Param] = &[
    GROUP,
    Param::string("comment").opt(),
    Param::string("rename").pattern(NAME).max_len(18).opt(),
    DIGEST,
];
pub const ONE: &[Param] = &[GROUP];
pub const RULE: &[Param] = &[GROUP, POS];
pub const RULE_DELETE: &[Param] = &[GROUP, POS, DIGEST];

/// The rule properties of a create or update (`add_rule_properties`),
/// beside [`RULE_REQUIRED`] (a create) or [`RULE_CHANGE`] (an update).
pub const RULE_COMMON: &[Param] = &[
    GROUP,
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
pub const RULE_REQUIRED: &[Param] = &[ACTION, TYPE];
/// An update may change them, delete properties or move the rule.
pub const RULE_CHANGE: &[Param] = &[
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

fn modify(inst: &Instance, call: &Call) -> Result<(), ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Modify"])
}

fn audit(inst: &Instance, call: &Call) -> Result<(), ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Audit"])
}

fn group_name(call: &Call) -> String {
    call.params.get("group").unwrap_or_default().to_owned()
}

fn no_such(group: &str) -> ApiError {
    ApiError::internal(format!("no such security group '{group}'"))
}

/// `GET /cluster/firewall/groups`: every group, with the list's digest.
pub async fn index(inst: Arc<Instance>, _call: Call) -> Result<Reply, ApiError> {
    let cluster = inst.cluster();
    let list = named_list(
        "group",
        cluster.firewall.groups.iter().map(|(n, g)| (n, &g.comment)),
    );
    Ok(Reply::data(with_digest(&list)))
}

fn with_digest(list: &[Rule]) -> Vec<Value> {
    let d = digest(list);
    list.iter()
        .map(|e| {
            let mut v = json!(e);
            v["digest"] = json!(d);
            v
        })
        .collect()
}

/// `POST /cluster/firewall/groups`: a new group, or with `rename` a
/// renamed one (`rename` = `group` only sets the comment).
pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    modify(&inst, &call)?;
    let group = group_name(&call);
    let comment = call.params.get("comment").map(str::to_owned);
    let mut cluster = inst.cluster();
    let fw = &mut cluster.firewall;
    if let Some(old) = call.params.get("rename") {
        let list = named_list("group", fw.groups.iter().map(|(n, g)| (n, &g.comment)));
        check::digest(&digest(&list), call.params.get("digest"))?;
        if !fw.groups.contains_key(old) {
            return Err(ApiError::param(
                "group",
                format!("Security group '{old}' does not exist"),
            ));
        }
        if old != group && fw.groups.contains_key(&group) {
            return Err(ApiError::param(
                "group",
                format!("Security group '{group}' does already exist"),
            ));
        }
        let mut moved = fw.groups.remove(old).unwrap_or_default();
        if comment.is_some() {
            moved.comment = comment;
        }
        fw.groups.insert(group, moved);
        return Ok(Reply::null());
    }
    if fw.groups.contains_key(&group) {
        return Err(ApiError::param(
            "group",
            format!("Security group '{group}' already exists"),
        ));
    }
    fw.groups.insert(
        group,
        Group {
            comment,
            rules: vec![],
        },
    );
    Ok(Reply::null())
}

/// `DELETE /cluster/firewall/groups/{group}`: only an empty group.
pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    modify(&inst, &call)?;
    let group = group_name(&call);
    let mut cluster = inst.cluster();
    let Some(g) = cluster.firewall.groups.get(&group) else {
        return Err(no_such(&group));
    };
    if !g.rules.is_empty() {
        return Err(ApiError::internal(format!(
            "Security group '{group}' is not empty"
        )));
    }
    cluster.firewall.groups.remove(&group);
    Ok(Reply::null())
}

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

/// `GET /cluster/firewall/groups/{group}`: the rules in order.
pub async fn rules(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    audit(&inst, &call)?;
    let group = group_name(&call);
    let cluster = inst.cluster();
    let g = cluster
        .firewall
        .groups
        .get(&group)
        .ok_or_else(|| no_such(&group))?;
    let d = digest(&g.rules);
    let list: Vec<Value> = g
        .rules
        .iter()
        .enumerate()
        .map(|(pos, r)| rule_json(r, pos, &d))
        .collect();
    Ok(Reply::data(list))
}

fn position(call: &Call, len: usize) -> Result<usize, ApiError> {
    let pos = call.params.int("pos").unwrap_or_default();
    match usize::try_from(pos) {
        Ok(p) if p < len => Ok(p),
        _ => Err(ApiError::internal(format!("no rule at position {pos}"))),
    }
}

/// `GET /cluster/firewall/groups/{group}/{pos}`.
pub async fn rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    audit(&inst, &call)?;
    let group = group_name(&call);
    let cluster = inst.cluster();
    let g = cluster
        .firewall
        .groups
        .get(&group)
        .ok_or_else(|| no_such(&group))?;
    let pos = position(&call, g.rules.len())?;
    Ok(Reply::data(rule_json(
        &g.rules[pos],
        pos,
        &digest(&g.rules),
    )))
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

/// `POST /cluster/firewall/groups/{group}`: a new rule, first in the list.
pub async fn create_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    modify(&inst, &call)?;
    let group = group_name(&call);
    let mut cluster = inst.cluster();
    let ipsets: Vec<String> = cluster.firewall.ipsets.keys().cloned().collect();
    let g = cluster
        .firewall
        .groups
        .get_mut(&group)
        .ok_or_else(|| no_such(&group))?;
    let mut rule = Rule::new();
    copy_rule_data(&mut rule, &call);
    super::rule::verify(&mut rule, &ipsets)?;
    rule.entry("enable".into()).or_insert_with(|| "0".into());
    g.rules.insert(0, rule);
    Ok(Reply::null())
}

/// `PUT /cluster/firewall/groups/{group}/{pos}`: a move (`moveto`), or a
/// change of the rule's properties (`delete` removes some).
pub async fn update_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    modify(&inst, &call)?;
    let group = group_name(&call);
    let mut cluster = inst.cluster();
    let ipsets: Vec<String> = cluster.firewall.ipsets.keys().cloned().collect();
    let g = cluster
        .firewall
        .groups
        .get_mut(&group)
        .ok_or_else(|| no_such(&group))?;
    check::digest(&digest(&g.rules), call.params.get("digest"))?;
    let pos = position(&call, g.rules.len())?;
    if let Some(moveto) = call
        .params
        .int("moveto")
        .and_then(|m| usize::try_from(m).ok())
        && moveto != pos
    {
        let rule = g.rules.remove(pos);
        // PVE inserts before the rule that was at `moveto`, counted in the
        // list before the move; at or past the end, the rule goes last.
        let at = if moveto > pos { moveto - 1 } else { moveto };
        let at = at.min(g.rules.len());
        g.rules.insert(at, rule);
        return Ok(Reply::null());
    }
    let mut rule = g.rules[pos].clone();
    copy_rule_data(&mut rule, &call);
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
    super::rule::verify(&mut rule, &ipsets)?;
    g.rules[pos] = rule;
    Ok(Reply::null())
}

/// `DELETE /cluster/firewall/groups/{group}/{pos}`.
pub async fn delete_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    modify(&inst, &call)?;
    let group = group_name(&call);
    let mut cluster = inst.cluster();
    let g = cluster
        .firewall
        .groups
        .get_mut(&group)
        .ok_or_else(|| no_such(&group))?;
    check::digest(&digest(&g.rules), call.params.get("digest"))?;
    let pos = position(&call, g.rules.len())?;
    g.rules.remove(pos);
    Ok(Reply::null())
}
