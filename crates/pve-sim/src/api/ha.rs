//! `/cluster/ha` (pve-ha-manager `PVE::API2::HA::*`): resources, rules
//! (PVE 9) or groups (PVE 8), and the manager's status. The simulated CRM
//! acts on requests at once: a resource requested `started` is started on
//! its node, `stopped`/`disabled` ones are stopped, and migrations requested
//! through HA (or the control API, as the load balancer would) run as
//! `root@pam` tasks on the source node.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::route;
use crate::auth::Identity;
use crate::http::router::Route;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::split_list;
use crate::schema::{Named, Param};
use crate::sim_handler;
use crate::state::ha::{HaResource, HaSection};
use crate::state::{Cluster, GuestKind, Ha, Running, Vm};
use crate::tasks::{self, TaskCtx};

const SID: Param = Param::string("sid");
const STATE: Param = Param::string("state")
    .enums(&["started", "stopped", "enabled", "disabled", "ignored"])
    .opt();
const RESOURCE_OPTS: &[Param] = &[
    STATE,
    Param::string("group").format(Named::PveConfigid).opt(),
    Param::string("comment").max_len(4096).opt(),
    Param::integer("max_restart").min(0).opt(),
    Param::integer("max_relocate").min(0).opt(),
    Param::boolean("failback").opt(),
    Param::boolean("auto-rebalance").opt(),
];
const CREATE: &[&[Param]] = &[
    &[SID, Param::string("type").enums(&["ct", "vm"]).opt()],
    RESOURCE_OPTS,
];
const UPDATE: &[&[Param]] = &[
    &[
        SID,
        Param::string("delete").format(Named::PveConfigidList).opt(),
        Param::string("digest").max_len(64).opt(),
    ],
    RESOURCE_OPTS,
];
const ONE: &[&[Param]] = &[&[SID]];
const DELETE: &[&[Param]] = &[&[SID, Param::boolean("purge").opt()]];
const MIGRATE: &[&[Param]] = &[&[SID, Param::string("node").format(Named::PveNode)]];
const RULE_OPTS: &[Param] = &[
    Param::string("type").enums(&["node-affinity", "resource-affinity"]),
    Param::string("resources").opt(),
    Param::string("nodes").opt(),
    Param::boolean("strict").opt(),
    Param::string("affinity")
        .enums(&["positive", "negative"])
        .opt(),
    Param::string("comment").max_len(4096).opt(),
    Param::boolean("disable").opt(),
];
const RULE: &[&[Param]] = &[
    &[Param::string("rule").format(Named::PveConfigid)],
    RULE_OPTS,
];
const RULE_ONE: &[&[Param]] = &[&[Param::string("rule").format(Named::PveConfigid)]];
const RULE_UPDATE: &[&[Param]] = &[
    &[
        Param::string("rule").format(Named::PveConfigid),
        Param::string("delete").format(Named::PveConfigidList).opt(),
        Param::string("digest").max_len(64).opt(),
    ],
    RULE_OPTS,
];
const GROUP: &[&[Param]] = &[&[
    Param::string("group").format(Named::PveConfigid),
    Param::string("nodes"),
    Param::boolean("restricted").opt(),
    Param::boolean("nofailback").opt(),
    Param::string("comment").max_len(4096).opt(),
    Param::string("type").enums(&["group"]).opt(),
]];
const GROUP_ONE: &[&[Param]] = &[&[Param::string("group").format(Named::PveConfigid)]];
const GROUP_UPDATE: &[&[Param]] = &[&[
    Param::string("group").format(Named::PveConfigid),
    Param::string("nodes").opt(),
    Param::boolean("restricted").opt(),
    Param::boolean("nofailback").opt(),
    Param::string("comment").max_len(4096).opt(),
    Param::string("delete").format(Named::PveConfigidList).opt(),
    Param::string("digest").max_len(64).opt(),
]];

