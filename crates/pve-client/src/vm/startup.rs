//! `startup` (`pve-startup-order`): when PVE starts a VM with `onboot` at
//! node boot, relative to the others.

use std::fmt;
use std::str::FromStr;

use crate::vm::propstring::Format;
use crate::vm::value::InvalidValue;

const STARTUP: Format = Format {
    what: "startup",
    default_key: Some("order"),
    aliases: &[],
};

/// `startup` (`pve-startup-order`): `order=2,up=30,down=60`. The order in
/// which PVE starts VMs with `onboot` at boot (and stops them in reverse),
/// the seconds it waits after starting this one, and how long it waits for
/// it to shut down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Startup {
    pub order: Option<u32>,
    pub up: Option<u32>,
    pub down: Option<u32>,
}

impl FromStr for Startup {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = STARTUP.parse(s)?;
        let err = |reason: String| InvalidValue::new("startup", s, reason);
        let number = |v: &str| {
            (v.bytes().all(|b| b.is_ascii_digit()))
                .then(|| v.parse::<u32>().ok())
                .flatten()
        };
        let order = p
            .default
            .take()
            .map(|o| number(&o).ok_or_else(|| err(format!("order={o} is not a number"))))
            .transpose()?;
        let up = p.take_with("up", number).map_err(err)?;
        let down = p.take_with("down", number).map_err(err)?;
        if let Some(key) = p.pairs.keys().next() {
            return Err(err(format!("{key} is not a startup option")));
        }
        Ok(Self { order, up, down })
    }
}

impl fmt::Display for Startup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // PVE writes `order=` by name (`print_startup`), and so do we.
        let parts: Vec<String> = [("order", self.order), ("up", self.up), ("down", self.down)]
            .into_iter()
            .filter_map(|(k, v)| Some(format!("{k}={}", v?)))
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_orders() {
        let s: Startup = "order=2,up=30,down=60".parse().unwrap();
        assert_eq!((s.order, s.up, s.down), (Some(2), Some(30), Some(60)));
        assert_eq!(s.to_string(), "order=2,up=30,down=60");
        assert_eq!("3".parse::<Startup>().unwrap().order, Some(3));
        assert_eq!(
            "up=5".parse::<Startup>().unwrap(),
            Startup {
                up: Some(5),
                ..Startup::default()
            }
        );
        for bad in ["order=-1", "up=x", "later=1", "1,order=2"] {
            assert!(bad.parse::<Startup>().is_err(), "{bad}");
        }
    }
}
