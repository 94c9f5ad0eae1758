//! `/cluster/firewall/ipset` and a guest's own `.../{vmid}/firewall/ipset`
//! (pve-firewall `PVE::API2::Firewall::IPSet`, cluster and VM/CT scope):
//! IP sets and their entries. The cluster's need `Sys.Audit` to read and
//! `Sys.Modify` to change; a guest's `VM.Audit` and `VM.Config.Network` on
//! `/vms/{vmid}`.
//!
//! As PVE: a new entry goes first, stored clean (`clean_cidr`), a
//! duplicate or a zero prefix refused; an alias entry must name an alias
//! (the simulator models none); entry updates and deletions check the
//! list's `digest`; a set with entries is deleted only with `force`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::check;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::state::GuestKind;
use crate::state::firewall::{Entry, IpSet, digest, named_list};

const PATTERN: &str = "[A-Za-z][A-Za-z0-9\\-\\_]+";
const NAME: Param = Param::string("name").pattern(PATTERN).max_len(64);
const DIGEST: Param = Param::string("digest").max_len(64).opt();
const CIDR: Param = Param::string("cidr");

pub const CREATE: &[Param] = &[
    NAME,
    Param::string("comment").opt(),
    Param::string("rename").pattern(PATTERN).max_len(64).opt(),
    DIGEST,
];
pub const ONE: &[Param] = &[NAME];
pub const DELETE: &[Param] = &[NAME, Param::boolean("force").opt()];
pub const ADD: &[Param] = &[
    NAME,
    CIDR,
    Param::string("comment").opt(),
    Param::boolean("nomatch").opt(),
];
pub const UPDATE: &[Param] = &[
    NAME,
    CIDR,
    Param::string("comment").opt(),
    DIGEST,
    Param::boolean("nomatch").opt(),
];
pub const REMOVE: &[Param] = &[NAME, CIDR, DIGEST];

fn name_of(call: &Call) -> String {
    call.params.get("name").unwrap_or_default().to_owned()
}

fn no_such(name: &str) -> ApiError {
    ApiError::internal(format!("no such IPSet '{name}'"))
}

fn with_digest(list: &[crate::state::firewall::Rule]) -> Vec<Value> {
    let d = digest(list);
    list.iter()
        .map(|e| {
            let mut v = json!(e);
            if v.get("nomatch").is_some() {
                v["nomatch"] = json!(1);
            }
            v["digest"] = json!(d);
            v
        })
        .collect()
}

/// Runs `f` on the IP sets the call's path names (the cluster's, or a
/// guest's own), after the privilege PVE asks to read or `change` them.
fn with_sets<T>(
    inst: &Instance,
    call: &Call,
    change: bool,
    f: impl FnOnce(&mut BTreeMap<String, IpSet>) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    if call.route_key.contains(" /nodes/") {
        let vmid = call.params.vmid("vmid");
        let privilege = if change {
            "VM.Config.Network"
        } else {
            "VM.Audit"
        };
        inst.auth
            .check(&call.identity, &format!("/vms/{vmid}"), &[privilege])?;
        let kind = if call.route_key.contains("/lxc/") {
            GuestKind::Lxc
        } else {
            GuestKind::Qemu
        };
        let mut cluster = inst.cluster();
        let guest = cluster.guest_mut(call.params.node(), vmid, kind)?;
        return f(&mut guest.firewall.ipsets);
    }
    let privilege = if change { "Sys.Modify" } else { "Sys.Audit" };
    inst.auth.check(&call.identity, "/", &[privilege])?;
    let mut cluster = inst.cluster();
    f(&mut cluster.firewall.ipsets)
}

/// `GET .../ipset`.
pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    with_sets(&inst, &call, false, |sets| {
        let list = named_list("name", sets.iter().map(|(n, s)| (n, &s.comment)));
        Ok(Reply::data(with_digest(&list)))
    })
}

/// `POST /cluster/firewall/ipset`: a new set, or with `rename` a renamed
/// one (the same name: only the comment changes).
pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    with_sets(&inst, &call, true, |sets| create_in(sets, &call))
}