/// HA routes of a PVE version: rules on 9, groups on 8 (9 answers group
/// calls with "migrated to rules", 8 has no rules path at all).
pub fn routes(pve_version: u8) -> Vec<Route> {
    let mut out = vec![
        route("GET", "/cluster/ha/resources", &[], sim_handler!(list)),
        route(
            "POST",
            "/cluster/ha/resources",
            CREATE,
            sim_handler!(create),
        ),
        route("GET", "/cluster/ha/resources/{sid}", ONE, sim_handler!(get)),
        route(
            "PUT",
            "/cluster/ha/resources/{sid}",
            UPDATE,
            sim_handler!(update),
        ),
        route(
            "DELETE",
            "/cluster/ha/resources/{sid}",
            DELETE,
            sim_handler!(delete),
        ),
        route(
            "POST",
            "/cluster/ha/resources/{sid}/migrate",
            MIGRATE,
            sim_handler!(migrate),
        ),
        route(
            "POST",
            "/cluster/ha/resources/{sid}/relocate",
            MIGRATE,
            sim_handler!(migrate),
        ),
        route(
            "GET",
            "/cluster/ha/status/current",
            &[],
            sim_handler!(status),
        ),
        route("GET", "/cluster/ha/groups", &[], sim_handler!(groups)),
        route(
            "POST",
            "/cluster/ha/groups",
            GROUP,
            sim_handler!(create_group),
        ),
        route(
            "GET",
            "/cluster/ha/groups/{group}",
            GROUP_ONE,
            sim_handler!(get_group),
        ),
        route(
            "PUT",
            "/cluster/ha/groups/{group}",
            GROUP_UPDATE,
            sim_handler!(update_group),
        ),
        route(
            "DELETE",
            "/cluster/ha/groups/{group}",
            GROUP_ONE,
            sim_handler!(delete_group),
        ),
    ];
    if pve_version >= 9 {
        out.extend([
            route("GET", "/cluster/ha/rules", &[], sim_handler!(rules)),
            route("POST", "/cluster/ha/rules", RULE, sim_handler!(create_rule)),
            route(
                "GET",
                "/cluster/ha/rules/{rule}",
                RULE_ONE,
                sim_handler!(get_rule),
            ),
            route(
                "PUT",
                "/cluster/ha/rules/{rule}",
                RULE_UPDATE,
                sim_handler!(update_rule),
            ),
            route(
                "DELETE",
                "/cluster/ha/rules/{rule}",
                RULE_ONE,
                sim_handler!(delete_rule),
            ),
        ]);
    }
    out
}

fn audit(inst: &Instance, call: &Call) -> Result<(), ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Audit"])
}

fn console(inst: &Instance, call: &Call) -> Result<(), ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Console"])
}

/// `parse_sid`: `vm:100`, `ct:100`, or a bare VMID of an existing guest.
fn parse_sid(cluster: &Cluster, sid: &str) -> Result<(String, u32), ApiError> {
    let bad = || ApiError::param("sid", format!("unable to parse service id '{sid}'"));
    let (kind, vmid) = match sid.split_once(':') {
        Some((k @ ("vm" | "ct"), id)) => (Some(k), id),
        Some(_) => return Err(bad()),
        None => (None, sid),
    };
    let vmid: u32 = vmid.parse().map_err(|_| bad())?;
    let kind = match (kind, cluster.vms.get(&vmid)) {
        (Some(k), _) => k,
        (None, Some(g)) => g.kind.ha_type(),
        (None, None) => return Err(bad()),
    };
    Ok((format!("{kind}:{vmid}"), vmid))
}

fn resource_json(sid: &str, r: &HaResource) -> Value {
    let mut v = json!({
        "sid": sid,
        "type": sid.split(':').next().unwrap_or_default(),
        "state": r.state,
        "digest": "0000000000000000000000000000000000000000",
    });
    for (k, val) in &r.options {
        v[k] = val.parse::<i64>().map_or_else(|_| json!(val), Value::from);
    }
    v
}

