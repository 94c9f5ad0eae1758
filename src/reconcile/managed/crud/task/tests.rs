//! The task path of the CRUD pass: a call that starts a task is recorded,
//! never sent twice (a lock waits, an own task is adopted), and the
//! recorded task's state decides the pass, table by table.

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pve_client::{TaskOutcome, Upid};

use super::*;
use crate::api::meta::Capabilities;
use crate::reconcile::managed::crud::{Decision, Diff, External, Observed, Sent, run};

#[derive(Clone, Debug, Default, PartialEq)]
struct Snap {
    note: String,
}

impl Diff for Snap {
    type Patch = String;
    fn diff(&self, observed: &Self) -> Option<String> {
        (self.note != observed.note).then(|| self.note.clone())
    }
}

const ALL: Capabilities = Capabilities {
    create: true,
    update: true,
    delete: true,
};

fn upid(kind: &str, start: u32) -> Upid {
    Upid::parse(&format!(
        "UPID:pve:0000A1B2:0001C3D4:{start:08X}:{kind}:100:prov@pve!ci:"
    ))
    .unwrap()
}

/// A Proxmox whose calls start tasks: what it shows, its lock, an own
/// task to adopt, and what it was sent.
struct Tasks {
    shows: Observed<Snap>,
    lock: Option<String>,
    own: Option<Upid>,
    sent: Mutex<Vec<Call<Snap>>>,
}

impl External for Tasks {
    type Object = Snap;

    async fn observe(&self) -> Observed<Snap> {
        self.shows.clone()
    }

    async fn call(&self, call: &Call<Snap>) -> Result<(), String> {
        self.start(call).await.map(|_| ())
    }

    async fn start(&self, call: &Call<Snap>) -> Result<Sent, String> {
        self.sent.lock().unwrap().push(call.clone());
        Ok(Sent::Task(Started {
            upid: upid("qmsnapshot", 1_700_000_000),
            target: None,
        }))
    }

    async fn busy(&self, _: &Call<Snap>) -> Option<String> {
        self.lock.clone()
    }

    async fn adopt(&self, _: &Call<Snap>) -> Result<Option<Started>, String> {
        Ok(self.own.clone().map(|upid| Started { upid, target: None }))
    }
}

fn tasks(shows: Observed<Snap>, lock: Option<&str>, own: Option<Upid>) -> Tasks {
    Tasks {
        shows,
        lock: lock.map(str::to_owned),
        own,
        sent: Mutex::new(vec![]),
    }
}

fn want() -> Snap {
    Snap { note: "a".into() }
}

#[tokio::test]
async fn a_task_is_started_once_waits_for_a_lock_and_adopts_its_own() {
    let open = || Ok(());
    let ext = tasks(Observed::NotFound, None, None);
    let done = run(&ext, &want(), ALL, false, open).await.unwrap();
    let started = done.started.expect("a task started");
    assert_eq!(started.task.upid.task_type(), "qmsnapshot");
    assert_eq!(started.action, CallAction::Create);
    assert!(!started.adopted);
    assert_eq!(ext.sent.lock().unwrap().len(), 1);

    // The guest is locked (a snapshot running, its status write lost):
    // a wait, nothing sent.
    let ext = tasks(
        Observed::NotFound,
        Some("guest 100 is locked (snapshot)"),
        None,
    );
    let done = run(&ext, &want(), ALL, false, open).await.unwrap();
    assert_eq!(
        done.decision,
        Decision::Busy("guest 100 is locked (snapshot)".into())
    );
    assert!(done.started.is_none() && ext.sent.lock().unwrap().is_empty());

    // Its own task is found: adopted, not sent again.
    let own = upid("qmrollback", 1_700_000_100);
    let ext = tasks(Observed::NotFound, None, Some(own.clone()));
    let done = run(&ext, &want(), ALL, false, open).await.unwrap();
    let adopted = done.started.expect("adopted");
    assert_eq!(
        adopted.task,
        Started {
            upid: own,
            target: None
        }
    );
    assert!(adopted.adopted);
    assert!(ext.sent.lock().unwrap().is_empty());

    // Nothing due: the lock is not even asked about.
    let seen = Observed::Found {
        object: want(),
        ours: true,
    };
    let ext = tasks(seen, Some("backup"), None);
    let done = run(&ext, &want(), ALL, false, open).await.unwrap();
    assert_eq!(done.decision, Decision::UpToDate);
}

fn at(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap())
}

const T0: i64 = 1_700_000_000;
const RESYNC: Duration = Duration::from_secs(60);

fn recorded(action: CallAction) -> TaskRecord {
    let started = Started {
        upid: upid("qmsnapshot", T0 as u32),
        target: Some("r1".into()),
    };
    super::started(
        &TaskRecord::default(),
        (&started, action),
        &at(T0),
        Duration::from_secs(600),
    )
}

fn reason(outcome: &Outcome) -> (&str, &str) {
    (
        outcome.ready.reason.as_str(),
        outcome.synced.reason.as_str(),
    )
}

