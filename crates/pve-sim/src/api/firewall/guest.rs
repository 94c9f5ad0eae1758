//! A guest's own firewall (pve-firewall `PVE::API2::Firewall::VM` and
//! `CT`, `VMRules`, `CTRules`): `.../firewall/options` and
//! `.../firewall/rules` of a VM or container.
//!
//! As PVE: options are read with their digest (`copy_opject_with_digest`)
//! and set as given, `delete` removing some; rules are an ordered list as
//! a security group's ([`super::list`]), with rule_env `vm`/`ct`: a rule
//! may name a security group (`type: group`, not looked up: PVE only
//! warns when compiling one that is missing) and an interface `netN`, and
//! its `+set` references may name the cluster's IP sets and the guest's
//! own, its aliases the guest's own ([`super::guest_alias`]; the
//! cluster's aliases are not modelled). Reading needs `VM.Audit` on
//! `/vms/{vmid}`, changing `VM.Config.Network`. The guest's IP sets are
//! served by [`super::ipset`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::rule::{Env, Known};
use super::{check, guest_alias, ipset, list};
use crate::http::router::Route;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::sim_handler;
use crate::state::GuestKind;
use crate::state::firewall::GuestFirewall;

const LOG: &[&str] = &[
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug", "nolog",
];
const BOOLEANS: &[&str] = &["enable", "dhcp", "ipfilter", "macfilter", "ndp", "radv"];
const STRINGS: &[&str] = &["log_level_in", "log_level_out", "policy_in", "policy_out"];

/// `PUT .../firewall/options` (`$vm_option_properties`).
pub const OPTIONS: &[Param] = &[
    Param::string("delete").opt(),
    Param::string("digest").max_len(64).opt(),
    Param::boolean("dhcp").opt(),
    Param::boolean("enable").opt(),
    Param::boolean("ipfilter").opt(),
    Param::string("log_level_in").enums(LOG).opt(),
    Param::string("log_level_out").enums(LOG).opt(),
    Param::boolean("macfilter").opt(),
    Param::boolean("ndp").opt(),
    Param::string("policy_in")
        .enums(&["ACCEPT", "REJECT", "DROP"])
        .opt(),
    Param::string("policy_out")
        .enums(&["ACCEPT", "REJECT", "DROP"])
        .opt(),
    Param::boolean("radv").opt(),
];

/// The routes of the firewall of VMs (`qemu`) and containers (`lxc`).
pub fn routes() -> Vec<Route> {
    use super::super::route;
    use crate::api::qemu::NODE_VMID as GUEST;
    macro_rules! of {
        ($kind:literal) => {{
            const BASE: &str = concat!("/nodes/{node}/", $kind, "/{vmid}/firewall");
            const OPTS: &str = concat!("/nodes/{node}/", $kind, "/{vmid}/firewall/options");
            const RULES: &str = concat!("/nodes/{node}/", $kind, "/{vmid}/firewall/rules");
            const RULE: &str = concat!("/nodes/{node}/", $kind, "/{vmid}/firewall/rules/{pos}");
            const ALIASES: &str = concat!("/nodes/{node}/", $kind, "/{vmid}/firewall/aliases");
            const ALIAS: &str = concat!("/nodes/{node}/", $kind, "/{vmid}/firewall/aliases/{name}");
            const SETS: &str = concat!("/nodes/{node}/", $kind, "/{vmid}/firewall/ipset");
            const SET: &str = concat!("/nodes/{node}/", $kind, "/{vmid}/firewall/ipset/{name}");
            const ENTRY: &str = concat!(
                "/nodes/{node}/",
                $kind,
                "/{vmid}/firewall/ipset/{name}/{cidr}"
            );
            [
                route("GET", ALIASES, &[GUEST], sim_handler!(guest_alias::index)),
                route(
                    "POST",
                    ALIASES,
                    &[GUEST, guest_alias::CREATE],
                    sim_handler!(guest_alias::create),
                ),
                route(
                    "GET",
                    ALIAS,
                    &[GUEST, guest_alias::ONE],
                    sim_handler!(guest_alias::one),
                ),
                route(
                    "PUT",
                    ALIAS,
                    &[GUEST, guest_alias::UPDATE],
                    sim_handler!(guest_alias::update),
                ),
                route(
                    "DELETE",
                    ALIAS,
                    &[GUEST, guest_alias::DELETE],
                    sim_handler!(guest_alias::delete),
                ),
                route("GET", SETS, &[GUEST], sim_handler!(ipset::index)),
                route(
                    "POST",
                    SETS,
                    &[GUEST, ipset::CREATE],
                    sim_handler!(ipset::create),
                ),
                route(
                    "GET",
                    SET,
                    &[GUEST, ipset::ONE],
                    sim_handler!(ipset::entries),
                ),
                route("POST", SET, &[GUEST, ipset::ADD], sim_handler!(ipset::add)),
                route(
                    "DELETE",
                    SET,
                    &[GUEST, ipset::DELETE],
                    sim_handler!(ipset::delete),
                ),
                route(
                    "PUT",
                    ENTRY,
                    &[GUEST, ipset::UPDATE],
                    sim_handler!(ipset::update),
                ),
                route(
                    "DELETE",
                    ENTRY,
                    &[GUEST, ipset::REMOVE],
                    sim_handler!(ipset::remove),
                ),
                route("GET", BASE, &[GUEST], sim_handler!(index)),
                route("GET", OPTS, &[GUEST], sim_handler!(options)),
                route("PUT", OPTS, &[GUEST, OPTIONS], sim_handler!(set_options)),
                route("GET", RULES, &[GUEST], sim_handler!(rules)),
                route(
                    "POST",
                    RULES,
                    &[GUEST, list::PROPS, list::REQUIRED],
                    sim_handler!(create_rule),
                ),
                route("GET", RULE, &[GUEST, list::ONE], sim_handler!(rule)),
                route(
                    "PUT",
                    RULE,
                    &[GUEST, list::PROPS, list::CHANGE],
                    sim_handler!(update_rule),
                ),
                route(
                    "DELETE",
                    RULE,
                    &[GUEST, list::DELETE],
                    sim_handler!(delete_rule),
                ),
            ]
        }};
    }
    let mut out = Vec::from(of!("qemu"));
    out.extend(of!("lxc"));
    out
}

