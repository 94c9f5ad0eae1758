//! `/cluster/backup` (pve-manager `PVE::API2::Backup`): scheduled vzdump
//! jobs, kept in jobs.cfg.
//!
//! As PVE: reading needs `Sys.Audit` on `/`, changing `Sys.Modify` on `/`
//! (and, for anyone but root@pam, `Datastore.Allocate` on the job's
//! storage, `VM.Backup` on its pool); a job names its guests by `vmid`,
//! `pool` or `all` (one of them); its `schedule` is a calendar event
//! ([`calendar`]), refused with PVE's text; the listing adds `next-run`,
//! the job's next start after now. Jobs never run here.

pub mod calendar;
pub mod run;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::route;
use crate::clock::Clock;
use crate::http::router::Route;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::split_list;
use crate::schema::{Named, Param};
use crate::sim_handler;

/// One job as jobs.cfg keeps it: its options as written.
pub type Job = BTreeMap<String, String>;

const ID: Param = Param::string("id").pattern("\\S+").max_len(50);
const BOOLEANS: &[&str] = &[
    "all",
    "enabled",
    "protected",
    "quiet",
    "remove",
    "repeat-missed",
    "stdexcludes",
    "stop",
];

/// The job options of `PVE::VZDump::Common::json_config_properties` the
/// simulator takes, with the job's own.
const OPTIONS: &[Param] = &[
    Param::boolean("all").opt(),
    Param::integer("bwlimit").min(0).opt(),
    Param::string("comment").max_len(512).opt(),
    Param::string("compress")
        .enums(&["0", "1", "gzip", "lzo", "zstd"])
        .opt(),
    Param::boolean("enabled").opt(),
    Param::string("exclude").opt(),
    Param::integer("ionice").min(0).max(8).opt(),
    Param::integer("lockwait").min(0).opt(),
    Param::string("mailnotification")
        .enums(&["always", "failure"])
        .opt(),
    Param::string("mailto").opt(),
    Param::string("mode")
        .enums(&["snapshot", "suspend", "stop"])
        .opt(),
    Param::string("node").format(Named::PveNode).opt(),
    Param::string("notes-template")
        .max_len(1024)
        .requires("storage")
        .opt(),
    Param::string("notification-mode")
        .enums(&["auto", "legacy-sendmail", "notification-system"])
        .opt(),
    Param::string("pool").opt(),
    Param::boolean("protected").requires("storage").opt(),
    Param::string("prune-backups").opt(),
    Param::boolean("quiet").opt(),
    Param::boolean("remove").opt(),
    Param::boolean("repeat-missed").opt(),
    Param::string("schedule").max_len(128).opt(),
    Param::boolean("stdexcludes").opt(),
    Param::boolean("stop").opt(),
    Param::integer("stopwait").min(0).opt(),
    Param::string("storage").format(Named::PveStorageId).opt(),
    Param::string("vmid").opt(),
    Param::integer("zstd").opt(),
];
pub const CREATE: &[Param] = &[Param::string("id").format(Named::PveConfigid).opt()];
pub const ONE: &[Param] = &[ID];
pub const UPDATE: &[Param] = &[
    ID,
    Param::string("delete").format(Named::PveConfigidList).opt(),
];

/// The routes.
pub fn routes() -> Vec<Route> {
    const JOBS: &str = "/cluster/backup";
    const JOB: &str = "/cluster/backup/{id}";
    vec![
        route("GET", JOBS, &[], sim_handler!(index)),
        route("POST", JOBS, &[CREATE, OPTIONS], sim_handler!(create)),
        route("GET", JOB, &[ONE], sim_handler!(read)),
        route("PUT", JOB, &[UPDATE, OPTIONS], sim_handler!(update)),
        route("DELETE", JOB, &[ONE], sim_handler!(delete)),
    ]
}

