//! Which replica should hold which config: rendezvous (highest random
//! weight) hashing, each config by the live replica of highest weight.
//!
//! Every replica computes the same answer from the same view (the configs
//! and the live replicas), so no coordination is needed beyond the Leases
//! themselves: a config is acquired by the replica it is assigned to, and
//! handed over by its holder when the assignment names another live
//! replica. A config's holder depends on the live replicas only, never on
//! the other configs: a config added or deleted moves no other, a replica
//! leaving moves only what it held, one joining takes about its share. (A
//! bounded load, tried first, balanced better but moved configs whenever
//! another config came or went: a hand-over, and its pause, for nothing.)

use std::collections::{BTreeMap, BTreeSet};

/// FNV-1a, 64 bits: stable across builds and versions (every replica of a
/// rolling upgrade must compute the same weights).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The weight of `member` for `config`, mixed (splitmix64's finaliser) so
/// that similar names do not rank alike.
fn weight(config: &str, member: &str) -> u64 {
    let mut x = fnv1a(config.as_bytes()) ^ fnv1a(member.as_bytes()).rotate_left(32);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Config → the member that should hold it: its highest-weight member
/// (ties by name). Empty when there are no members.
pub fn assign(configs: &BTreeSet<String>, members: &BTreeSet<String>) -> BTreeMap<String, String> {
    configs
        .iter()
        .filter_map(|config| {
            members
                .iter()
                .max_by_key(|m| (weight(config, m), std::cmp::Reverse(m.as_str())))
                .map(|member| (config.clone(), member.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn loads(a: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for m in a.values() {
            *out.entry(m.clone()).or_default() += 1;
        }
        out
    }

    #[test]
    fn configs_spread_and_every_config_is_assigned() {
        let configs: BTreeSet<String> = (0..60).map(|i| format!("config-{i}")).collect();
        for members in [set(&["a"]), set(&["a", "b"]), set(&["a", "b", "c"])] {
            let a = assign(&configs, &members);
            assert_eq!(a.len(), configs.len());
            let loads = loads(&a);
            assert_eq!(
                loads.len(),
                members.len(),
                "every replica gets some: {loads:?}"
            );
            let fair = configs.len() / members.len();
            assert!(loads.values().all(|n| *n * 2 >= fair), "{loads:?}");
        }
    }

    /// Another config added or deleted moves no config (a controller-suite
    /// test saw its config change hands whenever another test's came or
    /// went, with the bounded load tried first).
    #[test]
    fn a_config_coming_or_going_moves_no_other() {
        let members = set(&["replica-1", "replica-2"]);
        let configs: BTreeSet<String> = (0..20).map(|i| format!("config-{i}")).collect();
        let before = assign(&configs, &members);
        for extra in ["aaa", "config-10a", "zzz"] {
            let mut more = configs.clone();
            more.insert(extra.to_owned());
            let after = assign(&more, &members);
            assert!(
                configs.iter().all(|c| before[c] == after[c]),
                "{extra} moved some"
            );
        }
        let mut fewer = configs.clone();
        fewer.remove("config-3");
        let after = assign(&fewer, &members);
        assert!(fewer.iter().all(|c| before[c] == after[c]));
    }

    #[test]
    fn every_replica_computes_the_same_assignment() {
        let configs = set(&["pc/ns/one", "cpc/two", "cpc/three"]);
        let members = set(&["r-1", "r-2", "r-3"]);
        assert_eq!(assign(&configs, &members), assign(&configs, &members));
    }

    #[test]
    fn a_replica_leaving_moves_its_configs_only() {
        let configs: BTreeSet<String> = (0..30).map(|i| format!("config-{i}")).collect();
        let before = assign(&configs, &set(&["a", "b", "c", "d", "e", "f"]));
        let after = assign(&configs, &set(&["a", "b", "c", "d", "e", "f", "g"]));
        let moved = configs.iter().filter(|c| before[*c] != after[*c]).count();
        // A seventh replica takes about a seventh, from the others.
        assert!(moved <= 10, "{moved} of 30 moved");
        assert!(
            configs
                .iter()
                .filter(|c| before[*c] != after[*c])
                .all(|c| after[c] == "g"),
            "whatever moved went to the new replica"
        );
        let gone = assign(&configs, &set(&["a", "b", "c", "d", "e"]));
        let unmoved_of_others = configs
            .iter()
            .filter(|c| before[*c] != "f" && before[*c] == gone[*c])
            .count();
        let others = configs.iter().filter(|c| before[*c] != "f").count();
        assert!(unmoved_of_others * 2 >= others, "most configs stay");
        assert!(gone.values().all(|m| m != "f"));
    }

    #[test]
    fn no_members_no_assignment() {
        assert!(assign(&set(&["c"]), &BTreeSet::new()).is_empty());
    }
}
