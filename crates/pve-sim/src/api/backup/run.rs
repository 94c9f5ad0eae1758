//! A backup job run now, as the scheduler runs it (`POST
//! /_sim/backup-jobs/{id}/run`; the simulator keeps no schedule): on each
//! node, `pvescheduler` runs `PVE::Jobs::VZDump::run`, which calls
//! `PVE::API2::VZDump::vzdump` with the job's options and `job-id` as
//! `root@pam`: one `vzdump` task per node with guests of the job (its ID
//! the VMID when the node has one, else empty), whose log starts with the
//! command line naming the job (`INFO: starting new backup job: vzdump
//! 100 101 --job-id ID --storage local ...`), backs up each guest in turn
//! and ends `job errors` when one failed. A job that is disabled runs too
//! (this is a person's "run now", not the timer).

use std::sync::Arc;

use crate::api::vzdump;
use crate::auth::Identity;
use crate::http::Call;
use crate::instance::Instance;
use crate::state::GuestKind;
use crate::tasks;

/// Starts the job's `vzdump` tasks; their UPIDs, by node.
pub fn run(inst: &Arc<Instance>, id: &str) -> Result<Vec<String>, String> {
    let (job, by_node) = {
        let cluster = inst.cluster();
        let job = cluster
            .backup_jobs
            .get(id)
            .cloned()
            .ok_or_else(|| format!("no backup job '{id}'"))?;
        let listed: Vec<u32> = crate::schema::format::split_list(
            job.get("vmid").map(String::as_str).unwrap_or_default(),
        )
        .filter_map(|v| v.trim().parse().ok())
        .collect();
        let excluded: Vec<u32> = crate::schema::format::split_list(
            job.get("exclude").map(String::as_str).unwrap_or_default(),
        )
        .filter_map(|v| v.trim().parse().ok())
        .collect();
        let all = job.get("all").is_some_and(|v| v == "1");
        let pool = job.get("pool");
        let node = job.get("node");
        let mut by_node: std::collections::BTreeMap<String, Vec<(u32, GuestKind)>> =
            Default::default();
        for g in cluster.vms.values() {
            let chosen = listed.contains(&g.vmid)
                || pool.is_some_and(|p| g.pool.as_ref() == Some(p))
                || (all && !excluded.contains(&g.vmid));
            if chosen && node.is_none_or(|n| *n == g.node) {
                by_node
                    .entry(g.node.clone())
                    .or_default()
                    .push((g.vmid, g.kind));
            }
        }
        (job, by_node)
    };
    let opt = |k: &str, default: &str| job.get(k).cloned().unwrap_or_else(|| default.into());
    let (storage, mode, compress) = (
        opt("storage", "local"),
        opt("mode", "snapshot"),
        opt("compress", "0"),
    );
    let notes = job.get("notes-template").cloned();
    let protected = job.get("protected").is_some_and(|v| v == "1");
    let call = Call {
        params: Default::default(),
        identity: Identity {
            user: "root@pam".into(),
            token: None,
        },
        lock_timeout: false,
        route_key: "POST /nodes/{node}/vzdump".into(),
        upload: None,
    };
    let mut upids = Vec::new();
    for (node, guests) in by_node {
        let task_id = match guests.as_slice() {
            [(vmid, _)] => vmid.to_string(),
            _ => String::new(),
        };
        let vmids: Vec<String> = guests.iter().map(|(v, _)| v.to_string()).collect();
        let cmdline = format!(
            "vzdump {} --job-id {id} --storage {storage} --mode {mode} --compress {compress}",
            vmids.join(" ")
        );
        let (storage, mode, compress, notes) = (
            storage.clone(),
            mode.clone(),
            compress.clone(),
            notes.clone(),
        );
        let upid = tasks::spawn(
            inst,
            &call,
            &node,
            "vzdump",
            &task_id,
            move |ctx| async move {
                ctx.log(format!("INFO: starting new backup job: {cmdline}"));
                let mut failed = false;
                for (vmid, kind) in guests {
                    let job = vzdump::Job {
                        vmid,
                        kind,
                        storage: storage.clone(),
                        mode: mode.clone(),
                        compress: compress.clone(),
                        notes_template: notes.clone(),
                        protected,
                    };
                    if let Err(e) = vzdump::backup(&ctx, job).await {
                        ctx.log(format!("ERROR: Backup of VM {vmid} failed - {e}"));
                        failed = true;
                    }
                }
                if failed {
                    return Err("job errors".into());
                }
                ctx.log("INFO: Backup job finished successfully");
                Ok(())
            },
        );
        upids.push(upid);
    }
    Ok(upids)
}
