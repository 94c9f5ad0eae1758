//! Which replica should hold which config: rendezvous (highest random
//! weight) hashing with a bounded load of `ceil(configs / replicas)`.
//!
//! Every replica computes the same answer from the same view (the configs
//! and the live replicas), so no coordination is needed beyond the Leases
//! themselves: a config is acquired by the replica it is assigned to, and
//! handed over by its holder when the assignment names another live
//! replica. A replica leaving moves only what it held (and, through the
//! bound, what the bound pushes along); one joining takes about its share.

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

/// Config → the member that should hold it. Configs are taken in order of
/// name, each by its highest-weight member still below the bound. Empty
/// when there are no members.
pub fn assign(configs: &BTreeSet<String>, members: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if members.is_empty() {
        return out;
    }
    let bound = configs.len().div_ceil(members.len());
    let mut load: BTreeMap<&str, usize> = members.iter().map(|m| (m.as_str(), 0)).collect();
    for config in configs {
        let mut ranked: Vec<&str> = members.iter().map(String::as_str).collect();
        ranked.sort_by_key(|m| (std::cmp::Reverse(weight(config, m)), *m));
        let chosen = ranked
            .into_iter()
            .find(|m| load.get(m).is_some_and(|n| *n < bound));
        if let Some(member) = chosen {
            if let Some(n) = load.get_mut(member) {
                *n += 1;
            }
            out.insert(config.clone(), member.to_owned());
        }
    }
    out
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
    fn configs_spread_within_the_bound_and_every_config_is_assigned() {
        let configs = set(&["c1", "c2", "c3", "c4", "c5", "c6", "c7"]);
        for members in [set(&["a"]), set(&["a", "b"]), set(&["a", "b", "c"])] {
            let a = assign(&configs, &members);
            assert_eq!(a.len(), configs.len());
            let bound = configs.len().div_ceil(members.len());
            assert!(loads(&a).values().all(|n| *n <= bound), "{a:?}");
        }
        let three = assign(&set(&["x", "y", "z"]), &set(&["a", "b", "c"]));
        assert_eq!(
            loads(&three).values().copied().collect::<Vec<_>>(),
            [1, 1, 1]
        );
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
        // A seventh replica takes about a seventh (the bound drops from 5
        // to 5: nothing is pushed).
        assert!(moved <= 10, "{moved} of 30 moved");
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
