//! Proxmox task identifiers (UPIDs), parsed exactly as PVE parses them.
//!
//! `UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:` with
//! upper-case hex fields on encode, either case accepted on decode, a
//! `pstart` of 8 or 9 digits (it outgrows 8 after ~497 days of uptime), an
//! `id` that may be empty, a user that may be a token (`user@realm!token`),
//! and a required trailing colon (PVE's regex is anchored `...:$`).

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use regex::Regex;

/// PVE's decode regex (pve-common `PVE::UPID::decode`, PVE 9).
static UPID_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^UPID:([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?):",
        r"([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8,9}):([0-9A-Fa-f]{8}):",
        r"([^:\s/]+):([^:\s/]*):([^:\s/]+):$"
    ))
    .expect("the UPID regex is a valid constant")
});

/// A parsed UPID. It keeps the exact string it was parsed from, because PVE
/// finds the task's log file by that string: a UPID must be sent back
/// byte for byte as the server wrote it.
///
/// Cheap to clone (shared).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Upid(Arc<Fields>);

#[derive(PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Fields {
    raw: String,
    node: String,
    pid: u32,
    pstart: u64,
    starttime: u32,
    task_type: String,
    id: String,
    user: String,
}

/// Why a string is not a UPID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid UPID {0:?}: it does not match PVE's UPID format")]
pub struct InvalidUpid(pub String);

impl Upid {
    /// Parses and validates a UPID.
    pub fn parse(s: &str) -> Result<Self, InvalidUpid> {
        let caps = UPID_RE
            .captures(s)
            .ok_or_else(|| InvalidUpid(s.to_owned()))?;
        let field = |i: usize| caps.get(i).map_or("", |m| m.as_str());
        let hex =
            |i: usize| u64::from_str_radix(field(i), 16).map_err(|_| InvalidUpid(s.to_owned()));
        let as_u32 = |v: u64| u32::try_from(v).map_err(|_| InvalidUpid(s.to_owned()));
        Ok(Self(Arc::new(Fields {
            raw: s.to_owned(),
            node: field(1).to_owned(),
            pid: as_u32(hex(3)?)?,
            pstart: hex(4)?,
            starttime: as_u32(hex(5)?)?,
            task_type: field(6).to_owned(),
            id: field(7).to_owned(),
            user: field(8).to_owned(),
        })))
    }

    /// Encodes a UPID the way PVE does (`%08X`, upper case).
    ///
    /// Returns an error if a field would not survive parsing (for example a
    /// type containing `:`).
    pub fn encode(
        node: &str,
        pid: u32,
        pstart: u64,
        starttime: u32,
        task_type: &str,
        id: &str,
        user: &str,
    ) -> Result<Self, InvalidUpid> {
        Self::parse(&format!(
            "UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{task_type}:{id}:{user}:"
        ))
    }

    /// The node that runs the task: the node to ask about it.
    pub fn node(&self) -> &str {
        &self.0.node
    }
    /// Worker process id.
    pub fn pid(&self) -> u32 {
        self.0.pid
    }
    /// Worker process start, in clock ticks since boot.
    pub fn pstart(&self) -> u64 {
        self.0.pstart
    }
    /// Task start, Unix seconds (server clock).
    pub fn starttime(&self) -> u32 {
        self.0.starttime
    }
    /// Task type, e.g. `qmcreate`, `qmclone`, `download`.
    pub fn task_type(&self) -> &str {
        &self.0.task_type
    }
    /// Task id: usually the VMID; may be empty.
    pub fn id(&self) -> &str {
        &self.0.id
    }
    /// The user that started the task (`root@pam`, `ci@pve!prov`).
    pub fn user(&self) -> &str {
        &self.0.user
    }
    /// The token id when an API token started the task.
    pub fn token(&self) -> Option<&str> {
        self.0.user.split_once('!').map(|(_, token)| token)
    }
    /// The exact string, as the server wrote it.
    pub fn as_str(&self) -> &str {
        &self.0.raw
    }
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.raw)
    }
}

impl fmt::Debug for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Upid({})", self.0.raw)
    }
}

impl FromStr for Upid {
    type Err = InvalidUpid;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl serde::Serialize for Upid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.raw)
    }
}