/// A job as the API shows it: booleans and numbers typed,
/// `prune-backups` an object, `next-run` from its schedule.
fn shown(id: &str, job: &Job, now: u64) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(id));
    out.insert("type".into(), json!("vzdump"));
    for (k, v) in job {
        let value = if k == "prune-backups" {
            let keep: Map<String, Value> = split_list(v)
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, n)| {
                    (
                        k.to_owned(),
                        n.parse::<u64>().map_or(json!(n), |n| json!(n)),
                    )
                })
                .collect();
            Value::Object(keep)
        } else if BOOLEANS.contains(&k.as_str())
            || ["bwlimit", "ionice", "zstd"].contains(&k.as_str())
        {
            v.parse::<i64>().map_or(json!(v), |n| json!(n))
        } else {
            json!(v)
        };
        out.insert(k.clone(), value);
    }
    if let Some(next) = job
        .get("schedule")
        .and_then(|s| calendar::parse(s).ok())
        .and_then(|e| e.next(now))
    {
        out.insert("next-run".into(), json!(next));
    }
    Value::Object(out)
}

/// `GET /cluster/backup`.
pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Audit"])?;
    let now = Clock::epoch_secs();
    let cluster = inst.cluster();
    let jobs: Vec<Value> = cluster
        .backup_jobs
        .iter()
        .map(|(id, job)| shown(id, job, now))
        .collect();
    Ok(Reply::data(jobs))
}

/// `GET /cluster/backup/{id}`.
pub async fn read(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Audit"])?;
    let id = call.params.get("id").unwrap_or_default();
    let cluster = inst.cluster();
    let job = cluster.backup_jobs.get(id).ok_or_else(|| no_such(id))?;
    let mut v = shown(id, job, Clock::epoch_secs());
    if let Some(o) = v.as_object_mut() {
        o.remove("next-run");
    }
    Ok(Reply::data(v))
}

fn no_such(id: &str) -> ApiError {
    ApiError::param("id", format!("No such job '{id}'"))
}

