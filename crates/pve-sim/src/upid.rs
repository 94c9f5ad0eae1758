//! UPIDs as PVE writes them (pve-common `PVE::UPID::encode`):
//! `UPID:node:PID:PSTART:STARTTIME:type:id:user:` with 8 upper-case hex
//! digits per number and the trailing colon. Written independently of the
//! client so that one encoding bug cannot pass in both.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upid {
    pub node: String,
    pub pid: u32,
    pub pstart: u64,
    pub starttime: u64,
    pub task_type: String,
    pub id: String,
    /// `user@realm` or `user@realm!tokenid`
    pub user: String,
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UPID:{}:{:08X}:{:08X}:{:08X}:{}:{}:{}:",
            self.node, self.pid, self.pstart, self.starttime, self.task_type, self.id, self.user
        )
    }
}

impl Upid {
    /// Parses like PVE's decode regex: node, 8 hex pid, 8–9 hex pstart,
    /// 8 hex starttime, type, optional id, user, trailing colon.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("UPID:")?.strip_suffix(':')?;
        let parts: Vec<&str> = rest.split(':').collect();
        let [node, pid, pstart, starttime, task_type, id, user] = parts.as_slice() else {
            return None;
        };
        let hex = |v: &str, lens: &[usize]| -> Option<u64> {
            if lens.contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit()) {
                u64::from_str_radix(v, 16).ok()
            } else {
                None
            }
        };
        let plain = |v: &str| !v.is_empty() && !v.chars().any(|c| c.is_whitespace() || c == '/');
        let node_ok = crate::config::is_node_name(node);
        if !node_ok || !plain(task_type) || !plain(user) || !(id.is_empty() || plain(id)) {
            return None;
        }
        Some(Self {
            node: (*node).to_owned(),
            pid: u32::try_from(hex(pid, &[8])?).ok()?,
            pstart: hex(pstart, &[8, 9])?,
            starttime: hex(starttime, &[8])?,
            task_type: (*task_type).to_owned(),
            id: (*id).to_owned(),
            user: (*user).to_owned(),
        })
    }
}

/// PVE's `encode_text` for task IDs: control characters, ':', '%' and
/// non-ASCII are percent-escaped ('%' too, so that decoding gives the text
/// back). We also escape '/' and whitespace, which the UPID regex excludes.
pub fn encode_task_id(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b <= 0x20 || b == b':' || b == b'%' || b == b'/' || b >= 0x7f {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

#[cfg(test)]
mod prop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_the_pve_test_vector() {
        let s = "UPID:example-node:000934AF:0D015579:68BF3A41:hastart:100:root@pam:";
        let u = Upid::parse(s).unwrap();
        assert_eq!(
            (u.pid, u.pstart, u.starttime),
            (603_311, 218_191_225, 1_757_362_753)
        );
        assert_eq!(u.to_string(), s);
    }

    #[test]
    fn rejects_missing_trailing_colon_and_short_hex() {
        assert!(Upid::parse("UPID:pve:000934AF:0D015579:68BF3A41:qmstart:100:root@pam").is_none());
        assert!(Upid::parse("UPID:pve:934AF:0D015579:68BF3A41:qmstart:100:root@pam:").is_none());
        assert!(Upid::parse("UPID:pve:000934AF:0D015579:68BF3A41:download::root@pam:").is_some());
    }

    #[test]
    fn task_ids_escape_percent_like_pve() {
        // pve-common ParseUtils::encode_text escapes '%': "%41" must not decode to "A".
        assert_eq!(encode_task_id("50%41 a:b.iso"), "50%2541%20a%3Ab.iso");
    }
}
