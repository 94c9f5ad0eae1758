//! `/nodes/{node}/tasks`: list, status and log of worker tasks.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::sim::http::{ApiError, Call, Reply};
use crate::sim::instance::Instance;
use crate::sim::schema::qemu::NODE;
use crate::sim::schema::{Named, Param};
use crate::sim::tasks::TaskRecord;
use crate::sim::upid::Upid;

pub const UPID: Param = Param::string("upid").max_len(256);
pub const ONE: &[Param] = &[NODE, UPID];
pub const LOG: &[Param] = &[
    NODE,
    UPID,
    Param::integer("start").min(0).opt(),
    Param::integer("limit").min(0).opt(),
    Param::boolean("download").opt(),
];
pub const LIST: &[Param] = &[
    NODE,
    Param::boolean("errors").opt(),
    Param::integer("limit").min(0).opt(),
    Param::integer("start").min(0).opt(),
    Param::integer("since").opt(),
    Param::integer("until").opt(),
    Param::string("source")
        .enums(&["archive", "active", "all"])
        .opt(),
    Param::string("statusfilter")
        .format(Named::PveTaskStatusTypeList)
        .opt(),
    Param::string("typefilter").opt(),
    Param::string("userfilter").opt(),
    Param::integer("vmid")
        .format(Named::PveVmid)
        .min(100)
        .max(999_999_999)
        .opt(),
];

/// The task a UPID names on this node, with PVE's two 400s.
fn lookup(inst: &Instance, call: &Call) -> Result<TaskRecord, ApiError> {
    let text = call.params.get("upid").unwrap_or_default();
    let upid =
        Upid::parse(text).ok_or_else(|| ApiError::param("upid", "unable to parse worker upid"))?;
    inst.tasks
        .find(text)
        .filter(|r| r.upid.node == call.params.node() && upid.node == r.upid.node)
        .ok_or_else(|| ApiError::param("upid", "no such task"))
}

/// The owner, the owner's user for its tokens, or `Sys.Audit` on the node.
fn check_access(inst: &Instance, call: &Call, rec: &TaskRecord) -> Result<(), ApiError> {
    let caller = &call.identity;
    let owner = &rec.upid.user;
    let owner_user = owner.split_once('!').map_or(owner.as_str(), |(u, _)| u);
    let allowed = *owner == caller.full() || (caller.token.is_none() && owner_user == caller.user);
    if allowed {
        return Ok(());
    }
    inst.auth.check(
        caller,
        &format!("/nodes/{}", call.params.node()),
        &["Sys.Audit"],
    )
}

pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let rec = lookup(&inst, &call)?;
    check_access(&inst, &call, &rec)?;
    Ok(Reply::data(json!([{"name": "log"}, {"name": "status"}])))
}

pub async fn status(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let rec = lookup(&inst, &call)?;
    check_access(&inst, &call, &rec)?;
    let u = &rec.upid;
    let (user, tokenid) = match u.user.split_once('!') {
        Some((user, token)) => (user, Some(token)),
        None => (u.user.as_str(), None),
    };
    let mut data = json!({
        "upid": rec.text,
        "node": u.node,
        "pid": u.pid,
        "pstart": u.pstart,
        "starttime": u.starttime,
        "type": u.task_type,
        "id": u.id,
        "user": user,
        "status": if rec.exit.is_some() { "stopped" } else { "running" },
    });
    if let Some(t) = tokenid {
        data["tokenid"] = json!(t);
    }
    if let Some(exit) = &rec.exit {
        data["exitstatus"] = json!(exit);
    }
    Ok(Reply::data(data))
}

