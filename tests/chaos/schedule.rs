//! What happens when: the kills of a phase and the apiserver restart, with
//! the pauses before them, all drawn from the run's seed.

use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use super::size::Size;

/// Whom a kill hits, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    /// The leader, right after the simulator logged a create or clone that
    /// started a task: between the dispatch and its status write.
    AfterDispatch,
    /// The leader, at a random moment.
    Leader,
    /// Either replica (the seed decides), at a random moment.
    Random,
}

impl Kill {
    pub fn label(self) -> &'static str {
        match self {
            Kill::AfterDispatch => "leader, right after a dispatch",
            Kill::Leader => "leader, random moment",
            Kill::Random => "random replica, random moment",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event {
    Kill(Kill),
    RestartApiserver,
}

/// One event and the pause before it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    pub pause: Duration,
    pub event: Event,
}

/// While VMs are created: the dispatch kills first and interleaved with
/// the others (creates are plentiful early), the apiserver restart in the
/// middle.
pub fn creation(size: &Size, rng: &mut StdRng) -> Vec<Step> {
    let mut others: Vec<Kill> =
        std::iter::repeat_n(Kill::Leader, size.leader_kills - size.dispatch_kills)
            .chain(std::iter::repeat_n(
                Kill::Random,
                size.kills - size.leader_kills,
            ))
            .collect();
    others.shuffle(rng);
    let mut others = others.into_iter();
    let mut kills = Vec::with_capacity(size.kills);
    for _ in 0..size.dispatch_kills {
        kills.push(Kill::AfterDispatch);
        kills.extend(others.next());
    }
    kills.extend(others);
    let mut events: Vec<Event> = kills.into_iter().map(Event::Kill).collect();
    events.insert(events.len().div_ceil(2), Event::RestartApiserver);
    with_pauses(events, size, rng)
}

/// While everything is deleted: random kills only.
pub fn deletion(size: &Size, rng: &mut StdRng) -> Vec<Step> {
    let events = vec![Event::Kill(Kill::Random); size.delete_kills];
    with_pauses(events, size, rng)
}

fn with_pauses(events: Vec<Event>, size: &Size, rng: &mut StdRng) -> Vec<Step> {
    let (min, max) = size.kill_gap;
    events
        .into_iter()
        .map(|event| Step {
            pause: Duration::from_secs_f64(rng.random_range(min..=max)),
            event,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn size(kills: usize, leader: usize, dispatch: usize) -> Size {
        let mut size = Size::reduced();
        size.kills = kills;
        size.leader_kills = leader;
        size.dispatch_kills = dispatch;
        size
    }

    fn kills(steps: &[Step]) -> Vec<Kill> {
        steps
            .iter()
            .filter_map(|s| match s.event {
                Event::Kill(k) => Some(k),
                Event::RestartApiserver => None,
            })
            .collect()
    }

    #[test]
    fn the_plan_has_every_kill_asked_for_and_one_apiserver_restart() {
        let size = size(12, 4, 3);
        let steps = creation(&size, &mut StdRng::seed_from_u64(3));
        let kills = kills(&steps);
        assert_eq!(kills.len(), 12);
        let count = |k| kills.iter().filter(|&&x| x == k).count();
        assert_eq!(count(Kill::AfterDispatch), 3);
        assert_eq!(count(Kill::Leader), 1);
        assert_eq!(count(Kill::Random), 8);
        assert_eq!(kills[0], Kill::AfterDispatch, "a dispatch kill comes first");
        let restarts = steps
            .iter()
            .filter(|s| s.event == Event::RestartApiserver)
            .count();
        assert_eq!(restarts, 1);
    }

    #[test]
    fn the_reduced_plan_kills_the_leader_after_a_dispatch_then_restarts_the_apiserver() {
        let size = size(2, 1, 1);
        let steps = creation(&size, &mut StdRng::seed_from_u64(9));
        let events: Vec<Event> = steps.iter().map(|s| s.event).collect();
        assert_eq!(
            events,
            [
                Event::Kill(Kill::AfterDispatch),
                Event::RestartApiserver,
                Event::Kill(Kill::Random)
            ]
        );
    }
}