pub async fn list(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    audit(&inst, &call)?;
    let cluster = inst.cluster();
    let items: Vec<Value> = cluster
        .ha
        .resources
        .iter()
        .map(|(sid, r)| resource_json(sid, r))
        .collect();
    Ok(Reply::data(items))
}

pub async fn get(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    audit(&inst, &call)?;
    let cluster = inst.cluster();
    let (sid, _) = parse_sid(&cluster, call.params.get("sid").unwrap_or_default())?;
    let r = cluster
        .ha
        .resources
        .get(&sid)
        .ok_or_else(|| ApiError::internal(format!("no such resource '{sid}'")))?;
    Ok(Reply::data(resource_json(&sid, r)))
}

/// The options of a create or update besides `sid`, `state` and control keys.
fn options(call: &Call) -> BTreeMap<String, String> {
    call.params
        .iter()
        .filter(|(k, _)| !["sid", "type", "state", "delete", "digest"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn check_group(inst: &Instance, cluster: &Cluster, call: &Call) -> Result<(), ApiError> {
    match call.params.get("group") {
        Some(_) if inst.pve_version >= 9 => Err(ApiError::internal(
            "invalid parameter 'group': ha groups have been migrated to rules",
        )),
        Some(g) if !cluster.ha.groups.contains_key(g) => {
            Err(ApiError::internal(format!("HA group '{g}' does not exist")))
        }
        _ => Ok(()),
    }
}

pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    let (sid, vmid) = {
        let mut cluster = inst.cluster();
        let (sid, vmid) = parse_sid(&cluster, call.params.get("sid").unwrap_or_default())?;
        if call
            .params
            .get("type")
            .is_some_and(|t| Some(t) != sid.split(':').next())
        {
            return Err(ApiError::internal("types does not match"));
        }
        check_group(&inst, &cluster, &call)?;
        if !cluster.vms.contains_key(&vmid) {
            return Err(ApiError::internal(format!(
                "resource '{sid}' does not exist in cluster"
            )));
        }
        if cluster.ha.resources.contains_key(&sid) {
            return Err(ApiError::internal(format!(
                "create resource failed: resource ID '{sid}' already defined"
            )));
        }
        let state = call.params.get("state").unwrap_or("started");
        let state = if state == "enabled" { "started" } else { state };
        cluster.ha.resources.insert(
            sid.clone(),
            HaResource {
                state: state.to_owned(),
                options: options(&call),
            },
        );
        (sid, vmid)
    };
    let _ = sid;
    crm_apply(&inst, vmid);
    Ok(Reply::null())
}

pub async fn update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    let vmid = {
        let mut cluster = inst.cluster();
        let (sid, vmid) = parse_sid(&cluster, call.params.get("sid").unwrap_or_default())?;
        check_group(&inst, &cluster, &call)?;
        let r = cluster
            .ha
            .resources
            .get_mut(&sid)
            .ok_or_else(|| ApiError::internal(format!("no such resource '{sid}'")))?;
        if let Some(state) = call.params.get("state") {
            r.state = if state == "enabled" { "started" } else { state }.to_owned();
        }
        r.options.extend(options(&call));
        for key in split_list(call.params.get("delete").unwrap_or_default()) {
            r.options.remove(key);
        }
        vmid
    };
    crm_apply(&inst, vmid);
    Ok(Reply::null())
}

pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    let mut cluster = inst.cluster();
    let (sid, _) = parse_sid(&cluster, call.params.get("sid").unwrap_or_default())?;
    if !cluster.ha.resources.contains_key(&sid) {
        return Err(ApiError::internal(format!(
            "cannot delete service '{sid}', not HA managed!"
        )));
    }
    if call.params.flag("purge") == Some(false) {
        cluster.ha.resources.remove(&sid);
    } else {
        cluster.ha.remove_resource(&sid);
    }
    Ok(Reply::null())
}

