//! `/access/acl` (pve-access-control `PVE::API2::ACL`): the ACL entries,
//! read and changed. Roles are the built-in ones; users, groups and tokens
//! must exist, as in user.cfg.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::auth::acl::{is_role, role_privileges};
use crate::auth::{Entry, Identity, Kind};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::schema::format::split_list;

pub const READ: &[Param] = &[];
pub const UPDATE: &[Param] = &[
    Param::string("path"),
    Param::string("roles"),
    Param::string("users").opt(),
    Param::string("groups").opt(),
    Param::string("tokens").opt(),
    Param::boolean("propagate").opt(),
    Param::boolean("delete").opt(),
];

/// `check_perm_modify`: `Permissions.Modify`, or the allocation privilege
/// of the object the path names (`Pool.Allocate` on `/pool/<id>`).
fn modify_privileges(path: &str) -> &'static [&'static str] {
    let below = |prefix: &str| path.strip_prefix(prefix).is_some_and(|r| !r.is_empty());
    if below("/storage/") {
        &["Permissions.Modify", "Datastore.Allocate"]
    } else if below("/vms/") {
        &["Permissions.Modify", "VM.Allocate"]
    } else if below("/pool/") {
        &["Permissions.Modify", "Pool.Allocate"]
    } else {
        &["Permissions.Modify"]
    }
}

/// `normalize_path`: one slash between parts, none at the end.
fn normalize(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let joined = format!("/{}", parts.join("/"));
    joined
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        .then_some(joined)
}

pub async fn read(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let id = &call.identity;
    let audit = inst.auth.has(id, "/access", "Sys.Audit");
    let entries: Vec<Value> = inst
        .auth
        .acl()
        .entries()
        .into_iter()
        .filter(|e| audit || may_modify(&inst, id, &e.path))
        .map(|e| {
            json!({
                "path": e.path,
                "type": e.kind.as_str(),
                "ugid": e.ugid,
                "roleid": e.role,
                "propagate": u8::from(e.propagate),
            })
        })
        .collect();
    Ok(Reply::data(entries))
}

fn may_modify(inst: &Instance, id: &Identity, path: &str) -> bool {
    let have = inst.auth.privileges(id, path);
    modify_privileges(path).iter().any(|p| have.contains(p))
}

pub async fn update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let raw = p.get("path").unwrap_or_default();
    let path = normalize(raw)
        .ok_or_else(|| ApiError::param("path", format!("invalid ACL path '{raw}'")))?;
    let id = &call.identity;
    let have = inst.auth.privileges(id, &path);
    let needed = modify_privileges(&path);
    if !needed.iter().any(|n| have.contains(n)) {
        return Err(ApiError::forbidden(&path, &needed.join("|")));
    }
    let subjects: Vec<(Kind, &str)> = [
        (Kind::User, "users"),
        (Kind::Group, "groups"),
        (Kind::Token, "tokens"),
    ]
    .into_iter()
    .flat_map(|(kind, key)| {
        split_list(p.get(key).unwrap_or_default()).map(move |ugid| (kind, ugid))
    })
    .collect();
    if subjects.is_empty() {
        let why = "either 'users', 'groups' or 'tokens' is required.";
        return Err(ApiError::Param(
            ["users", "groups", "tokens"]
                .into_iter()
                .map(|k| (k.to_owned(), why.to_owned()))
                .collect(),
        ));
    }
    let delete = p.flag("delete") == Some(true);
    let propagate = p.flag("propagate") != Some(false);
    let failed = |msg: String| ApiError::internal(format!("ACL update failed: {msg}"));
    let mut changes = vec![];
    for role in split_list(p.get("roles").unwrap_or_default()) {
        if !is_role(role) {
            return Err(failed(format!("role '{role}' does not exist")));
        }
        // Without Permissions.Modify only what the caller has may be handed
        // out (or taken back).
        if !have.contains("Permissions.Modify")
            && role_privileges(role)
                .unwrap_or_default()
                .iter()
                .any(|privilege| !have.contains(privilege))
        {
            let verb = if delete { "remove" } else { "add" };
            return Err(ApiError::param(
                "role",
                format!(
                    "Cannot {verb} role '{role}' - requires 'Permissions.Modify' or superset of privileges."
                ),
            ));
        }
        for (kind, ugid) in &subjects {
            if !inst.auth.subject_exists(*kind, ugid) {
                return Err(failed(match kind {
                    Kind::User => format!("user '{ugid}' does not exist"),
                    Kind::Group => format!("group '{ugid}' does not exist"),
                    Kind::Token => format!("no such token '{ugid}'"),
                }));
            }
            changes.push(Entry {
                path: path.clone(),
                kind: *kind,
                ugid: (*ugid).to_owned(),
                role: role.to_owned(),
                propagate,
            });
        }
    }
    // All checked before any is written, as user.cfg is written once.
    let mut acl = inst.auth.acl_mut();
    for entry in changes {
        if delete {
            acl.remove(&entry);
        } else {
            acl.set(entry);
        }
    }
    Ok(Reply::null())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalized_like_pve() {
        assert_eq!(normalize("/pool/a/").as_deref(), Some("/pool/a"));
        assert_eq!(normalize("pool//a").as_deref(), Some("/pool/a"));
        assert_eq!(normalize("/").as_deref(), Some("/"));
        assert_eq!(normalize("/pool/a b"), None);
        assert_eq!(
            modify_privileges("/pool/a"),
            ["Permissions.Modify", "Pool.Allocate"]
        );
        assert_eq!(modify_privileges("/pool"), ["Permissions.Modify"]);
    }
}
