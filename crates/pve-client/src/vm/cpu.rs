//! The CPU option (`pve-vm-cpu-conf`): `host` or
//! `cputype=x86-64-v2-AES,flags=+aes;-pcid,hidden=1`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::vm::propstring::{self, Format};
use crate::vm::value::InvalidValue;

const FORMAT: Format = Format {
    what: "cpu",
    default_key: Some("cputype"),
    aliases: &[],
};

/// The `cpu` option: the model and its other settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuConfig {
    /// `cputype` (PVE's default is `kvm64`).
    pub cputype: Option<String>,
    /// `flags`, `hidden`, `phys-bits`, ... as written.
    pub options: BTreeMap<String, String>,
}

impl CpuConfig {
    /// A CPU model and nothing else.
    pub fn model(cputype: &str) -> Self {
        Self {
            cputype: Some(cputype.to_owned()),
            options: BTreeMap::new(),
        }
    }

    /// The `flags` option as a list (`+aes;-pcid` → `["+aes", "-pcid"]`).
    pub fn flags(&self) -> Vec<String> {
        self.options
            .get("flags")
            .map(|f| {
                f.split(';')
                    .filter(|f| !f.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sets the `flags` option (removes it when `flags` is empty).
    pub fn set_flags(&mut self, flags: &[String]) {
        if flags.is_empty() {
            self.options.remove("flags");
        } else {
            self.options.insert("flags".into(), flags.join(";"));
        }
    }
}

impl FromStr for CpuConfig {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = FORMAT.parse(s)?;
        Ok(Self {
            cputype: p.default.take(),
            options: p.pairs,
        })
    }
}

impl fmt::Display for CpuConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&propstring::render(self.cputype.as_deref(), &self.options))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_bare_or_named() {
        let c: CpuConfig = "cputype=host,flags=+aes".parse().unwrap();
        assert_eq!(c.cputype.as_deref(), Some("host"));
        assert_eq!(c.to_string(), "host,flags=+aes");
        assert_eq!("host".parse(), Ok(CpuConfig::model("host")));
        assert!("host,cputype=kvm64".parse::<CpuConfig>().is_err());
        let mut c: CpuConfig = "host,flags=+aes;-pcid".parse().unwrap();
        assert_eq!(c.flags(), ["+aes", "-pcid"]);
        c.set_flags(&["+md-clear".into()]);
        assert_eq!(c.to_string(), "host,flags=+md-clear");
        c.set_flags(&[]);
        assert_eq!(c.to_string(), "host");
    }
}
