//! Properties of the simulator's UPIDs: the parser never panics and accepts
//! exactly what PVE's decode regex accepts, every UPID the simulator writes
//! parses back to its fields, and every task id it encodes fits the id field
//! and decodes back to the text it came from.

use std::sync::LazyLock;

use proptest::prelude::*;
use regex::Regex;

use super::{Upid, encode_task_id};

/// pve-common `PVE::UPID::decode`'s regex. Perl's `$` would also match
/// before a final newline; a UPID never ends in one, and both parsers
/// refuse it, so the reference is anchored strictly.
fn pve_regex() -> &'static Regex {
    static RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(concat!(
            r"\AUPID:([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?):([0-9A-Fa-f]{8}):",
            r"([0-9A-Fa-f]{8,9}):([0-9A-Fa-f]{8}):([^:\s/]+):([^:\s/]*):([^:\s/]+):\z",
        ))
        .unwrap()
    });
    &RE
}

fn upid() -> impl Strategy<Value = Upid> {
    (
        "[a-zA-Z0-9]([a-zA-Z0-9-]{0,14}[a-zA-Z0-9])?",
        any::<u32>(),
        0..=0xF_FFFF_FFFFu64,
        any::<u32>(),
        r"[^:\s/]{1,12}",
        r"[^:\s/]{0,12}",
        r"[^:\s/]{1,24}",
    )
        .prop_map(|(node, pid, pstart, starttime, task_type, id, user)| Upid {
            node,
            pid,
            pstart,
            starttime: u64::from(starttime),
            task_type,
            id,
            user,
        })
}

/// Strings that look like UPIDs: the grammar's pieces, some of them wrong.
fn upid_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        r"[0-9A-Fa-f]{7,10}",
        r"[a-zA-Z0-9-]{0,6}",
        r"[^:]{0,4}",
        Just(String::new()),
    ];
    (prop::collection::vec(piece, 5..10), any::<bool>()).prop_map(|(pieces, colon)| {
        let mut s = format!("UPID:{}", pieces.join(":"));
        if colon {
            s.push(':');
        }
        s
    })
}

proptest! {
    #[test]
    fn prop_parser_accepts_what_pve_regex_accepts(s in prop_oneof![any::<String>(), upid_like()]) {
        prop_assert_eq!(Upid::parse(&s).is_some(), pve_regex().is_match(&s), "{:?}", s);
    }

    #[test]
    fn prop_written_upids_parse_back(u in upid()) {
        let text = u.to_string();
        prop_assert!(pve_regex().is_match(&text), "{}", text);
        prop_assert_eq!(Upid::parse(&text), Some(u));
    }

    #[test]
    fn prop_task_ids_fit_the_id_field_and_decode_back(text in any::<String>()) {
        let id = encode_task_id(&text);
        let u = Upid {
            node: "pve".into(),
            pid: 1,
            pstart: 1,
            starttime: 1,
            task_type: "download".into(),
            id: id.clone(),
            user: "root@pam".into(),
        };
        prop_assert_eq!(Upid::parse(&u.to_string()).map(|p| p.id), Some(id.clone()));
        let decoded = percent_encoding::percent_decode_str(&id).decode_utf8().map(|d| d.into_owned());
        prop_assert_eq!(decoded.ok(), Some(text));
    }
}
