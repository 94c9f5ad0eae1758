//! What each decision means for the conditions and the requeue.

use super::*;

#[derive(Clone, Debug, Default, PartialEq)]
struct Note(String);

impl Diff for Note {
    type Patch = String;
    fn diff(&self, observed: &Self) -> Option<String> {
        (self != observed).then(|| self.0.clone())
    }
}

fn now() -> Time {
    Time(Timestamp::now())
}

#[test]
fn a_refusal_backs_off_and_a_call_looks_again_at_once() {
    let resync = Duration::from_secs(60);
    let backoff = || Duration::from_secs(7);
    let call: Decision<Note> = Decision::Call(Call::Create(Note::default()));
    let refused = outcome(
        &call,
        Some(Refusal {
            why: "400 proto".into(),
            field: None,
        }),
        "it",
        now(),
        resync,
        backoff,
    );
    assert_eq!(refused.action, Action::requeue(Duration::from_secs(7)));
    assert_eq!(refused.synced.status, ConditionStatus::False);
    assert!(
        refused
            .synced
            .message
            .unwrap_or_default()
            .contains("400 proto")
    );
    assert!(refused.event.is_some_and(|e| e.warning));
    let sent = outcome(&call, None, "it", now(), resync, backoff);
    assert_eq!(sent.action, Action::requeue(Duration::ZERO));
    let up = outcome(
        &Decision::<Note>::UpToDate,
        None,
        "it",
        now(),
        resync,
        backoff,
    );
    assert_eq!(up.action, Action::requeue(resync));
    assert_eq!(up.ready.status, ConditionStatus::True);
    let released = Decision::<Note>::Released { orphaned: false };
    assert!(outcome(&released, None, "it", now(), resync, backoff).release);
    let not_owned = outcome(
        &Decision::<Note>::NotOwned,
        None,
        "it",
        now(),
        resync,
        backoff,
    );
    assert_eq!(not_owned.synced.reason, "NotOwned");
}

#[test]
fn nothing_to_create_is_said_on_ready_and_looked_at_again_at_the_resync() {
    let resync = Duration::from_secs(60);
    let empty = Decision::<Note>::Empty("selects no guest".into());
    let said = outcome(&empty, None, "it", now(), resync, || Duration::from_secs(7));
    assert_eq!(
        said.action,
        Action::requeue(resync),
        "not a failure: no backoff"
    );
    assert_eq!(said.ready.status, ConditionStatus::False);
    assert_eq!(said.ready.message.as_deref(), Some("selects no guest"));
    assert_eq!(said.synced.status, ConditionStatus::True);
    assert!(said.event.is_none() && !said.release);
}

#[test]
fn a_correction_proxmox_accepted_is_not_sent_a_third_time_in_a_row() {
    let sent = Sent::default();
    let update = Decision::<Note>::Call(Call::Update("x".into()));
    assert_eq!(again(&sent, "u", &update), None, "the first time: sent");
    let said = again(&sent, "u", &update).unwrap_or_default();
    assert!(said.contains("accepted this correction twice"), "{said}");
    assert_eq!(
        again(&sent, "u", &update),
        None,
        "after the backoff: tried again"
    );
    assert_eq!(again(&sent, "other", &update), None, "per resource");
    let other = Decision::<Note>::Call(Call::Update("y".into()));
    assert_eq!(again(&sent, "u", &other), None, "another correction: sent");
    assert_eq!(again(&sent, "u", &Decision::<Note>::UpToDate), None);
    assert_eq!(
        again(&sent, "u", &other),
        None,
        "converged in between: sent"
    );
}