fn kind(call: &Call) -> GuestKind {
    if call.route_key.contains("/lxc/") {
        GuestKind::Lxc
    } else {
        GuestKind::Qemu
    }
}

fn check(inst: &Instance, call: &Call, privilege: &str) -> Result<(), ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &[privilege])
}

/// Reads the guest's firewall with `read` (after `VM.Audit`).
pub(super) fn read(
    inst: &Instance,
    call: &Call,
    read: impl FnOnce(&GuestFirewall) -> Result<Value, ApiError>,
) -> Result<Reply, ApiError> {
    check(inst, call, "VM.Audit")?;
    let cluster = inst.cluster();
    let guest = cluster.guest(call.params.node(), call.params.vmid("vmid"), kind(call))?;
    Ok(Reply::data(read(&guest.firewall)?))
}

/// Changes the guest's firewall with `change` (after
/// `VM.Config.Network`); `change` also gets what its rules may name: the
/// cluster's IP sets and the guest's own, and the guest's aliases.
pub(super) fn write(
    inst: &Instance,
    call: &Call,
    change: impl FnOnce(&mut GuestFirewall, &Known) -> Result<(), ApiError>,
) -> Result<Reply, ApiError> {
    check(inst, call, "VM.Config.Network")?;
    let mut cluster = inst.cluster();
    let mut ipsets: Vec<String> = cluster.firewall.ipsets.keys().cloned().collect();
    let guest = cluster.guest_mut(call.params.node(), call.params.vmid("vmid"), kind(call))?;
    ipsets.extend(guest.firewall.ipsets.keys().cloned());
    let aliases: Vec<String> = guest.firewall.aliases.keys().cloned().collect();
    let known = Known {
        ipsets: &ipsets,
        aliases: &aliases,
    };
    change(&mut guest.firewall, &known)?;
    Ok(Reply::null())
}

/// `GET .../firewall`: the directory.
pub async fn index(_inst: Arc<Instance>, _call: Call) -> Result<Reply, ApiError> {
    let names = ["rules", "aliases", "ipset", "refs", "options"];
    Ok(Reply::data(
        names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
    ))
}

/// The options' digest (`copy_opject_with_digest`): SHA-1 of `key:value\n`
/// in key order.
fn options_digest(options: &BTreeMap<String, String>) -> String {
    crate::state::firewall::digest([options])
}

/// `GET .../firewall/options`: what is set (booleans as numbers), with
/// the digest.
pub async fn options(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    read(&inst, &call, |fw| {
        let mut v = json!({});
        for (k, val) in &fw.options {
            v[k] = if BOOLEANS.contains(&k.as_str()) {
                json!(val.parse::<i64>().unwrap_or_default())
            } else {
                json!(val)
            };
        }
        v["digest"] = json!(options_digest(&fw.options));
        Ok(v)
    })
}

/// `PUT .../firewall/options`: `delete` first, then each option given.
pub async fn set_options(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    write(&inst, &call, |fw, _| {
        check::digest(&options_digest(&fw.options), call.params.get("digest"))?;
        let mut options = fw.options.clone();
        for opt in call
            .params
            .get("delete")
            .unwrap_or_default()
            .split([',', ';', ' '])
            .filter(|o| !o.is_empty())
        {
            if !BOOLEANS.contains(&opt) && !STRINGS.contains(&opt) {
                return Err(ApiError::param("delete", format!("no such option '{opt}'")));
            }
            options.remove(opt);
        }
        for key in BOOLEANS {
            if let Some(on) = call.params.flag(key) {
                options.insert((*key).to_owned(), if on { "1" } else { "0" }.to_owned());
            }
        }
        for key in STRINGS {
            if let Some(v) = call.params.get(key) {
                options.insert((*key).to_owned(), v.to_owned());
            }
        }
        fw.options = options;
        Ok(())
    })
}

/// `GET .../firewall/rules`.
pub async fn rules(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    read(&inst, &call, |fw| Ok(json!(list::all(&fw.rules))))
}

/// `GET .../firewall/rules/{pos}`.
pub async fn rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    read(&inst, &call, |fw| list::one(&fw.rules, &call))
}

/// `POST .../firewall/rules`: a new rule, first.
pub async fn create_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    write(&inst, &call, |fw, known| {
        list::create(&mut fw.rules, &call, known, Env::Guest)
    })
}

/// `PUT .../firewall/rules/{pos}`: a move or a change.
pub async fn update_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    write(&inst, &call, |fw, known| {
        list::update(&mut fw.rules, &call, known, Env::Guest)
    })
}

/// `DELETE .../firewall/rules/{pos}`.
pub async fn delete_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    write(&inst, &call, |fw, _| list::delete(&mut fw.rules, &call))
}