pub async fn migrate(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    let target = call.params.get("node").unwrap_or_default().to_owned();
    let (sid, vmid, source) = {
        let cluster = inst.cluster();
        let (sid, vmid) = parse_sid(&cluster, call.params.get("sid").unwrap_or_default())?;
        if !cluster.ha.resources.contains_key(&sid) {
            return Err(ApiError::internal(format!(
                "service '{sid}' is not HA managed"
            )));
        }
        if !cluster.has_node(&target) {
            return Err(ApiError::internal(format!(
                "no such cluster node '{target}'"
            )));
        }
        let source = cluster
            .vms
            .get(&vmid)
            .map(|g| g.node.clone())
            .unwrap_or_default();
        (sid, vmid, source)
    };
    crm_migrate(&inst, &source, vmid, &target);
    Ok(Reply::data(json!({"sid": sid, "requested-node": target})))
}

/// `hamigrate`: the API's migrate of an HA-managed VM only asks the CRM.
pub fn request_migration(
    inst: &Arc<Instance>,
    call: &Call,
    node: &str,
    vmid: u32,
    target: &str,
) -> String {
    let target = target.to_owned();
    tasks::spawn(
        inst,
        call,
        node,
        "hamigrate",
        &vmid.to_string(),
        move |ctx| async move {
            ctx.log(format!(
                "Requesting HA migration for VM {vmid} to node {target}"
            ));
            crm_migrate(&ctx.inst, &ctx.node, vmid, &target);
            Ok(())
        },
    )
}

/// `hastart`/`hastop`: a power call on an HA-managed guest sets the
/// requested state; the CRM then starts or stops the guest.
pub fn request_state(
    inst: &Arc<Instance>,
    call: &Call,
    node: &str,
    vmid: u32,
    state: &'static str,
) -> Option<String> {
    let sid = {
        let cluster = inst.cluster();
        let vm = cluster.vms.get(&vmid)?;
        cluster.ha.is_managed(vm).then(|| Ha::sid(vm))?
    };
    let (task, verb) = if state == "started" {
        ("hastart", "start")
    } else {
        ("hastop", "stop")
    };
    let kind = if sid.starts_with("ct:") { "CT" } else { "VM" };
    Some(tasks::spawn(
        inst,
        call,
        node,
        task,
        &vmid.to_string(),
        move |ctx| async move {
            ctx.log(format!("Requesting HA {verb} for {kind} {vmid}"));
            if let Some(r) = ctx.inst.cluster().ha.resources.get_mut(&sid) {
                r.state = state.to_owned();
            }
            crm_apply(&ctx.inst, vmid);
            Ok(())
        },
    ))
}

/// The identity the HA stack acts as.
fn crm_call(route_key: &str) -> Call {
    Call {
        params: Default::default(),
        identity: Identity {
            user: "root@pam".into(),
            token: None,
        },
        lock_timeout: false,
        route_key: route_key.into(),
        upload: None,
    }
}

/// The CRM brings a guest to its requested state.
pub fn crm_apply(inst: &Arc<Instance>, vmid: u32) {
    let (node, want, running) = {
        let cluster = inst.cluster();
        let Some(vm) = cluster.vms.get(&vmid) else {
            return;
        };
        let Some(r) = cluster.ha.resources.get(&Ha::sid(vm)) else {
            return;
        };
        (vm.node.clone(), r.state.clone(), vm.is_running())
    };
    let start = want == "started" && !running;
    let stop = (want == "stopped" || want == "disabled") && running;
    if !start && !stop {
        return;
    }
    let call = crm_call("POST /cluster/ha/resources");
    let task = if start { "qmstart" } else { "qmstop" };
    tasks::spawn(
        inst,
        &call,
        &node,
        task,
        &vmid.to_string(),
        move |ctx| async move {
            let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
            ctx.sleep(if start {
                ctx.inst.durations.start
            } else {
                ctx.inst.durations.stop
            })
            .await;
            ctx.checkpoint()?;
            set_running(&ctx, vmid, start);
            Ok(())
        },
    );
}