pub async fn log(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let text = call.params.get("upid").unwrap_or_default();
    if Upid::parse(text).is_none() {
        return Err(ApiError::param("upid", "unable to parse worker upid"));
    }
    let Ok(rec) = lookup(&inst, &call) else {
        // A parsable UPID without a log file is not an error here.
        return Ok(Reply {
            data: json!([{"n": 1, "t": "unable to open file - No such file or directory"}]),
            total: Some(1),
        });
    };
    check_access(&inst, &call, &rec)?;
    let start = call.params.int("start").unwrap_or(0).max(0) as usize;
    let limit = call.params.int("limit").unwrap_or(50).max(0) as usize;
    if rec.log.is_empty() {
        return Ok(Reply {
            data: json!([{"n": 1, "t": "no content"}]),
            total: Some(1),
        });
    }
    let take = if limit == 0 { usize::MAX } else { limit };
    let lines: Vec<Value> = rec
        .log
        .iter()
        .enumerate()
        .skip(start)
        .take(take)
        .map(|(i, t)| json!({"n": i + 1, "t": t}))
        .collect();
    Ok(Reply {
        data: Value::Array(lines),
        total: Some(rec.log.len()),
    })
}

pub async fn list(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node();
    let source = p.get("source").unwrap_or("archive");
    let vmid = p.get("vmid");
    let typefilter = p.get("typefilter");
    let userfilter = p.get("userfilter");
    let errors_only = p.flag("errors").unwrap_or(false);
    let statuses: Vec<String> = p
        .get("statusfilter")
        .map(|s| {
            crate::sim::schema::format::split_list(s)
                .map(str::to_lowercase)
                .collect()
        })
        .unwrap_or_default();
    let since = p.int("since");
    let until = p.int("until");
    let start = p.int("start").unwrap_or(0).max(0) as usize;
    let limit = p.int("limit").unwrap_or(50).max(0) as usize;
    let may_audit = inst
        .auth
        .has(&call.identity, &format!("/nodes/{node}"), "Sys.Audit");
    let caller = call.identity.full();

    let records = inst.tasks.records().clone();
    let mut items: Vec<&TaskRecord> = records
        .iter()
        .filter(|r| r.upid.node == node && r.is_visible())
        .filter(|r| match source {
            "active" => r.exit.is_none(),
            "all" => true,
            _ => r.exit.is_some(),
        })
        .filter(|r| {
            may_audit
                || r.upid.user == caller
                || (call.identity.token.is_none()
                    && r.upid.user.split('!').next() == Some(&call.identity.user))
        })
        .filter(|r| vmid.is_none_or(|v| r.upid.id == v))
        .filter(|r| typefilter.is_none_or(|t| r.upid.task_type == t))
        .filter(|r| userfilter.is_none_or(|u| r.upid.user.contains(u)))
        .filter(|r| !errors_only || r.exit.as_deref().is_some_and(is_error))
        .filter(|r| statuses.is_empty() || statuses.iter().any(|s| s == status_type(r)))
        .filter(|r| since.is_none_or(|s| r.upid.starttime as i64 >= s))
        .filter(|r| until.is_none_or(|u| r.upid.starttime as i64 <= u))
        .collect();
    items.sort_by(|a, b| {
        b.upid
            .starttime
            .cmp(&a.upid.starttime)
            .then(b.upid.pid.cmp(&a.upid.pid))
    });
    let take = if limit == 0 { usize::MAX } else { limit };
    let data: Vec<Value> = items
        .into_iter()
        .skip(start)
        .take(take)
        .map(list_item)
        .collect();
    Ok(Reply::data(data))
}

fn list_item(r: &TaskRecord) -> Value {
    let u = &r.upid;
    let mut v = json!({
        "upid": r.text, "node": u.node, "pid": u.pid, "pstart": u.pstart, "starttime": u.starttime,
        "type": u.task_type, "id": u.id, "user": u.user,
    });
    match (&r.exit, r.endtime) {
        (Some(exit), Some(end)) => {
            v["status"] = json!(exit);
            v["endtime"] = json!(end);
        }
        _ => v["status"] = json!("RUNNING"),
    }
    v
}

fn is_error(exit: &str) -> bool {
    exit != "OK"
        && !(exit.starts_with("WARNINGS: ") && exit[10..].bytes().all(|b| b.is_ascii_digit()))
}

fn status_type(r: &TaskRecord) -> &'static str {
    match r.exit.as_deref() {
        None => "unknown",
        Some("OK") => "ok",
        Some(e) if !is_error(e) => "warning",
        Some(_) => "error",
    }
}
