//! The guest agent option (`agent`):
//! `1` or `enabled=1,fstrim_cloned_disks=1,freeze-fs=0,type=virtio`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::vm::propstring::{self, Format};
use crate::vm::value::{InvalidValue, bool_text, parse_bool};

const FORMAT: Format = Format {
    what: "agent",
    default_key: Some("enabled"),
    aliases: &[
        ("freeze-fs-on-backup", "freeze-fs"),
        ("guest-fsfreeze", "freeze-fs"),
    ],
};

/// The agent's transport (`type=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentType {
    Virtio,
    Isa,
}

impl AgentType {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "virtio" => Some(Self::Virtio),
            "isa" => Some(Self::Isa),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Virtio => "virtio",
            Self::Isa => "isa",
        }
    }
}

/// The `agent` option.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentConfig {
    /// The default key; PVE reads its booleans as `parse_boolean` does, so
    /// `on`, `yes` and `true` enable the agent too.
    pub enabled: bool,
    pub fstrim_cloned_disks: Option<bool>,
    /// `freeze-fs` (also read as `freeze-fs-on-backup`, `guest-fsfreeze`).
    pub freeze_fs: Option<bool>,
    pub type_: Option<AgentType>,
    /// Options newer than this model, as written.
    pub options: BTreeMap<String, String>,
}

impl AgentConfig {
    /// The agent on or off, nothing else set.
    pub fn enabled(enabled: bool) -> Self {
        Self {
            enabled,
            ..Self::default()
        }
    }

    /// Reads the option as qemu-server's `parse_guest_agent` does: a value
    /// that does not parse means a disabled agent.
    pub fn parse(s: &str) -> Self {
        s.parse().unwrap_or_default()
    }
}

impl FromStr for AgentConfig {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = FORMAT.parse(s)?;
        let err = |reason: String| InvalidValue::new("agent", s, reason);
        let enabled = p
            .default
            .take()
            .ok_or_else(|| err("enabled is missing".into()))?;
        Ok(Self {
            enabled: parse_bool(&enabled)
                .ok_or_else(|| err(format!("{enabled:?} is no boolean")))?,
            fstrim_cloned_disks: p
                .take_with("fstrim_cloned_disks", parse_bool)
                .map_err(err)?,
            freeze_fs: p.take_with("freeze-fs", parse_bool).map_err(err)?,
            type_: p.take_with("type", AgentType::parse).map_err(err)?,
            options: p.pairs,
        })
    }
}

impl fmt::Display for AgentConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pairs = self.options.clone();
        let flag = |b: Option<bool>| b.map(|b| bool_text(b).to_owned());
        for (k, v) in [
            ("fstrim_cloned_disks", flag(self.fstrim_cloned_disks)),
            ("freeze-fs", flag(self.freeze_fs)),
            ("type", self.type_.map(|t| t.as_str().to_owned())),
        ] {
            if let Some(v) = v {
                pairs.insert(k.to_owned(), v);
            }
        }
        f.write_str(&propstring::render(Some(bool_text(self.enabled)), &pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_boolean_pve_reads() {
        for on in ["1", "on", "yes", "true", "enabled=1", "enabled=on,type=isa"] {
            assert!(AgentConfig::parse(on).enabled, "{on}");
        }
        for off in ["0", "off", "enabled=0,type=isa", "type=isa", "maybe", ""] {
            assert!(!AgentConfig::parse(off).enabled, "{off}");
        }
        let a: AgentConfig = "enabled=1,guest-fsfreeze=0,fstrim_cloned_disks=on,type=virtio"
            .parse()
            .unwrap();
        assert_eq!(
            (a.freeze_fs, a.fstrim_cloned_disks),
            (Some(false), Some(true))
        );
        assert_eq!(
            a.to_string(),
            "1,freeze-fs=0,fstrim_cloned_disks=1,type=virtio"
        );
        assert_eq!(AgentConfig::enabled(true).to_string(), "1");
        assert!(
            "1,freeze-fs=1,guest-fsfreeze=1"
                .parse::<AgentConfig>()
                .is_err()
        );
        assert!("1,type=pci".parse::<AgentConfig>().is_err());
    }
}