fn set_running(ctx: &TaskCtx, vmid: u32, on: bool) {
    let mut cluster = ctx.inst.cluster();
    let Some(vm) = cluster.vms.get_mut(&vmid) else {
        return;
    };
    vm.running = on.then(|| Running {
        pid: 100_000 + vmid % 100_000,
        since: tokio::time::Instant::now(),
        since_epoch: crate::clock::Clock::epoch_secs(),
        agent_ready: ctx.inst.clock.deadline(ctx.inst.durations.guest_boot),
    });
}

/// A migration the CRM (or the load balancer) performs: `qmigrate` as
/// `root@pam` on the source node, online if the guest runs.
pub fn crm_migrate(inst: &Arc<Instance>, source: &str, vmid: u32, target: &str) -> String {
    let target = target.to_owned();
    let call = crm_call("POST /nodes/{node}/qemu/{vmid}/migrate");
    let kind = inst.cluster().vms.get(&vmid).map(|g| g.kind);
    let task = if kind == Some(GuestKind::Lxc) {
        "vzmigrate"
    } else {
        "qmigrate"
    };
    tasks::spawn(
        inst,
        &call,
        source,
        task,
        &vmid.to_string(),
        move |ctx| async move {
            if kind == Some(GuestKind::Lxc) {
                relocate(&ctx, vmid, &target)
            } else {
                let online = ctx
                    .inst
                    .cluster()
                    .vms
                    .get(&vmid)
                    .is_some_and(Vm::is_running);
                crate::api::qemu::migrate::run(&ctx, vmid, &target, online, true).await
            }
        },
    )
}

/// A container moves by restart: stop, move its volumes, start there.
fn relocate(ctx: &TaskCtx, vmid: u32, target: &str) -> Result<(), String> {
    let mut cluster = ctx.inst.cluster();
    let ct = cluster.ct(&ctx.node, vmid)?;
    let volumes = ct.volumes();
    for volid in volumes {
        let (sid, name) = volid.split_once(':').unwrap_or_default();
        let vol = cluster
            .storage_mut(&ctx.node, sid)
            .and_then(|s| s.volumes.remove(name));
        if let (Some(vol), Some(dest)) = (vol, cluster.storage_mut(target, sid)) {
            dest.volumes.insert(name.to_owned(), vol);
        }
    }
    let ct = cluster.ct_mut(&ctx.node, vmid)?;
    ct.node = target.to_owned();
    ctx.log(format!(
        "migration finished successfully to node '{target}'"
    ));
    Ok(())
}

pub async fn status(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    audit(&inst, &call)?;
    let cluster = inst.cluster();
    let master = cluster
        .nodes
        .first()
        .map(|n| n.name.clone())
        .unwrap_or_default();
    let now = crate::clock::Clock::epoch_secs();
    let active = !cluster.ha.resources.is_empty();
    let mode = if active { "active" } else { "idle" };
    let mut out = vec![
        json!({"id": "quorum", "type": "quorum", "node": master, "status": if cluster.quorate() { "OK" } else { "No quorum on node" }, "quorate": u8::from(cluster.quorate())}),
        json!({"id": "master", "type": "master", "node": master, "status": format!("{master} ({mode}, {now})"), "timestamp": now}),
    ];
    for n in &cluster.nodes {
        let state = if n.online {
            mode
        } else {
            "old timestamp - dead?"
        };
        out.push(json!({"id": format!("lrm:{}", n.name), "type": "lrm", "node": n.name, "status": format!("{} ({state}, {now})", n.name), "timestamp": now}));
    }
    for (sid, r) in &cluster.ha.resources {
        let vmid: u32 = sid
            .split(':')
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let Some(vm) = cluster.vms.get(&vmid) else {
            continue;
        };
        let state = cluster.ha.service_state(vm).unwrap_or_default();
        out.push(json!({
            "id": format!("service:{sid}"),
            "type": "service",
            "sid": sid,
            "node": vm.node,
            "state": state,
            "crm_state": state,
            "request_state": r.state,
            "status": format!("{sid} ({}, {state})", vm.node),
            "max_restart": 1,
            "max_relocate": 1,
        }));
    }
    Ok(Reply::data(out))
}