impl<'de> serde::Deserialize<'de> for Upid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod prop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_pve_test_vector() {
        // pve-common test/upid-test.pl
        let u = Upid::parse("UPID:example-node:000934AF:0D015579:68BF3A41:hastart:100:root@pam:")
            .unwrap();
        assert_eq!(u.node(), "example-node");
        assert_eq!(u.pid(), 603_311);
        assert_eq!(u.pstart(), 218_191_225);
        assert_eq!(u.starttime(), 1_757_362_753);
        assert_eq!(u.task_type(), "hastart");
        assert_eq!(u.id(), "100");
        assert_eq!(u.user(), "root@pam");
        assert_eq!(u.token(), None);
    }

    #[test]
    fn accepts_what_pve_accepts() {
        let ok = [
            // 9-digit pstart (long uptime)
            "UPID:pve:000934AF:10D015579:68BF3A41:qmcreate:100:root@pam:",
            // empty id
            "UPID:pve:000934AF:0D015579:68BF3A41:aptupdate::root@pam:",
            // token user
            "UPID:pve1:0000AAAA:0D015579:68BF3A41:qmclone:9000:ci@pve!prov:",
            // lower-case hex
            "UPID:n:000934af:0d015579:68bf3a41:qmstart:100:root@pam:",
            // download id: encode_text'ed filename
            "UPID:pve:000934AF:0D015579:68BF3A41:download:jammy.qcow2:root@pam:",
            "UPID:pve:000934AF:0D015579:68BF3A41:download:a%3Ab.iso:root@pam:",
        ];
        for s in ok {
            let u = Upid::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(u.to_string(), s, "Display round-trips");
            assert_eq!(Upid::parse(&u.to_string()).unwrap(), u);
        }
        let token = Upid::parse(ok[2]).unwrap();
        assert_eq!(token.token(), Some("prov"));
        assert_eq!(token.node(), "pve1");
        assert_eq!(Upid::parse(ok[0]).unwrap().pstart(), 0x1_0D01_5579);
    }

    #[test]
    fn rejects_what_pve_rejects() {
        let bad = [
            "",
            "UPID:pve:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam", // no trailing colon
            "upid:pve:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam:", // prefix case
            "UPID:-pve:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam:", // node starts with '-'
            "UPID:pve-:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam:", // node ends with '-'
            "UPID:pve:0934AF:0D015579:68BF3A41:qmcreate:100:root@pam:",  // short pid
            "UPID:pve:000934AF:0D01557:68BF3A41:qmcreate:100:root@pam:", // 7-digit pstart
            "UPID:pve:000934AF:100D015579:68BF3A41:qmcreate:100:root@pam:", // 10-digit pstart
            "UPID:pve:000934AG:0D015579:68BF3A41:qmcreate:100:root@pam:", // non-hex
            "UPID:pve:000934AF:0D015579:68BF3A41::100:root@pam:",        // empty type
            "UPID:pve:000934AF:0D015579:68BF3A41:qm create:100:root@pam:", // space in type
            "UPID:pve:000934AF:0D015579:68BF3A41:qmcreate:1/0:root@pam:", // slash in id
            "UPID:pve:000934AF:0D015579:68BF3A41:qmcreate:100::",        // empty user
            "UPID:pve:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam:x:", // extra field
            " UPID:pve:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam:", // leading space
        ];
        for s in bad {
            assert!(Upid::parse(s).is_err(), "{s:?} must be rejected");
        }
    }

    #[test]
    fn encode_matches_pve_sprintf() {
        let u = Upid::encode(
            "pve",
            0x934AF,
            0x0D01_5579,
            0x68BF_3A41,
            "qmcreate",
            "100",
            "root@pam",
        )
        .unwrap();
        assert_eq!(
            u.as_str(),
            "UPID:pve:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam:"
        );
        let long = Upid::encode("pve", 1, 0x1_0000_0000, 1, "qmstart", "1", "a@b").unwrap();
        assert_eq!(
            long.as_str(),
            "UPID:pve:00000001:100000000:00000001:qmstart:1:a@b:"
        );
        assert!(Upid::encode("pve", 1, 1, 1, "bad:type", "1", "a@b").is_err());
    }

    #[test]
    fn serde_round_trip() {
        let s = "\"UPID:pve:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam:\"";
        let u: Upid = serde_json::from_str(s).unwrap();
        assert_eq!(serde_json::to_string(&u).unwrap(), s);
        assert!(serde_json::from_str::<Upid>("\"UPID:nope\"").is_err());
    }
}
