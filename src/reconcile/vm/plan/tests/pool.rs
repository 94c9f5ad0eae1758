//! The resource pool kept in place: moved with `allow-move`, added when in
//! none, left alone when the spec names none or the VM is not listed yet.

use super::*;
use crate::reconcile::vm::plan::{PoolMove, PoolView};

fn in_pool(wanted: Option<&str>, member_of: Option<Option<&str>>) -> World {
    let wanted = wanted.map(str::to_owned);
    World::new()
        .created()
        .spec(move |s| s.pool = wanted)
        .present(our_vm(Power::Running))
        .observe(move |o| {
            o.pool = member_of.map(|m| PoolView {
                member_of: m.map(str::to_owned),
            });
        })
}

/// A case: its name, the spec's pool, the VM's membership as observed
/// (`None`: not listed), the step wanted (`None`: up to date).
type Case = (
    &'static str,
    Option<&'static str>,
    Option<Option<&'static str>>,
    Option<Step>,
);

#[test]
fn the_vm_is_moved_into_the_pool_its_spec_names() {
    let moves = |p: PoolMove| Step::Pool(p);
    let cases: [Case; 5] = [
        (
            "in another pool: moved in one call",
            Some("team-b"),
            Some(Some("team-a")),
            Some(moves(PoolMove {
                pool: "team-b".into(),
                vmid: 100,
                allow_move: true,
            })),
        ),
        (
            "in none: added",
            Some("team-b"),
            Some(None),
            Some(moves(PoolMove {
                pool: "team-b".into(),
                vmid: 100,
                allow_move: false,
            })),
        ),
        (
            "already there: nothing",
            Some("team-b"),
            Some(Some("team-b")),
            None,
        ),
        ("not listed yet: nothing", Some("team-b"), None, None),
        (
            "no pool in the spec: left as it is",
            None,
            Some(Some("team-a")),
            None,
        ),
    ];
    for (name, wanted, member_of, want) in cases {
        let plan = in_pool(wanted, member_of).run();
        match want {
            Some(step) => {
                assert_eq!(plan.step, step, "{name}");
                assert_eq!(plan.requeue_after, Some(Duration::ZERO), "{name}");
                assert!(plan.pending_task.is_none(), "{name}: no task");
            }
            None => assert_eq!(
                plan.step,
                Step::Idle(Idle::UpToDate),
                "{name}: {:?}",
                plan.step
            ),
        }
    }
}

#[test]
fn a_failed_move_backs_off() {
    let plan = in_pool(Some("team-b"), Some(Some("team-a")))
        .failed(TaskAction::MovePool, 1, 95)
        .run();
    assert_eq!(plan.step, Step::Idle(Idle::Wait));
}
