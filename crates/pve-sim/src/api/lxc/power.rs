//! Container power: `vzstart`, `vzstop`, `vzshutdown`, `vzreboot`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::api::qemu::spawn_locked;
use crate::clock::Clock;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::state::Running;
use crate::tasks::{self, TaskCtx};

pub const START: &[Param] = &[
    Param::boolean("skiplock").opt(),
    Param::boolean("debug").opt(),
];
pub const STOP: &[Param] = &[
    Param::boolean("skiplock").opt(),
    Param::boolean("overrule-shutdown").opt(),
];
pub const SHUTDOWN: &[Param] = &[
    Param::integer("timeout").min(0).opt(),
    Param::boolean("forceStop").opt(),
];
pub const REBOOT: &[Param] = &[Param::integer("timeout").min(0).opt()];

fn check(inst: &Instance, call: &Call) -> Result<u32, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.PowerMgmt"])?;
    crate::api::qemu::check_root_only(call, &["skiplock"])?;
    inst.cluster().ct(call.params.node(), vmid)?;
    Ok(vmid)
}

/// Starts a `vzstart` task (also create's `start=1`).
pub fn start_task(inst: &Arc<Instance>, call: &Call, node: &str, vmid: u32) -> String {
    tasks::spawn(
        inst,
        call,
        node,
        "vzstart",
        &vmid.to_string(),
        move |ctx| async move {
            let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
            start_locked(&ctx, vmid).await
        },
    )
}

/// Starts the container inside a task that already holds its lock (a
/// rollback with `start`).
pub async fn start_unlocked(ctx: &TaskCtx, vmid: u32) -> Result<(), String> {
    start_locked(ctx, vmid).await
}

async fn start_locked(ctx: &TaskCtx, vmid: u32) -> Result<(), String> {
    {
        let cluster = ctx.inst.cluster();
        let ct = cluster.ct(&ctx.node, vmid)?;
        ct.check_lock()?;
        if ct.is_template() {
            return Err("cannot start template".into());
        }
        if ct.is_running() {
            return Err(format!("CT {vmid} already running"));
        }
    }
    ctx.sleep(ctx.inst.durations.start).await;
    ctx.checkpoint()?;
    let mut cluster = ctx.inst.cluster();
    let ct = cluster.ct_mut(&ctx.node, vmid)?;
    ct.running = Some(Running {
        pid: 200_000 + vmid % 100_000,
        since: Instant::now(),
        since_epoch: Clock::epoch_secs(),
        agent_ready: Instant::now(),
    });
    Ok(())
}

pub async fn start(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = check(&inst, &call)?;
    let node = call.params.node().to_owned();
    Ok(Reply::data(start_task(&inst, &call, &node, vmid)))
}

fn set_stopped(ctx: &TaskCtx, vmid: u32) {
    if let Ok(ct) = ctx.inst.cluster().ct_mut(&ctx.node, vmid) {
        ct.running = None;
    }
}

fn is_running(ctx: &TaskCtx, vmid: u32) -> Result<bool, String> {
    Ok(ctx.inst.cluster().ct(&ctx.node, vmid)?.is_running())
}

pub async fn stop(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = check(&inst, &call)?;
    Ok(spawn_locked(
        &inst,
        &call,
        "vzstop",
        vmid,
        move |ctx| async move {
            if !is_running(&ctx, vmid)? {
                return Err(format!("CT {vmid} not running"));
            }
            ctx.sleep(ctx.inst.durations.stop).await;
            ctx.checkpoint()?;
            set_stopped(&ctx, vmid);
            Ok(())
        },
    ))
}

pub async fn shutdown(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = check(&inst, &call)?;
    let timeout = call
        .params
        .int("timeout")
        .map_or(inst.durations.shutdown_timeout, |t| {
            Duration::from_secs(t.max(0) as u64)
        });
    let force = call.params.flag("forceStop") == Some(true);
    Ok(spawn_locked(
        &inst,
        &call,
        "vzshutdown",
        vmid,
        move |ctx| async move {
            if !is_running(&ctx, vmid)? {
                return Err(format!("CT {vmid} not running"));
            }
            let needed = ctx.inst.durations.shutdown;
            ctx.sleep(needed.min(timeout)).await;
            if needed > timeout && !force {
                return Err("container did not stop".into());
            }
            ctx.checkpoint()?;
            set_stopped(&ctx, vmid);
            Ok(())
        },
    ))
}

pub async fn reboot(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = check(&inst, &call)?;
    if !inst.cluster().ct(call.params.node(), vmid)?.is_running() {
        return Err(ApiError::internal(format!("CT {vmid} not running")));
    }
    Ok(spawn_locked(
        &inst,
        &call,
        "vzreboot",
        vmid,
        move |ctx| async move {
            ctx.sleep(ctx.inst.durations.shutdown + ctx.inst.durations.start)
                .await;
            ctx.checkpoint()
        },
    ))
}
