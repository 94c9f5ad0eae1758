//! A guest's own aliases (pve-firewall `PVE::API2::Firewall::VMAliases`,
//! `CTAliases`): `.../{vmid}/firewall/aliases[/{name}]`.
//!
//! As PVE: aliases are keyed by the lowercased name and listed in key
//! order with the list's digest; the address is an IP or CIDR, kept as
//! `parse_ip_or_cidr` leaves it (`/32`, `/128` dropped); a name taken
//! (in any case) is refused; a change replaces address and comment (left
//! out: removed) and, as a deletion, is refused on a stale `digest`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::check;
use super::guest::{read, write};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::state::firewall::{Alias, GuestFirewall, digest};

const PATTERN: &str = "[A-Za-z][A-Za-z0-9\\-\\_]+";
const NAME: Param = Param::string("name").pattern(PATTERN).max_len(64);
const DIGEST: Param = Param::string("digest").max_len(64).opt();

pub const ONE: &[Param] = &[NAME];
pub const CREATE: &[Param] = &[NAME, Param::string("cidr"), Param::string("comment").opt()];
pub const UPDATE: &[Param] = &[
    NAME,
    Param::string("cidr"),
    Param::string("comment").opt(),
    DIGEST,
    Param::string("rename").pattern(PATTERN).max_len(64).opt(),
];
pub const DELETE: &[Param] = &[NAME, DIGEST];

fn listed(fw: &GuestFirewall) -> Vec<crate::state::firewall::Rule> {
    fw.aliases.values().map(Alias::fields).collect()
}

/// The address as PVE keeps it, or its refusal.
fn cidr(call: &Call) -> Result<String, ApiError> {
    let raw = call.params.get("cidr").unwrap_or_default();
    let version = check::ip_or_cidr(raw).map_err(|e| ApiError::param("cidr", e))?;
    let host = if version == 6 { "/128" } else { "/32" };
    Ok(raw.strip_suffix(host).unwrap_or(raw).to_owned())
}

fn comment(call: &Call) -> Option<String> {
    call.params
        .get("comment")
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
}

fn key(call: &Call) -> String {
    call.params.get("name").unwrap_or_default().to_lowercase()
}

/// `GET .../firewall/aliases`.
pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    read(&inst, &call, |fw| {
        let list = listed(fw);
        let d = digest(&list);
        let out: Vec<Value> = list
            .iter()
            .map(|a| {
                let mut v = json!(a);
                v["digest"] = json!(d);
                v
            })
            .collect();
        Ok(json!(out))
    })
}

/// `GET .../firewall/aliases/{name}`.
pub async fn one(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    read(&inst, &call, |fw| {
        let alias = fw
            .aliases
            .get(&key(&call))
            .ok_or_else(|| ApiError::param("name", "no such alias"))?;
        Ok(json!(alias.fields()))
    })
}

/// `POST .../firewall/aliases`.
pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let cidr = cidr(&call)?;
    write(&inst, &call, |fw, _| {
        let name = call.params.get("name").unwrap_or_default();
        if fw.aliases.contains_key(&key(&call)) {
            return Err(ApiError::param(
                "name",
                format!("alias '{name}' already exists"),
            ));
        }
        let alias = Alias {
            name: name.to_owned(),
            cidr,
            comment: comment(&call),
        };
        fw.aliases.insert(key(&call), alias);
        Ok(())
    })
}

/// `PUT .../firewall/aliases/{name}`: address and comment replaced, the
/// alias renamed with `rename`.
pub async fn update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let cidr = cidr(&call)?;
    write(&inst, &call, |fw, _| {
        check::digest(&digest(&listed(fw)), call.params.get("digest"))?;
        let Some(old) = fw.aliases.get(&key(&call)) else {
            return Err(ApiError::param("name", "no such alias"));
        };
        let name = call
            .params
            .get("rename")
            .map_or_else(|| old.name.clone(), str::to_owned);
        if name.to_lowercase() != key(&call) && fw.aliases.contains_key(&name.to_lowercase()) {
            return Err(ApiError::param(
                "name",
                format!("alias '{name}' already exists"),
            ));
        }
        fw.aliases.remove(&key(&call));
        let alias = Alias {
            name: name.clone(),
            cidr,
            comment: comment(&call),
        };
        fw.aliases.insert(name.to_lowercase(), alias);
        Ok(())
    })
}

/// `DELETE .../firewall/aliases/{name}` (a name that is not there: done).
pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    write(&inst, &call, |fw, _| {
        check::digest(&digest(&listed(fw)), call.params.get("digest"))?;
        fw.aliases.remove(&key(&call));
        Ok(())
    })
}
