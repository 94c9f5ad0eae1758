//! How long resources waited for an import or clone slot while pve-sim ran
//! fewer imports or clones on that node than the limit: a figure, not a
//! verdict (how long is too long depends on polling and backoff), but the
//! one that shows slots held by work no longer in flight.

use std::time::Duration;

use super::observer::Seen;
use super::state::CreateTask;

/// A stretch of `WaitingForCapacity` as seen on a resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Wait {
    pub resource: String,
    /// `import` or `clone`.
    pub kind: String,
    pub node: String,
    pub limit: usize,
    /// Seconds since the epoch.
    pub from: f64,
    pub to: f64,
}

/// `waiting for a free clone slot on node pve (2 of 2 in use)`.
fn parse(message: &str) -> Option<(String, String, usize)> {
    let rest = message.split_once("waiting for a free ")?.1;
    let (kind, rest) = rest.split_once(" slot on node ")?;
    let (node, rest) = rest.split_once(" (")?;
    let limit = rest.split_once(" of ")?.1.split_once(' ')?.0.parse().ok()?;
    Some((kind.to_owned(), node.to_owned(), limit))
}

/// The waits in what was seen; `started` is the run's start (epoch
/// seconds), `end` how long it ran.
pub fn waits(seen: &[Seen], started: f64, end: Duration) -> Vec<Wait> {
    seen.iter()
        .enumerate()
        .filter(|(_, s)| s.reason == "WaitingForCapacity")
        .filter_map(|(i, s)| {
            let (kind, node, limit) = parse(&s.message)?;
            let to = seen[i + 1..]
                .iter()
                .find(|n| n.resource == s.resource)
                .map_or(end, |n| n.at);
            Some(Wait {
                resource: s.resource.clone(),
                kind,
                node,
                limit,
                from: started + s.at.as_secs_f64(),
                to: started + to.as_secs_f64(),
            })
        })
        .collect()
}

/// Imports (creates: every create of the fleet imports a disk) or clones
/// running on `node` at `t`.
fn in_flight(tasks: &[CreateTask], kind: &str, node: &str, t: f64) -> usize {
    let task_type = if kind == "clone" {
        "qmclone"
    } else {
        "qmcreate"
    };
    tasks
        .iter()
        .filter(|task| task.kind == task_type && task.node == node)
        .filter(|task| task.start <= t && task.end.is_none_or(|end| t < end))
        .count()
}

/// The longest stretch any wait spent with a slot free on pve-sim, and
/// that wait.
pub fn longest_with_a_free_slot(waits: &[Wait], tasks: &[CreateTask]) -> Option<(Wait, Duration)> {
    const STEP: f64 = 0.25;
    let mut best: Option<(Wait, f64)> = None;
    for wait in waits {
        let (mut run, mut longest) = (0.0_f64, 0.0_f64);
        let mut t = wait.from;
        while t < wait.to {
            if in_flight(tasks, &wait.kind, &wait.node, t) < wait.limit {
                run += STEP;
                longest = longest.max(run);
            } else {
                run = 0.0;
            }
            t += STEP;
        }
        if best.as_ref().is_none_or(|(_, b)| longest > *b) {
            best = Some((wait.clone(), longest));
        }
    }
    best.map(|(w, secs)| (w, Duration::from_secs_f64(secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clone_task(start: f64, end: f64) -> CreateTask {
        CreateTask {
            upid: String::new(),
            node: "pve".into(),
            kind: "qmclone".into(),
            vmid: Some(100),
            exit: Some("OK".into()),
            start,
            end: Some(end),
        }
    }

    #[test]
    fn reads_the_slot_kind_node_and_limit() {
        assert_eq!(
            parse("waiting for a free clone slot on node pve (2 of 2 in use)"),
            Some(("clone".into(), "pve".into(), 2))
        );
        assert_eq!(parse("cloning template 9000"), None);
    }

    #[test]
    fn a_wait_counts_only_while_fewer_tasks_ran_than_the_limit() {
        let seen = |at: u64, reason: &str| Seen {
            at: Duration::from_secs(at),
            resource: "a".into(),
            reason: reason.into(),
            message: "waiting for a free clone slot on node pve (2 of 2 in use)".into(),
        };
        let waits = waits(
            &[seen(0, "WaitingForCapacity"), seen(30, "WaitingForTask")],
            1000.0,
            Duration::from_secs(60),
        );
        assert_eq!(waits.len(), 1);
        assert_eq!((waits[0].from, waits[0].to), (1000.0, 1030.0));
        // Two clones until 1010, one until 1012, then none: 20 s free.
        let tasks = [clone_task(990.0, 1010.0), clone_task(995.0, 1012.0)];
        let (_, free) = longest_with_a_free_slot(&waits, &tasks).unwrap();
        assert_eq!(free, Duration::from_secs(20));
    }
}
