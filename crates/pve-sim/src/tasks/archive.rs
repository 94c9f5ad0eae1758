//! Where `GET /nodes/{node}/tasks` finds a task: PVE's `active` file or its
//! archive `index`, and the archival pass that moves tasks between them.
//!
//! How PVE does it (pve-common `PVE::RESTEnvironment::active_workers`,
//! `PVE::INotify::read/write_active_workers`; pve-manager
//! `PVE::API2::Tasks` `node_tasks`; pve-manager `PVE::Service::pvestatd`):
//!
//! * A new worker is added to `/var/log/pve/tasks/active` without an end.
//! * An archival pass (`active_workers`) runs when a worker starts on the
//!   node, when the daemon that forked a worker reaps it (SIGCHLD, usually at
//!   once), and on every pvestatd cycle (10 s). It gives every stopped task
//!   its `endtime` (the time of the pass, not of the exit) and exit status,
//!   appends it to `/var/log/pve/tasks/index` and marks it `saved`, all in
//!   the same pass.
//! * `source=active` lists the entries of the active file that are not
//!   saved, in file order (start order), with `status` `RUNNING` when no pass
//!   has recorded an end. So a task that has stopped but not been archived
//!   yet is still listed `RUNNING`, without `endtime`, and is not in the
//!   archive; once archived it is only in the archive. A stopped task shows
//!   its exit status in the active list only when the pass could not write
//!   the index (`saved` stays 0, e.g. a full `/var/log`): the `archive-error`
//!   fault.
//! * `source=archive` reads the index backwards (most recently archived
//!   first); `source=all` is the active part followed by the archive.

use std::time::Duration;

use super::TaskRecord;
use crate::clock::Clock;

/// pvestatd's update cycle, which also runs an archival pass (it retries
/// tasks a failed pass left unsaved).
pub const PVESTATD_CYCLE: Duration = Duration::from_secs(10);

/// A task's place in PVE's task lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Listing {
    /// In the active file without an end: `source=active` lists it as
    /// `RUNNING`, even after it stopped, until an archival pass sees it.
    #[default]
    Active,
    /// A pass recorded its end but could not write the index: still listed
    /// by `source=active`, now with its exit status and `endtime`.
    Unsaved { endtime: u64 },
    /// In the index; `seq` is its line number there.
    Archived { endtime: u64, seq: u64 },
}

impl Listing {
    pub fn is_archived(&self) -> bool {
        matches!(self, Self::Archived { .. })
    }

    /// The `endtime` the task list shows, once a pass recorded one.
    pub fn endtime(&self) -> Option<u64> {
        match self {
            Self::Active => None,
            Self::Unsaved { endtime } | Self::Archived { endtime, .. } => Some(*endtime),
        }
    }
}

/// One archival pass over a node's tasks (`active_workers`). `index_fails`
/// is asked only when there is something to append, as PVE only touches the
/// index then. Returns whether the index was written.
pub fn pass(
    records: &mut [TaskRecord],
    next_seq: &mut u64,
    node: &str,
    index_fails: impl FnOnce() -> bool,
) -> bool {
    let mut due: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.upid.node == node && r.exit.is_some() && !r.listing.is_archived())
        .map(|(i, _)| i)
        .collect();
    if due.is_empty() {
        return true;
    }
    // PVE appends one pass's tasks newest start first.
    due.sort_by(|&a, &b| {
        let (a, b) = (&records[a].upid, &records[b].upid);
        b.starttime.cmp(&a.starttime).then(b.pid.cmp(&a.pid))
    });
    let now = Clock::epoch_secs();
    let failed = index_fails();
    for i in due {
        let endtime = records[i].listing.endtime().unwrap_or(now);
        records[i].listing = if failed {
            Listing::Unsaved { endtime }
        } else {
            *next_seq += 1;
            Listing::Archived {
                endtime,
                seq: *next_seq,
            }
        };
    }
    !failed
}

/// The node's tasks in the order `GET /nodes/{node}/tasks` lists them for
/// `source`: the unsaved entries of the active file in start order, then
/// the index from its last line.
pub fn in_list_order<'a>(
    records: &'a [TaskRecord],
    node: &str,
    source: &str,
) -> Vec<&'a TaskRecord> {
    let on_node = || records.iter().filter(move |r| r.upid.node == node);
    let mut out: Vec<&TaskRecord> = Vec::new();
    if source == "active" || source == "all" {
        out.extend(on_node().filter(|r| !r.listing.is_archived()));
    }
    if source != "active" {
        let mut archived: Vec<(u64, &TaskRecord)> = on_node()
            .filter_map(|r| match r.listing {
                Listing::Archived { seq, .. } => Some((seq, r)),
                _ => None,
            })
            .collect();
        archived.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        out.extend(archived.into_iter().map(|(_, r)| r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upid::Upid;

    fn record(pid: u32, starttime: u64, exit: Option<&str>) -> TaskRecord {
        let upid = Upid {
            node: "pve".into(),
            pid,
            pstart: 1,
            starttime,
            task_type: "qmstart".into(),
            id: "100".into(),
            user: "root@pam".into(),
        };
        TaskRecord::new(upid, tokio::time::Instant::now()).with_exit(exit.map(str::to_owned))
    }

    fn pids(list: &[&TaskRecord]) -> Vec<u32> {
        list.iter().map(|r| r.upid.pid).collect()
    }

    #[test]
    fn a_pass_archives_stopped_tasks_newest_start_first() {
        let mut recs = vec![
            record(1, 10, Some("OK")),
            record(2, 20, None),
            record(3, 30, Some("boom")),
        ];
        let mut seq = 0;
        assert_eq!(pids(&in_list_order(&recs, "pve", "active")), [1, 2, 3]);
        assert!(in_list_order(&recs, "pve", "archive").is_empty());
        assert!(pass(&mut recs, &mut seq, "pve", || false));
        assert_eq!(pids(&in_list_order(&recs, "pve", "active")), [2]);
        // The index gets 3 then 1; read backwards: 1, 3.
        assert_eq!(pids(&in_list_order(&recs, "pve", "archive")), [1, 3]);
        assert_eq!(pids(&in_list_order(&recs, "pve", "all")), [2, 1, 3]);
        assert!(in_list_order(&recs, "pve2", "all").is_empty());
    }

    #[test]
    fn a_failed_pass_leaves_tasks_unsaved_until_one_succeeds() {
        let mut recs = vec![record(1, 10, Some("OK"))];
        let mut seq = 0;
        assert!(!pass(&mut recs, &mut seq, "pve", || true));
        let Listing::Unsaved { endtime } = recs[0].listing else {
            panic!("{:?}", recs[0].listing);
        };
        assert_eq!(pids(&in_list_order(&recs, "pve", "active")), [1]);
        assert!(pass(&mut recs, &mut seq, "pve", || false));
        assert_eq!(
            recs[0].listing,
            Listing::Archived { endtime, seq: 1 },
            "the first recorded end is kept"
        );
        let mut asked = false;
        assert!(pass(&mut recs, &mut seq, "pve", || {
            asked = true;
            true
        }));
        assert!(!asked, "nothing to append: the index is not touched");
    }
}
