//! `/nodes/{node}/tasks`: list, status and log of worker tasks.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::auth::Identity;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::qemu::NODE;
use crate::schema::{Named, Param};
use crate::tasks::{TaskRecord, archive};
use crate::upid::Upid;

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

/// Whether `caller` may see a task of `task_user` as its own: the same
/// user and token, or the user itself for any of its tokens' tasks.
fn started_by(task_user: &str, caller: &Identity) -> bool {
    let (user, token) = split_token(task_user);
    user == caller.user && (caller.token.is_none() || token == caller.token.as_deref())
}

/// The owner, the owner's user for its tokens, or `Sys.Audit` on the node.
fn check_access(inst: &Instance, call: &Call, rec: &TaskRecord) -> Result<(), ApiError> {
    if started_by(&rec.upid.user, &call.identity) {
        return Ok(());
    }
    inst.auth.check(
        &call.identity,
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
    let status = if rec.exit.is_some() {
        "stopped"
    } else {
        "running"
    };
    let mut data = task_json(&rec, status);
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

/// `GET /nodes/{node}/tasks`, as pve-manager's `PVE::API2::Tasks::node_tasks`
/// does it: the unsaved entries of the active file (`source=active|all`),
/// then the archive index (`source=archive|all`); see [`archive`].
pub async fn list(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node();
    let source = p.get("source").unwrap_or("archive");
    let filter = ListFilter::from_call(&inst, &call);
    let start = p.int("start").unwrap_or(0).max(0) as usize;
    // `limit=0` lists nothing (PVE: `$limit // 50`, then `$limit <= 0`).
    let limit = p.int("limit").unwrap_or(50).max(0) as usize;

    // Read under the lock, not copied out: every task's log would be
    // copied with it, and a node's list is read every second while its
    // tasks run (at 10,000 VMs, tens of thousands of tasks).
    let records = inst.tasks.records();
    // `total` counts every task that passes the filters, listed or not.
    let matching: Vec<&TaskRecord> = archive::in_list_order(&records, node, source)
        .into_iter()
        .filter(|r| r.is_visible() && filter.admits(r))
        .collect();
    let data: Vec<Value> = matching
        .iter()
        .skip(start)
        .take(limit)
        .map(|r| list_item(r))
        .collect();
    Ok(Reply {
        data: Value::Array(data),
        total: Some(matching.len()),
    })
}

/// How many of each node's recent tasks the cluster list shows.
const CLUSTER_RECENT: usize = 50;

/// `GET /cluster/tasks` ("List recent tasks (cluster wide)", pve-manager
/// `PVE::API2::Cluster` over `PVE::Cluster::get_tasklist`): every node's
/// recent tasks, running and ended, as its task list shows them; all of
/// them with `Sys.Audit` on `/`, else the caller's own.
pub async fn cluster(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let all = inst.auth.has(&call.identity, "/", "Sys.Audit");
    // Under the lock, as `list` reads it.
    let records = inst.tasks.records();
    let nodes: std::collections::BTreeSet<&str> =
        records.iter().map(|r| r.upid.node.as_str()).collect();
    let data: Vec<Value> = nodes
        .into_iter()
        .flat_map(|node| {
            archive::in_list_order(&records, node, "all")
                .into_iter()
                .filter(|r| r.is_visible())
                .take(CLUSTER_RECENT)
        })
        .filter(|r| all || started_by(&r.upid.user, &call.identity))
        .map(list_item)
        .collect();
    Ok(Reply::data(Value::Array(data)))
}

/// The list's filters, in PVE's `$filter_task` order of checks.
struct ListFilter<'a> {
    caller: &'a Identity,
    may_audit: bool,
    userfilter: Option<String>,
    typefilter: Option<&'a str>,
    vmid: Option<&'a str>,
    since: Option<i64>,
    until: Option<i64>,
    /// Status types shown (`ok`, `warning`, `error`, `unknown`).
    statuses: Vec<String>,
}

impl<'a> ListFilter<'a> {
    fn from_call(inst: &Instance, call: &'a Call) -> Self {
        let p = &call.params;
        let all = || {
            ["ok", "warning", "error", "unknown"]
                .map(str::to_owned)
                .to_vec()
        };
        // `errors=1` hides only `ok` tasks (warnings and running ones stay)
        // and overrides `statusfilter`.
        let statuses = match (p.flag("errors").unwrap_or(false), p.get("statusfilter")) {
            (true, _) => all().into_iter().filter(|s| s != "ok").collect(),
            (false, Some(list)) => crate::schema::format::split_list(list)
                .map(str::to_lowercase)
                .collect(),
            (false, None) => all(),
        };
        Self {
            caller: &call.identity,
            may_audit: inst
                .auth
                .has(&call.identity, &format!("/nodes/{}", p.node()), "Sys.Audit"),
            userfilter: p.get("userfilter").map(str::to_lowercase),
            typefilter: p.get("typefilter"),
            vmid: p.get("vmid"),
            since: p.int("since"),
            until: p.int("until"),
            statuses,
        }
    }

    fn admits(&self, r: &TaskRecord) -> bool {
        let u = &r.upid;
        let (owner, _) = split_token(&u.user);
        // Matched against the user without the token name, ignoring case.
        self.userfilter
            .as_deref()
            .is_none_or(|f| owner.to_lowercase().contains(f))
            && (self.may_audit || started_by(&u.user, self.caller))
            && self.typefilter.is_none_or(|t| u.task_type == t)
            && self.vmid.is_none_or(|v| u.id == v)
            && self.since.is_none_or(|s| u.starttime as i64 >= s)
            && self.until.is_none_or(|t| u.starttime as i64 <= t)
            && self
                .statuses
                .iter()
                .any(|s| s == status_type(listed_status(r)))
    }
}

/// `user@realm!tokenid` → (`user@realm`, `Some(tokenid)`).
fn split_token(user: &str) -> (&str, Option<&str>) {
    match user.split_once('!') {
        Some((user, token)) => (user, Some(token)),
        None => (user, None),
    }
}

/// The status the list shows: the exit status once an archival pass
/// recorded the end, else none (listed as `RUNNING`).
fn listed_status(r: &TaskRecord) -> Option<&str> {
    r.listing.endtime().and(r.exit.as_deref())
}

/// A task's UPID fields as its status and the list show them (the user
/// without the token name, which is `tokenid`), with `status`.
fn task_json(r: &TaskRecord, status: &str) -> Value {
    let u = &r.upid;
    let (user, tokenid) = split_token(&u.user);
    let mut v = json!({
        "upid": r.text, "node": u.node, "pid": u.pid, "pstart": u.pstart, "starttime": u.starttime,
        "type": u.task_type, "id": u.id, "user": user, "status": status,
    });
    if let Some(t) = tokenid {
        v["tokenid"] = json!(t);
    }
    v
}

fn list_item(r: &TaskRecord) -> Value {
    let mut v = task_json(r, listed_status(r).unwrap_or("RUNNING"));
    if let Some(end) = r.listing.endtime() {
        v["endtime"] = json!(end);
    }
    if !r.listing.is_archived() {
        // Entries of the active file carry its `saved` column (a string).
        v["saved"] = json!("0");
    }
    v
}

fn is_error(exit: &str) -> bool {
    exit != "OK"
        && !(exit.starts_with("WARNINGS: ") && exit[10..].bytes().all(|b| b.is_ascii_digit()))
}

/// pve-common `upid_normalize_status_type`.
fn status_type(status: Option<&str>) -> &'static str {
    match status {
        None | Some("unexpected status") => "unknown",
        Some("OK") => "ok",
        Some(e) if !is_error(e) => "warning",
        Some(_) => "error",
    }
}
