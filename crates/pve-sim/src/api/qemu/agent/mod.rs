//! `.../qemu/{vmid}/agent/*` (qemu-server `PVE::API2::Qemu::Agent`): every
//! command fails with PVE's 500s until the guest has booted (`No QEMU guest
//! agent configured`, `VM N is not running`, `QEMU guest agent is not
//! running`), then answers from the simulated guest.

mod exec;
mod interfaces;

use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::NODE_VMID;
use crate::api::route;
use crate::clock::Clock;
use crate::http::router::Route;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::sim_handler;
use crate::state::Vm;
use crate::state::guest::ExecResult;

const AUDIT: &str = "VM.GuestAgent.Audit";
const FS_MGMT: &str = "VM.GuestAgent.FileSystemMgmt";
const POWER: &str = "VM.PowerMgmt";

/// The commands without parameters: method, name, privilege (besides
/// `VM.GuestAgent.Unrestricted`, which allows all of them).
const SIMPLE: &[(&str, &str, &str)] = &[
    ("POST", "ping", AUDIT),
    ("GET", "get-time", AUDIT),
    ("GET", "info", AUDIT),
    ("POST", "fsfreeze-status", AUDIT),
    ("POST", "fsfreeze-freeze", FS_MGMT),
    ("POST", "fsfreeze-thaw", FS_MGMT),
    ("POST", "fstrim", FS_MGMT),
    ("GET", "network-get-interfaces", AUDIT),
    ("GET", "get-vcpus", AUDIT),
    ("GET", "get-fsinfo", AUDIT),
    ("GET", "get-memory-blocks", AUDIT),
    ("GET", "get-memory-block-info", AUDIT),
    ("POST", "shutdown", POWER),
    ("GET", "get-host-name", AUDIT),
    ("GET", "get-osinfo", AUDIT),
    ("GET", "get-users", AUDIT),
    ("GET", "get-timezone", AUDIT),
];

const UNRESTRICTED: &str = "VM.GuestAgent.Unrestricted";

pub const PARAMS: &[&[Param]] = &[NODE_VMID];
const COMMAND: &[Param] = &[Param::string("command").enums(&[
    "fsfreeze-freeze",
    "fsfreeze-status",
    "fsfreeze-thaw",
    "fstrim",
    "get-fsinfo",
    "get-host-name",
    "get-memory-block-info",
    "get-memory-blocks",
    "get-osinfo",
    "get-time",
    "get-timezone",
    "get-users",
    "get-vcpus",
    "info",
    "network-get-interfaces",
    "ping",
    "shutdown",
    "suspend-disk",
    "suspend-hybrid",
    "suspend-ram",
])];
const EXEC: &[Param] = &[
    Param::array("command"),
    Param::string("input-data").max_len(64 * 1024).opt(),
];
const EXEC_STATUS: &[Param] = &[Param::integer("pid")];
const FILE_READ: &[Param] = &[
    Param::integer("count").min(1).max(16 * 1024 * 1024).opt(),
    Param::boolean("decode").opt(),
    Param::string("file"),
    Param::integer("offset").min(0).opt(),
];
const FILE_WRITE: &[Param] = &[
    Param::string("file"),
    Param::string("content").max_len(60 * 1024),
    Param::boolean("encode").opt(),
];
const SET_PASSWORD: &[Param] = &[
    Param::string("username"),
    Param::string("password").max_len(1024),
    Param::boolean("crypted").opt(),
];

/// The agent's routes.
pub fn routes() -> Vec<Route> {
    let mut out = vec![
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/agent",
            PARAMS,
            sim_handler!(index),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/agent",
            &[NODE_VMID, COMMAND],
            sim_handler!(simple),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/agent/exec",
            &[NODE_VMID, EXEC],
            sim_handler!(exec),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/agent/exec-status",
            &[NODE_VMID, EXEC_STATUS],
            sim_handler!(exec_status),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/agent/file-read",
            &[NODE_VMID, FILE_READ],
            sim_handler!(file_read),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/agent/file-write",
            &[NODE_VMID, FILE_WRITE],
            sim_handler!(file_write),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/agent/set-user-password",
            &[NODE_VMID, SET_PASSWORD],
            sim_handler!(set_user_password),
        ),
    ];
    for (method, name, _) in SIMPLE {
        out.push(route(
            method,
            simple_path(name),
            PARAMS,
            sim_handler!(simple),
        ));
    }
    out
}