#[test]
fn the_recorded_task_decides_the_pass() {
    let record = recorded(CallAction::Create);
    let task = record.task.clone().unwrap();
    assert_eq!(task.type_, "qmsnapshot");
    assert_eq!(task.deadline, at(T0 + 600));
    assert_eq!(task.target.as_deref(), Some("r1"));

    type Case = (
        &'static str,
        TaskState,
        i64,
        (&'static str, &'static str),
        Option<Duration>,
    );
    let cases: Vec<Case> = vec![
        (
            "running: a wait until the watcher wakes it, or the resync",
            TaskState::Running { progress: Some(40) },
            T0 + 10,
            ("Creating", "WaitingForTask"),
            Some(RESYNC),
        ),
        (
            "running near its deadline: looked at by then",
            TaskState::Running { progress: None },
            T0 + 590,
            ("Creating", "WaitingForTask"),
            Some(Duration::from_secs(10)),
        ),
        (
            "past its deadline: said, still observed",
            TaskState::Running { progress: None },
            T0 + 700,
            ("Creating", "TaskTimeout"),
            Some(RESYNC),
        ),
        (
            "failed: said, backed off",
            TaskState::Finished(TaskOutcome::Failed {
                exit_status: "snapshot name 's1' already used".into(),
                log_tail: vec![],
            }),
            T0 + 10,
            ("Unavailable", "TaskFailed"),
            Some(Duration::from_secs(10)),
        ),
        (
            "not visible yet: looked for again soon",
            TaskState::NotFound,
            T0 + 10,
            ("Creating", "WaitingForTask"),
            Some(Duration::from_secs(5)),
        ),
        (
            "lost: a failure",
            TaskState::NotFound,
            T0 + 120,
            ("Unavailable", "TaskFailed"),
            Some(Duration::from_secs(10)),
        ),
        (
            "unreadable: said, the task stays recorded",
            TaskState::Unreadable("timeout".into()),
            T0 + 10,
            ("Creating", "ReconcileError"),
            Some(Duration::from_secs(5)),
        ),
    ];
    for (name, state, now, want, again) in cases {
        match look(&record, &state, at(now), RESYNC) {
            Looked::Stop(outcome, next) => {
                assert_eq!(reason(&outcome), want, "{name}");
                let requeue = format!("{:?}", outcome.action);
                assert_eq!(
                    requeue,
                    format!("{:?}", Action::requeue(again.unwrap())),
                    "{name}"
                );
                let failed = want.1 == "TaskFailed";
                assert_eq!(
                    next.task.is_none(),
                    failed,
                    "{name}: the task stays until it ended"
                );
                assert_eq!(next.last_failure.is_some(), failed, "{name}");
            }
            Looked::Ended(_) => panic!("{name}: not ended"),
        }
    }
    let Looked::Stop(_, running) = look(
        &record,
        &TaskState::Running { progress: Some(40) },
        at(T0 + 1),
        RESYNC,
    ) else {
        panic!("running")
    };
    let t = running.task.unwrap();
    assert_eq!(
        (t.progress, t.summary.as_str()),
        (Some(40), "qmsnapshot 40%")
    );
}

#[test]
fn a_success_clears_the_failures_and_a_failure_holds_calls_back() {
    let record = recorded(CallAction::Update);
    let failed = TaskState::Finished(TaskOutcome::Failed {
        exit_status: "VM is locked (backup)".into(),
        log_tail: vec![],
    });
    let Looked::Stop(outcome, after_one) = look(&record, &failed, at(T0 + 5), RESYNC) else {
        panic!("a failure stops the pass")
    };
    assert_eq!(outcome.event.as_ref().map(|e| e.reason), Some("TaskFailed"));
    let failure = after_one.last_failure.clone().unwrap();
    assert_eq!((failure.count, failure.action), (1, CallAction::Update));
    let last = after_one.last_task.clone().unwrap();
    assert!(!last.succeeded);
    assert_eq!(last.target.as_deref(), Some("r1"));

    // Held back for the backoff (10 s after the first failure), then free.
    let (left, synced) = gate(&after_one, &at(T0 + 9)).expect("held back");
    assert_eq!(left, Duration::from_secs(6));
    assert_eq!(synced.reason, "TaskFailed");
    assert!(gate(&after_one, &at(T0 + 16)).is_none());

    // A second failure of the same action doubles the backoff.
    let again = TaskRecord {
        task: recorded(CallAction::Update).task,
        ..after_one
    };
    let Looked::Stop(outcome, after_two) = look(&again, &failed, at(T0 + 20), RESYNC) else {
        panic!("a failure stops the pass")
    };
    assert_eq!(after_two.last_failure.as_ref().map(|f| f.count), Some(2));
    assert_eq!(
        format!("{:?}", outcome.action),
        format!("{:?}", Action::requeue(Duration::from_secs(20)))
    );

    // Then a success: recorded as ended OK, failures cleared, the pass goes on.
    let ok = TaskRecord {
        task: recorded(CallAction::Update).task,
        ..after_two
    };
    let done = TaskState::Finished(TaskOutcome::Succeeded {
        warnings: 0,
        warning_lines: vec![],
    });
    let Looked::Ended(next) = look(&ok, &done, at(T0 + 60), RESYNC) else {
        panic!("ended")
    };
    assert!(next.task.is_none() && next.last_failure.is_none());
    assert!(next.last_task.unwrap().succeeded);
}

#[test]
fn a_started_task_says_so_once() {
    let record = recorded(CallAction::Delete);
    let outcome = dispatched(&record, false, at(T0), RESYNC);
    assert_eq!(reason(&outcome), ("Deleting", "WaitingForTask"));
    let event = outcome.event.unwrap();
    assert_eq!(event.reason, "TaskStarted");
    assert!(
        event.note.starts_with("started qmsnapshot UPID:"),
        "{}",
        event.note
    );
    let adopted = dispatched(&record, true, at(T0), RESYNC);
    assert!(adopted.event.unwrap().note.starts_with("adopted "));
}
