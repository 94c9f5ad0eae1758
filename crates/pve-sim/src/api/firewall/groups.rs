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

use super::rule::{Env, Known};
use super::{check, list};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::state::firewall::{Group, Rule, digest, named_list};

/// A group's rules may name the cluster's IP sets (and aliases, which are
/// not modelled).
fn known(ipsets: &[String]) -> Known<'_> {
    Known {
        ipsets,
        aliases: &[],
    }
}

const NAME: &str = "[A-Za-z][A-Za-z0-9\\-\\_]+";
const GROUP: Param = Param::string("group").pattern(NAME).max_len(18);
const DIGEST: Param = Param::string("digest").max_len(64).opt();

pub const CREATE: &[Param] = &[
    GROUP,
    Param::string("comment").opt(),
    Param::string("rename").pattern(NAME).max_len(18).opt(),
    DIGEST,
];
pub const ONE: &[Param] = &[GROUP];

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
    Ok(Reply::data(list::all(&g.rules)))
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
    Ok(Reply::data(list::one(&g.rules, &call)?))
}

/// A change of the group's rules (`change` gets them and the cluster's
/// IP set names).
fn change_rules(
    inst: &Instance,
    call: &Call,
    change: impl FnOnce(&mut Vec<Rule>, &[String]) -> Result<(), ApiError>,
) -> Result<Reply, ApiError> {
    modify(inst, call)?;
    let group = group_name(call);
    let mut cluster = inst.cluster();
    let ipsets: Vec<String> = cluster.firewall.ipsets.keys().cloned().collect();
    let g = cluster
        .firewall
        .groups
        .get_mut(&group)
        .ok_or_else(|| no_such(&group))?;
    change(&mut g.rules, &ipsets)?;
    Ok(Reply::null())
}

/// `POST /cluster/firewall/groups/{group}`: a new rule, first in the list.
pub async fn create_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    change_rules(&inst, &call, |rules, ipsets| {
        list::create(rules, &call, &known(ipsets), Env::Group)
    })
}

/// `PUT /cluster/firewall/groups/{group}/{pos}`: a move or a change.
pub async fn update_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    change_rules(&inst, &call, |rules, ipsets| {
        list::update(rules, &call, &known(ipsets), Env::Group)
    })
}

/// `DELETE /cluster/firewall/groups/{group}/{pos}`.
pub async fn delete_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    change_rules(&inst, &call, |rules, _| list::delete(rules, &call))
}