fn section_json(id_key: &str, id: &str, s: &HaSection) -> Value {
    let mut v =
        json!({id_key: id, "type": s.kind, "digest": "0000000000000000000000000000000000000000"});
    for (k, val) in &s.options {
        v[k] = val.parse::<i64>().map_or_else(|_| json!(val), Value::from);
    }
    v
}

pub async fn rules(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    audit(&inst, &call)?;
    let cluster = inst.cluster();
    let items: Vec<Value> = cluster
        .ha
        .rules
        .iter()
        .map(|(id, r)| section_json("rule", id, r))
        .collect();
    Ok(Reply::data(items))
}

pub async fn get_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    audit(&inst, &call)?;
    let id = call.params.get("rule").unwrap_or_default();
    let cluster = inst.cluster();
    let r = cluster
        .ha
        .rules
        .get(id)
        .ok_or_else(|| ApiError::internal(format!("no such ha rule '{id}'")))?;
    Ok(Reply::data(section_json("rule", id, r)))
}

/// The checks of a rule's `resources` and `nodes` (`$assert_valid_*`).
fn check_rule(cluster: &Cluster, p: &crate::http::Params, kind: &str) -> Result<(), ApiError> {
    if let Some(list) = p.get("resources") {
        let resources: Vec<&str> = split_list(list).collect();
        if resources.is_empty() {
            return Err(ApiError::internal("no resources were specified"));
        }
        let unmanaged: Vec<&str> = resources
            .iter()
            .copied()
            .filter(|r| !cluster.ha.resources.contains_key(*r))
            .collect();
        if !unmanaged.is_empty() {
            return Err(ApiError::internal(format!(
                "cannot use unmanaged resource(s) {}.",
                unmanaged.join(", ")
            )));
        }
    }
    if kind == "node-affinity"
        && let Some(list) = p.get("nodes")
    {
        let nodes: Vec<&str> = split_list(list)
            .map(|n| n.split(':').next().unwrap_or_default())
            .collect();
        if nodes.is_empty() {
            return Err(ApiError::internal("no nodes were specified"));
        }
        let unknown: Vec<&str> = nodes.into_iter().filter(|n| !cluster.has_node(n)).collect();
        if !unknown.is_empty() {
            return Err(ApiError::internal(format!(
                "cannot use non-existent node(s) {}.",
                unknown.join(", ")
            )));
        }
    }
    Ok(())
}

pub async fn create_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    let p = &call.params;
    let id = p.get("rule").unwrap_or_default().to_owned();
    let kind = p.get("type").unwrap_or_default().to_owned();
    let mut cluster = inst.cluster();
    if cluster.ha.rules.contains_key(&id) {
        return Err(ApiError::internal(format!(
            "HA rule '{id}' already defined"
        )));
    }
    if !p.has("resources") {
        return Err(ApiError::internal("no resources were specified"));
    }
    if kind == "node-affinity" && !p.has("nodes") {
        return Err(ApiError::internal("no nodes were specified"));
    }
    check_rule(&cluster, p, &kind)?;
    let options = p
        .iter()
        .filter(|(k, _)| *k != "rule" && *k != "type")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    cluster.ha.rules.insert(id, HaSection { kind, options });
    Ok(Reply::null())
}

/// `PUT /cluster/ha/rules/{rule}`: the given options replace the rule's,
/// `delete` removes some.
pub async fn update_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    let p = &call.params;
    let id = p.get("rule").unwrap_or_default().to_owned();
    let mut cluster = inst.cluster();
    let Some(kind) = cluster.ha.rules.get(&id).map(|r| r.kind.clone()) else {
        return Err(ApiError::internal(format!(
            "update HA rules failed: HA rule '{id}' does not exist"
        )));
    };
    check_rule(&cluster, p, &kind)?;
    let rule = cluster
        .ha
        .rules
        .get_mut(&id)
        .ok_or_else(|| ApiError::internal(format!("HA rule '{id}' does not exist")))?;
    for (k, v) in p.iter() {
        if !["rule", "type", "delete", "digest"].contains(&k.as_str()) {
            rule.options.insert(k.clone(), v.clone());
        }
    }
    for key in split_list(p.get("delete").unwrap_or_default()) {
        rule.options.remove(key);
    }
    Ok(Reply::null())
}

