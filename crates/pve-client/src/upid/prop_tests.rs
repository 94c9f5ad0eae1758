//! Properties of the UPID parser: it never panics, it agrees with the
//! simulator's independently written parser on every string (both follow
//! PVE's decode regex), and every UPID PVE can encode parses back to its
//! fields and prints back byte for byte.

use proptest::prelude::*;

use super::Upid;

/// PVE's `%08X` encodes any u32; pstart outgrows 8 digits but PVE's decode
/// regex stops at 9.
const MAX_PSTART: u64 = 0xF_FFFF_FFFF;

#[derive(Clone, Debug)]
struct Fields {
    node: String,
    pid: u32,
    pstart: u64,
    starttime: u32,
    task_type: String,
    id: String,
    user: String,
}

fn fields() -> impl Strategy<Value = Fields> {
    (
        "[a-zA-Z0-9]([a-zA-Z0-9-]{0,14}[a-zA-Z0-9])?",
        any::<u32>(),
        0..=MAX_PSTART,
        any::<u32>(),
        r"[^:\s/]{1,12}",
        r"[^:\s/]{0,12}",
        r"[^:\s/]{1,24}",
    )
        .prop_map(
            |(node, pid, pstart, starttime, task_type, id, user)| Fields {
                node,
                pid,
                pstart,
                starttime,
                task_type,
                id,
                user,
            },
        )
}

fn encode(f: &Fields) -> Result<Upid, super::InvalidUpid> {
    Upid::encode(
        &f.node,
        f.pid,
        f.pstart,
        f.starttime,
        &f.task_type,
        &f.id,
        &f.user,
    )
}

/// A valid UPID with one character inserted, replaced or removed: the
/// strings closest to the grammar's edges.
fn near_valid() -> impl Strategy<Value = String> {
    let edit = prop_oneof![
        Just(None),
        prop::sample::select(vec![':', '/', ' ', '\n', '-', 'g', 'F', '0', '\u{a0}', 'é'])
            .prop_map(Some),
    ];
    (fields(), any::<prop::sample::Index>(), 0..3u8, edit).prop_map(|(f, at, op, ch)| {
        let Ok(upid) = encode(&f) else {
            return String::new();
        };
        let mut chars: Vec<char> = upid.as_str().chars().collect();
        let i = at.index(chars.len());
        match (op, ch) {
            (0, Some(c)) => chars.insert(i, c),
            (1, Some(c)) => chars[i] = c,
            _ => {
                chars.remove(i);
            }
        }
        chars.into_iter().collect()
    })
}

fn agrees_with_the_simulator(s: &str) -> Result<(), TestCaseError> {
    let ours = Upid::parse(s);
    let sim = pve_sim::upid::Upid::parse(s);
    prop_assert_eq!(ours.is_ok(), sim.is_some(), "verdicts differ on {:?}", s);
    if let (Ok(u), Some(v)) = (ours, sim) {
        prop_assert_eq!(
            (u.node(), u.pid(), u.pstart(), u64::from(u.starttime())),
            (v.node.as_str(), v.pid, v.pstart, v.starttime)
        );
        prop_assert_eq!(
            (u.task_type(), u.id(), u.user()),
            (v.task_type.as_str(), v.id.as_str(), v.user.as_str())
        );
        prop_assert_eq!(u.as_str(), s);
    }
    Ok(())
}

proptest! {
    #[test]
    fn prop_any_string_parses_or_is_refused_like_the_simulator(s in any::<String>()) {
        agrees_with_the_simulator(&s)?;
    }

    #[test]
    fn prop_near_valid_strings_are_judged_like_the_simulator(s in near_valid()) {
        agrees_with_the_simulator(&s)?;
    }

    #[test]
    fn prop_encoded_upids_parse_back_to_their_fields(f in fields()) {
        let u = encode(&f).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let wire = format!(
            "UPID:{}:{:08X}:{:08X}:{:08X}:{}:{}:{}:",
            f.node, f.pid, f.pstart, f.starttime, f.task_type, f.id, f.user
        );
        prop_assert_eq!(u.as_str(), wire.as_str());
        prop_assert_eq!(
            (u.node(), u.pid(), u.pstart(), u.starttime()),
            (f.node.as_str(), f.pid, f.pstart, f.starttime)
        );
        prop_assert_eq!((u.task_type(), u.id(), u.user()), (f.task_type.as_str(), f.id.as_str(), f.user.as_str()));
        prop_assert_eq!(u.token(), f.user.split_once('!').map(|(_, t)| t));
        prop_assert_eq!(Upid::parse(&u.to_string()), Ok(u.clone()));
        let json = serde_json::to_string(&u).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(serde_json::from_str::<Upid>(&json).ok(), Some(u));
    }

    /// PVE decodes hex in either case; the raw string is kept, so a UPID
    /// written in lower case is sent back in lower case.
    #[test]
    fn prop_lower_case_hex_is_kept_byte_for_byte(f in fields()) {
        let wire = format!(
            "UPID:{}:{:08x}:{:08x}:{:08x}:{}:{}:{}:",
            f.node, f.pid, f.pstart, f.starttime, f.task_type, f.id, f.user
        );
        let u = Upid::parse(&wire).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(u.as_str(), wire.as_str());
        prop_assert_eq!((u.pid(), u.pstart(), u.starttime()), (f.pid, f.pstart, f.starttime));
    }

    /// The simulator's encoder and this parser agree on every field.
    #[test]
    fn prop_simulator_upids_parse_here(f in fields()) {
        let sim = pve_sim::upid::Upid {
            node: f.node.clone(),
            pid: f.pid,
            pstart: f.pstart,
            starttime: u64::from(f.starttime),
            task_type: f.task_type.clone(),
            id: f.id.clone(),
            user: f.user.clone(),
        };
        let wire = sim.to_string();
        let u = Upid::parse(&wire).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(u.as_str(), wire.as_str());
        agrees_with_the_simulator(&wire)?;
    }

    /// A pstart beyond nine hex digits is refused (PVE's regex stops there).
    #[test]
    fn prop_pstart_beyond_nine_digits_is_refused(pstart in (MAX_PSTART + 1)..=u64::MAX) {
        prop_assert!(Upid::encode("pve", 1, pstart, 1, "qmstart", "100", "root@pam").is_err());
    }
}