/// The static path of a simple command (routes need `'static` paths).
fn simple_path(name: &str) -> &'static str {
    const PATHS: &[&str] = &[
        "/nodes/{node}/qemu/{vmid}/agent/ping",
        "/nodes/{node}/qemu/{vmid}/agent/get-time",
        "/nodes/{node}/qemu/{vmid}/agent/info",
        "/nodes/{node}/qemu/{vmid}/agent/fsfreeze-status",
        "/nodes/{node}/qemu/{vmid}/agent/fsfreeze-freeze",
        "/nodes/{node}/qemu/{vmid}/agent/fsfreeze-thaw",
        "/nodes/{node}/qemu/{vmid}/agent/fstrim",
        "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
        "/nodes/{node}/qemu/{vmid}/agent/get-vcpus",
        "/nodes/{node}/qemu/{vmid}/agent/get-fsinfo",
        "/nodes/{node}/qemu/{vmid}/agent/get-memory-blocks",
        "/nodes/{node}/qemu/{vmid}/agent/get-memory-block-info",
        "/nodes/{node}/qemu/{vmid}/agent/shutdown",
        "/nodes/{node}/qemu/{vmid}/agent/get-host-name",
        "/nodes/{node}/qemu/{vmid}/agent/get-osinfo",
        "/nodes/{node}/qemu/{vmid}/agent/get-users",
        "/nodes/{node}/qemu/{vmid}/agent/get-timezone",
    ];
    PATHS
        .iter()
        .find(|p| p.rsplit('/').next() == Some(name))
        .copied()
        .unwrap_or("/nodes/{node}/qemu/{vmid}/agent")
}

pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Audit"])?;
    let mut names: Vec<&str> = SIMPLE.iter().map(|(_, n, _)| *n).collect();
    names.sort_unstable();
    Ok(Reply::data(
        names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
    ))
}

/// `assert_agent_available`, then `f` on the guest.
fn with_agent<R>(
    inst: &Instance,
    call: &Call,
    privs: &[&str],
    f: impl FnOnce(&mut Vm) -> Result<R, ApiError>,
) -> Result<R, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), privs)?;
    let mut cluster = inst.cluster();
    let vm = cluster.vm_mut(call.params.node(), vmid)?;
    if !vm.agent_enabled() {
        return Err(ApiError::internal("No QEMU guest agent configured"));
    }
    let Some(run) = &vm.running else {
        return Err(ApiError::internal(format!("VM {vmid} is not running")));
    };
    if Instant::now() < run.agent_ready {
        return Err(ApiError::internal("QEMU guest agent is not running"));
    }
    f(vm)
}