/// Deleting a rule that does not exist is no error (PVE just writes the
/// rules without it).
pub async fn delete_rule(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    let id = call.params.get("rule").unwrap_or_default();
    inst.cluster().ha.rules.remove(id);
    Ok(Reply::null())
}

/// PVE 9 has migrated groups to rules; PVE 8 serves them.
fn groups_migrated(inst: &Instance, what: &str) -> Result<(), ApiError> {
    if inst.pve_version >= 9 {
        return Err(ApiError::internal(format!(
            "cannot {what}: ha groups have been migrated to rules"
        )));
    }
    Ok(())
}

pub async fn groups(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    audit(&inst, &call)?;
    groups_migrated(&inst, "index groups")?;
    let cluster = inst.cluster();
    let items: Vec<Value> = cluster
        .ha
        .groups
        .iter()
        .map(|(id, g)| section_json("group", id, g))
        .collect();
    Ok(Reply::data(items))
}

pub async fn get_group(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    audit(&inst, &call)?;
    groups_migrated(&inst, "read group")?;
    let id = call.params.get("group").unwrap_or_default();
    let cluster = inst.cluster();
    let g = cluster
        .ha
        .groups
        .get(id)
        .ok_or_else(|| ApiError::internal(format!("no such ha group '{id}'")))?;
    Ok(Reply::data(section_json("group", id, g)))
}

pub async fn create_group(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    groups_migrated(&inst, "create group")?;
    let id = call.params.get("group").unwrap_or_default().to_owned();
    let mut cluster = inst.cluster();
    if cluster.ha.groups.contains_key(&id) {
        return Err(ApiError::internal(format!(
            "create ha group failed: ha group ID '{id}' already defined"
        )));
    }
    let options = call
        .params
        .iter()
        .filter(|(k, _)| *k != "group" && *k != "type")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    cluster.ha.groups.insert(
        id,
        HaSection {
            kind: "group".into(),
            options,
        },
    );
    Ok(Reply::null())
}

pub async fn update_group(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    groups_migrated(&inst, "update group")?;
    let id = call.params.get("group").unwrap_or_default().to_owned();
    let mut cluster = inst.cluster();
    let group = cluster.ha.groups.get_mut(&id).ok_or_else(|| {
        ApiError::internal(format!("update ha group failed: no such ha group '{id}'"))
    })?;
    for (k, v) in call.params.iter() {
        if !["group", "type", "delete", "digest"].contains(&k.as_str()) {
            group.options.insert(k.clone(), v.clone());
        }
    }
    for key in split_list(call.params.get("delete").unwrap_or_default()) {
        if key == "nodes" {
            return Err(ApiError::internal(
                "update ha group failed: unable to delete required option 'nodes'",
            ));
        }
        group.options.remove(key);
    }
    Ok(Reply::null())
}

pub async fn delete_group(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    console(&inst, &call)?;
    groups_migrated(&inst, "delete group")?;
    let id = call.params.get("group").unwrap_or_default();
    let mut cluster = inst.cluster();
    if let Some((sid, _)) = cluster
        .ha
        .resources
        .iter()
        .find(|(_, r)| r.options.get("group").map(String::as_str) == Some(id))
    {
        return Err(ApiError::internal(format!(
            "delete ha group failed: ha group is used by service '{sid}'"
        )));
    }
    if cluster.ha.groups.remove(id).is_none() {
        return Err(ApiError::internal(format!("no such ha group '{id}'")));
    }
    Ok(Reply::null())
}