fn create_in(sets: &mut BTreeMap<String, IpSet>, call: &Call) -> Result<Reply, ApiError> {
    let name = name_of(call);
    let comment = call.params.get("comment").map(str::to_owned);
    if let Some(old) = call.params.get("rename") {
        let list = named_list("name", sets.iter().map(|(n, s)| (n, &s.comment)));
        check::digest(&digest(&list), call.params.get("digest"))?;
        if !sets.contains_key(old) {
            return Err(ApiError::param(
                "name",
                format!("IPSet '{old}' does not exist"),
            ));
        }
        if old != name && sets.contains_key(&name) {
            return Err(ApiError::param(
                "name",
                format!("IPSet '{name}' does already exist"),
            ));
        }
        let mut moved = sets.remove(old).unwrap_or_default();
        if comment.is_some() {
            moved.comment = comment;
        }
        sets.insert(name, moved);
        return Ok(Reply::null());
    }
    if sets.contains_key(&name) {
        return Err(ApiError::param(
            "name",
            format!("IPSet '{name}' already exists"),
        ));
    }
    sets.insert(
        name,
        IpSet {
            comment,
            entries: vec![],
        },
    );
    Ok(Reply::null())
}

/// `DELETE /cluster/firewall/ipset/{name}`.
pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let name = name_of(&call);
    with_sets(&inst, &call, true, |sets| {
        let Some(set) = sets.get(&name) else {
            return Err(no_such(&name));
        };
        if !set.entries.is_empty() && call.params.flag("force") != Some(true) {
            return Err(ApiError::internal(format!("IPSet '{name}' is not empty")));
        }
        sets.remove(&name);
        Ok(Reply::null())
    })
}

/// `GET /cluster/firewall/ipset/{name}`: the entries, with the digest.
pub async fn entries(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let name = name_of(&call);
    with_sets(&inst, &call, false, |sets| {
        let set = sets.get(&name).ok_or_else(|| no_such(&name))?;
        let list: Vec<_> = set.entries.iter().map(Entry::fields).collect();
        Ok(Reply::data(with_digest(&list)))
    })
}

/// `POST /cluster/firewall/ipset/{name}`: a new entry, first.
pub async fn add(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let name = name_of(&call);
    let raw = call.params.get("cidr").unwrap_or_default();
    let alias = raw
        .strip_prefix("dc/")
        .or_else(|| raw.strip_prefix("guest/"))
        .unwrap_or(raw);
    let cidr = if check::is_name(alias) {
        // The simulator models no aliases.
        return Err(ApiError::internal(format!("no such alias '{alias}'")));
    } else {
        check::clean_cidr(raw).map_err(ApiError::internal)?
    };
    let entry = Entry {
        cidr,
        nomatch: call.params.flag("nomatch") == Some(true),
        comment: call
            .params
            .get("comment")
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
    };
    with_sets(&inst, &call, true, |sets| {
        let set = sets.get_mut(&name).ok_or_else(|| no_such(&name))?;
        add_to(set, entry)
    })
}

fn add_to(set: &mut IpSet, entry: Entry) -> Result<Reply, ApiError> {
    let cidr = &entry.cidr;
    if set.entries.iter().any(|e| e.cidr == *cidr) {
        return Err(ApiError::param(
            "cidr",
            format!("address '{cidr}' already exists"),
        ));
    }
    if cidr.ends_with("/0") {
        return Err(ApiError::param(
            "cidr",
            "a zero prefix is not allowed in ipset entries",
        ));
    }
    set.entries.insert(0, entry);
    Ok(Reply::null())
}

/// `PUT /cluster/firewall/ipset/{name}/{cidr}`: `nomatch` and `comment`
/// set as given (left out: removed).
pub async fn update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let nomatch = call.params.flag("nomatch") == Some(true);
    let comment = call
        .params
        .get("comment")
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    change_entry(&inst, &call, |entries, cidr| {
        let Some(entry) = entries.iter_mut().find(|e| e.cidr == cidr) else {
            return Err(ApiError::param("cidr", "no such IP/Network"));
        };
        entry.nomatch = nomatch;
        entry.comment = comment;
        Ok(())
    })
}

/// `DELETE /cluster/firewall/ipset/{name}/{cidr}`.
pub async fn remove(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    change_entry(&inst, &call, |entries, cidr| {
        entries.retain(|e| e.cidr != cidr);
        Ok(())
    })
}

/// A change of the entry `{cidr}` of the set `{name}`, if the entry list
/// still has the `digest` sent.
fn change_entry(
    inst: &Instance,
    call: &Call,
    change: impl FnOnce(&mut Vec<Entry>, &str) -> Result<(), ApiError>,
) -> Result<Reply, ApiError> {
    let name = name_of(call);
    let cidr = call.params.get("cidr").unwrap_or_default();
    with_sets(inst, call, true, |sets| {
        let set = sets.get_mut(&name).ok_or_else(|| no_such(&name))?;
        let list: Vec<_> = set.entries.iter().map(Entry::fields).collect();
        check::digest(&digest(&list), call.params.get("digest"))?;
        change(&mut set.entries, cidr)?;
        Ok(Reply::null())
    })
}