/// The options of `call` as jobs.cfg keeps them (booleans `0`/`1`).
fn options(call: &Call) -> Job {
    call.params
        .iter()
        .filter(|(k, _)| OPTIONS.iter().any(|p| p.matches(k)))
        .map(|(k, v)| {
            let v = if BOOLEANS.contains(&k.as_str()) {
                if call.params.flag(k) == Some(true) {
                    "1"
                } else {
                    "0"
                }
                .to_owned()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// The permission checks beyond `Sys.Modify` (`assert_param_permission_*`
/// and the pool's `VM.Backup`), and the pool's existence.
fn permitted(inst: &Instance, call: &Call, job: &Job) -> Result<(), ApiError> {
    if let Some(pool) = job.get("pool") {
        if !inst.cluster().pools.contains_key(pool) {
            return Err(ApiError::Forbidden(Some(format!(
                "pool '{pool}' does not exist"
            ))));
        }
        inst.auth
            .check(&call.identity, &format!("/pool/{pool}"), &["VM.Backup"])?;
    }
    if call.identity.is_root() {
        return Ok(());
    }
    if let Some(storage) = job.get("storage") {
        inst.auth.check(
            &call.identity,
            &format!("/storage/{storage}"),
            &["Datastore.Allocate"],
        )?;
    }
    Ok(())
}

/// `verify_vzdump_parameters` with the calendar event and retention
/// checks; `complete`: the job as it will be stored (it must name its
/// guests).
fn verify(job: &Job, complete: bool) -> Result<(), ApiError> {
    if let Some(schedule) = job.get("schedule") {
        calendar::parse(schedule).map_err(|e| {
            ApiError::param(
                "schedule",
                format!("invalid calendar event '{schedule}' - {e}"),
            )
        })?;
    }
    let set = |k: &str| job.get(k).is_some_and(|v| !v.is_empty() && v != "0");
    for other in ["all", "exclude", "pool"] {
        if set(other) && set("vmid") {
            return Err(ApiError::param(
                other,
                "option conflicts with option 'vmid'",
            ));
        }
    }
    if let Some(vmids) = job.get("vmid") {
        for v in split_list(vmids) {
            if v.parse::<u32>()
                .map_or(true, |n| !(100..=999_999_999).contains(&n))
            {
                return Err(ApiError::param(
                    "vmid",
                    format!("value '{v}' does not look like a valid VM ID"),
                ));
            }
        }
    }
    if let Some(prune) = job.get("prune-backups") {
        prune_backups(prune).map_err(|e| ApiError::param("prune-backups", e))?;
    }
    if complete && !(set("all") || set("stop") || set("pool") || set("vmid")) {
        return Err(ApiError::param("vmid", "property is missing"));
    }
    Ok(())
}

/// The `prune-backups` property string: `keep-<what>=<n>` or `keep-all=1`.
fn prune_backups(text: &str) -> Result<(), String> {
    const KEYS: &[&str] = &[
        "keep-all",
        "keep-last",
        "keep-hourly",
        "keep-daily",
        "keep-weekly",
        "keep-monthly",
        "keep-yearly",
    ];
    let mut keys = vec![];
    for kv in split_list(text) {
        let Some((k, v)) = kv.split_once('=') else {
            return Err("value without key, but schema does not define a default key".into());
        };
        if !KEYS.contains(&k) {
            return Err(format!("invalid format - unexpected property '{k}'"));
        }
        if v.parse::<u64>().is_err() {
            return Err(format!(
                "invalid format - {k}: type check ('integer') failed - got '{v}'"
            ));
        }
        keys.push((k, v));
    }
    if keys.iter().any(|(k, v)| *k == "keep-all" && *v != "0") && keys.len() > 1 {
        return Err("keep-all cannot be set together with other options.".into());
    }
    Ok(())
}

/// `POST /cluster/backup`.
pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Modify"])?;
    let mut job = options(&call);
    permitted(&inst, &call, &job)?;
    if !job.contains_key("schedule") {
        return Err(ApiError::param(
            "schedule",
            "neither 'starttime' nor 'schedule' were set",
        ));
    }
    job.entry("enabled".into()).or_insert_with(|| "1".into());
    // PVE generates a UUID; the simulator a counter (still no configid).
    let mut cluster = inst.cluster();
    let id = match call.params.get("id") {
        Some(id) => id.to_owned(),
        None => format!("backup-{:08x}-0000", cluster.backup_jobs.len() + 1),
    };
    if cluster.backup_jobs.contains_key(&id) {
        return Err(ApiError::internal(format!("Job '{id}' already exists")));
    }
    verify(&job, true)?;
    cluster.backup_jobs.insert(id, job);
    Ok(Reply::null())
}

/// `PUT /cluster/backup/{id}`.
pub async fn update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Modify"])?;
    let id = call.params.get("id").unwrap_or_default().to_owned();
    let param = options(&call);
    let delete: Vec<String> = call
        .params
        .get("delete")
        .map(|d| split_list(d).map(str::to_owned).collect())
        .unwrap_or_default();
    if param.is_empty() && delete.is_empty() {
        return Err(ApiError::internal("no options specified"));
    }
    permitted(&inst, &call, &param)?;
    verify(&param, false)?;
    let mut cluster = inst.cluster();
    let Some(current) = cluster.backup_jobs.get(&id) else {
        return Err(ApiError::internal("no such vzdump job"));
    };
    let mut job = current.clone();
    for k in &delete {
        if !OPTIONS.iter().any(|p| p.matches(k)) {
            return Err(ApiError::param("delete", format!("unknown option '{k}'")));
        }
        job.remove(k);
    }
    job.extend(param.clone());
    // Naming the guests one way drops the others (`update_job`).
    if param.contains_key("vmid") {
        for k in ["all", "exclude", "pool"] {
            job.remove(k);
        }
    } else if param.get("all").is_some_and(|v| v == "1") {
        job.remove("vmid");
        job.remove("pool");
    } else if job.contains_key("pool") {
        for k in ["vmid", "all", "exclude"] {
            job.remove(k);
        }
    }
    verify(&job, true)?;
    cluster.backup_jobs.insert(id, job);
    Ok(Reply::null())
}

/// `DELETE /cluster/backup/{id}`.
pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Modify"])?;
    let id = call.params.get("id").unwrap_or_default();
    let mut cluster = inst.cluster();
    cluster.backup_jobs.remove(id).ok_or_else(|| no_such(id))?;
    Ok(Reply::null())
}