/// A command of the table, by its path or the `command` parameter.
pub async fn simple(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let name = match call.params.get("command") {
        Some(c) => c.to_owned(),
        None => call
            .route_key
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    let privs: Vec<&str> = match SIMPLE.iter().find(|(_, n, _)| *n == name) {
        Some((_, _, p)) if call.params.get("command").is_none() => vec![p, UNRESTRICTED],
        _ => vec![UNRESTRICTED],
    };
    let vcpus_of = |vm: &Vm| vm.cpus();
    let result = with_agent(&inst, &call, &privs, |vm| {
        Ok(match name.as_str() {
            "ping" | "set-user-password" => json!({}),
            "get-time" => json!(Clock::epoch_f64() as u64 * 1_000_000_000),
            "info" => info(),
            "fsfreeze-status" => json!("thawed"),
            "fsfreeze-freeze" | "fsfreeze-thaw" => json!(1),
            "fstrim" => json!({"paths": [{"path": "/", "trimmed": 0, "minimum": 0}]}),
            "network-get-interfaces" => json!(interfaces::interfaces(vm)),
            "get-vcpus" => json!(
                (0..vcpus_of(vm))
                    .map(|i| json!({"logical-id": i, "online": true, "can-offline": i > 0}))
                    .collect::<Vec<_>>()
            ),
            "get-fsinfo" => fsinfo(vm),
            "get-memory-blocks" => json!([]),
            "get-memory-block-info" => json!({"size": 134_217_728}),
            "get-host-name" => json!({"host-name": vm.name()}),
            "get-osinfo" => osinfo(vm),
            "get-users" => json!([]),
            "get-timezone" => json!({"zone": "UTC", "offset": 0}),
            "shutdown" => {
                // The guest powers itself off a moment later.
                vm.running = None;
                json!({})
            }
            other => {
                return Err(ApiError::NotImplemented(format!(
                    "{}: guest-{other}",
                    crate::api::generic::NOT_SIMULATED
                )));
            }
        })
    })?;
    Ok(Reply::data(json!({"result": result})))
}

fn info() -> Value {
    let commands: Vec<Value> = SIMPLE
        .iter()
        .map(|(_, n, _)| format!("guest-{n}"))
        .chain(
            [
                "guest-exec",
                "guest-exec-status",
                "guest-file-open",
                "guest-file-read",
                "guest-file-write",
                "guest-file-close",
                "guest-set-user-password",
            ]
            .map(str::to_owned),
        )
        .map(|n| json!({"name": n, "enabled": true, "success-response": n != "guest-shutdown"}))
        .collect();
    json!({"version": "8.2.2", "supported_commands": commands})
}

fn osinfo(vm: &Vm) -> Value {
    let windows = vm.config.get("ostype").is_some_and(|o| o.starts_with('w'));
    if windows {
        return json!({
            "id": "mswindows", "name": "Microsoft Windows", "pretty-name": "Windows Server 2022 Standard",
            "version": "Microsoft Windows Server 2022", "version-id": "2022",
            "kernel-release": "20348", "kernel-version": "10.0", "machine": "x86_64",
            "variant": "server", "variant-id": "server",
        });
    }
    json!({
        "id": "ubuntu", "name": "Ubuntu", "pretty-name": "Ubuntu 24.04.1 LTS",
        "version": "24.04.1 LTS (Noble Numbat)", "version-id": "24.04",
        "kernel-release": "6.8.0-45-generic",
        "kernel-version": "#45-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024",
        "machine": "x86_64",
    })
}

fn fsinfo(vm: &Vm) -> Value {
    let total = vm.maxdisk();
    json!([{
        "name": "sda1", "mountpoint": "/", "type": "ext4",
        "total-bytes": total, "used-bytes": total / 5,
        "disk": [{"bus-type": "scsi", "bus": 0, "target": 0, "unit": 0, "dev": "/dev/sda1",
                  "pci-controller": {"domain": 0, "bus": 9, "slot": 1, "function": 0}}],
    }])
}

/// `exec`: runs the command at once in the simulated guest; its result
/// waits for `exec-status`.
pub async fn exec(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let argv = call.params.list("command");
    let input = call.params.get("input-data").map(str::to_owned);
    let pid = with_agent(&inst, &call, &[UNRESTRICTED], |vm| {
        if argv.iter().all(String::is_empty) && input.is_none() {
            return Err(ApiError::internal(
                "command or input-data (or both) required",
            ));
        }
        let result = exec::run(vm, &argv, input.as_deref());
        let g = &mut vm.guest;
        g.next_pid = g.next_pid.max(1000) + 1;
        g.execs.insert(g.next_pid, result);
        Ok(g.next_pid)
    })?;
    Ok(Reply::data(json!({"pid": pid})))
}

pub async fn exec_status(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    let pid = call.params.int("pid").unwrap_or_default();
    let res: ExecResult = with_agent(&inst, &call, &[UNRESTRICTED], |vm| {
        u32::try_from(pid)
            .ok()
            .and_then(|p| vm.guest.execs.get(&p).cloned())
            .ok_or_else(|| {
                ApiError::internal(format!(
                    "VM {vmid} qmp command 'guest-exec-status' failed - Invalid parameter 'pid'"
                ))
            })
    })?;
    let mut v = json!({"exited": 1, "exitcode": res.exitcode});
    if !res.out.is_empty() {
        v["out-data"] = json!(res.out);
    }
    if !res.err.is_empty() {
        v["err-data"] = json!(res.err);
    }
    Ok(Reply::data(v))
}

pub async fn file_read(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    let file = call.params.get("file").unwrap_or_default().to_owned();
    let offset = call.params.int("offset").unwrap_or(0).max(0) as usize;
    let count = call.params.int("count").map(|c| c.max(0) as usize);
    let decode = call.params.flag("decode").unwrap_or(true);
    let privs = ["VM.GuestAgent.FileRead", UNRESTRICTED];
    let data = with_agent(&inst, &call, &privs, |vm| {
        vm.guest.files.get(&file).cloned().ok_or_else(|| {
            ApiError::internal(format!(
                "VM {vmid} qmp command 'guest-file-open' failed - Failed to open file '{file}' (mode: 'r'): No such file or directory"
            ))
        })
    })?;
    let rest = data.get(offset..).unwrap_or_default();
    let max = count.unwrap_or(16 * 1024 * 1024);
    let chunk = &rest[..rest.len().min(max)];
    let content = if decode {
        String::from_utf8_lossy(chunk).into_owned()
    } else {
        base64::engine::general_purpose::STANDARD.encode(chunk)
    };
    let mut v = json!({"content": content, "bytes-read": chunk.len()});
    if rest.len() > max {
        v["truncated"] = json!(1);
    }
    Ok(Reply::data(v))
}

pub async fn file_write(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let file = call.params.get("file").unwrap_or_default().to_owned();
    let content = call.params.get("content").unwrap_or_default();
    let data = if call.params.flag("encode").unwrap_or(true) {
        content.as_bytes().to_vec()
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(content)
            .map_err(|e| ApiError::internal(format!("Agent error: can't write to file: {e}")))?
    };
    let privs = ["VM.GuestAgent.FileWrite", UNRESTRICTED];
    with_agent(&inst, &call, &privs, |vm| {
        vm.guest.files.insert(file, data);
        Ok(())
    })?;
    Ok(Reply::null())
}

pub async fn set_user_password(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    with_agent(&inst, &call, &[UNRESTRICTED], |_| Ok(()))?;
    Ok(Reply::data(json!({"result": {}})))
}
