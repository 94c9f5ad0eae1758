//! Two ways the provider can misreport what happened, judged from the
//! outside: adopting a task another resource dispatched (the TaskAdopted
//! event names the UPID; the simulator's request log names who dispatched
//! it, by the owner marker in the create's `description`), and telling a
//! resource its provider config is unusable although the config is fine
//! (both configs of a run stay valid throughout; a transient Proxmox error
//! is not the config's fault).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::observer::Seen;
use super::state::{CreateTask, marker};
use super::traffic;
use super::verdict::{Kind, Violation};

/// The parts of a UPID (`UPID:node:pid:pstart:starttime:type:id:user:`).
struct Upid<'a> {
    node: &'a str,
    starttime: f64,
    kind: &'a str,
    id: &'a str,
}

fn parse_upid(text: &str) -> Option<Upid<'_>> {
    let fields: Vec<&str> = text.split(':').collect();
    if fields.len() < 8 || fields[0] != "UPID" {
        return None;
    }
    Some(Upid {
        node: fields[1],
        starttime: i64::from_str_radix(fields[4], 16).ok()? as f64,
        kind: fields[5],
        id: fields[6],
    })
}

/// The UPID an event message names.
fn upid_in(message: &str) -> Option<&str> {
    let start = message.find("UPID:")?;
    message[start..].split_whitespace().next()
}

/// Who dispatched the create or clone that started `upid`: the request
/// (on the same node, for the same VMID, within 2 s of the task's start)
/// and the uid of its owner marker. `None` unless exactly one matches.
fn dispatcher<'a>(
    upid: &str,
    log: &'a [Value],
    tasks: &[CreateTask],
) -> Option<(&'a Value, String)> {
    let parsed = parse_upid(upid)?;
    let vmid: u32 = match parsed.kind {
        "qmcreate" => parsed.id.parse().ok()?,
        "qmclone" => tasks.iter().find(|t| t.upid == upid)?.vmid?,
        _ => return None,
    };
    let prefix = format!("/nodes/{}/", parsed.node);
    let candidates: Vec<(&Value, String)> = log
        .iter()
        .filter(|e| traffic::create_dispatch(e) == Some(vmid))
        .filter(|e| e["path"].as_str().is_some_and(|p| p.starts_with(&prefix)))
        .filter(|e| {
            e["time"]
                .as_f64()
                .is_some_and(|t| (t - parsed.starttime).abs() <= 2.0)
        })
        .filter_map(|e| {
            let (_, uid) = marker(e["params"]["description"].as_str()?)?;
            Some((e, uid))
        })
        .collect();
    let uids: BTreeSet<&str> = candidates.iter().map(|(_, uid)| uid.as_str()).collect();
    match (candidates.first(), uids.len()) {
        (Some(first), 1) => Some(first.clone()),
        _ => None,
    }
}

/// Every TaskAdopted event whose create or clone another resource
/// dispatched. Also returns how many adoptions of creates and clones
/// could be traced to their dispatcher at all.
pub fn foreign_adoptions(
    events: &[Value],
    log: &[Value],
    tasks: &[CreateTask],
) -> (Vec<Violation>, usize) {
    let mut found = Vec::new();
    let mut traced = 0;
    for event in events.iter().filter(|e| e["reason"] == "TaskAdopted") {
        let message = event["message"].as_str().unwrap_or_default();
        let Some(upid) = upid_in(message) else {
            continue;
        };
        let Some((entry, dispatched_by)) = dispatcher(upid, log, tasks) else {
            continue;
        };
        traced += 1;
        let adopter = event["involvedObject"]["uid"].as_str().unwrap_or_default();
        if adopter != dispatched_by {
            let owner = marker(entry["params"]["description"].as_str().unwrap_or_default())
                .map(|(resource, _)| resource)
                .unwrap_or_default();
            found.push(Violation::new(
                Kind::ForeignTaskAdopted,
                format!(
                    "{} adopted {upid}, which {owner} dispatched (event: {message:?}, count {})\n      sim log {}",
                    event["involvedObject"]["name"].as_str().unwrap_or_default(),
                    event["count"],
                    traffic::describe(entry)
                ),
            ));
        }
    }
    (found, traced)
}

/// Every resource that was told its (valid) provider config is unusable:
/// one violation per resource, with how often and the first message.
pub fn blamed_configs(seen: &[Seen]) -> Vec<Violation> {
    let mut by_resource: BTreeMap<&str, Vec<&Seen>> = BTreeMap::new();
    for s in seen
        .iter()
        .filter(|s| s.message.contains("cannot use the provider config"))
    {
        by_resource.entry(&s.resource).or_default().push(s);
    }
    by_resource
        .into_iter()
        .map(|(resource, times)| {
            Violation::new(
                Kind::ConfigBlamed,
                format!(
                    "{resource}: {} times, first at {:.1}s: Synced={} {:?}",
                    times.len(),
                    times[0].at.as_secs_f64(),
                    times[0].reason,
                    times[0].message
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    const UPID: &str = "UPID:pve2:00090010:0D0155E3:6B0D3C5B:qmcreate:104:root@pam!chaos:";

    fn create(uid: &str, time: f64) -> Value {
        json!({"seq": 5, "time": time, "method": "POST", "path": "/nodes/pve2/qemu",
               "route": "/nodes/{node}/qemu", "status": 200,
               "params": {"vmid": "104", "node": "pve2",
                          "description": format!("Managed by crossplane-provider-proxmox: ProxmoxVM ns/a uid={uid}")}})
    }

    fn adopted(uid: &str) -> Value {
        json!({"reason": "TaskAdopted", "count": 1,
               "involvedObject": {"name": "b", "uid": uid},
               "message": format!("found qmcreate {UPID} already running; observing it instead of starting another")})
    }

    #[test]
    fn adopting_a_task_another_resource_dispatched_is_found() {
        let start = f64::from(0x6B0D3C5B_u32);
        let log = [create("uid-a", start + 0.3)];
        let (found, traced) = foreign_adoptions(&[adopted("uid-b")], &log, &[]);
        assert_eq!(traced, 1);
        assert_eq!(found.len(), 1);
        assert!(found[0].account.contains("ns/a dispatched"), "{}", found[0]);
        let (found, _) = foreign_adoptions(&[adopted("uid-a")], &log, &[]);
        assert!(found.is_empty(), "adopting its own task is right");
    }

    #[test]
    fn an_adoption_that_cannot_be_traced_is_not_blamed_on_anyone() {
        let far = f64::from(0x6B0D3C5B_u32) + 60.0;
        let (found, traced) = foreign_adoptions(&[adopted("uid-b")], &[create("uid-a", far)], &[]);
        assert_eq!((found.len(), traced), (0, 0));
    }

    #[test]
    fn each_resource_told_its_config_is_unusable_is_reported_once() {
        let seen = |at, resource: &str, message: &str| Seen {
            at: Duration::from_secs(at),
            resource: resource.into(),
            reason: "ReconcileError".into(),
            message: message.into(),
        };
        let blamed =
            "cannot use the provider config: ProviderConfig ns/token: proxmox error (HTTP 500)";
        let log = [
            seen(1, "a", blamed),
            seen(2, "a", "VM 100 is locked"),
            seen(40, "a", blamed),
            seen(3, "b", "the step failed"),
        ];
        let found = blamed_configs(&log);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].account.starts_with("a: 2 times, first at 1.0s"),
            "{}",
            found[0]
        );
    }
}
