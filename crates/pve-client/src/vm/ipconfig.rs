//! Cloud-init addresses (`pve-qm-ipconfig`):
//! `ipconfig0: ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto`.
//!
//! PVE stores the value as sent, so [`IpConfig`] writes the keys in the
//! order clients (and PVE's GUI) send them: `ip`, `gw`, `ip6`, `gw6`.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use crate::vm::propstring::Format;
use crate::vm::value::InvalidValue;

const FORMAT: Format = Format {
    what: "ipconfig",
    default_key: None,
    aliases: &[],
};

/// An address with its prefix length (`10.0.0.5/24`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr<A> {
    pub addr: A,
    pub prefix: u8,
}

fn parse_cidr<A: FromStr>(s: &str, max_prefix: u8) -> Option<Cidr<A>> {
    let (addr, prefix) = s.split_once('/')?;
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let prefix = prefix.parse().ok().filter(|p| *p <= max_prefix)?;
    Some(Cidr {
        addr: addr.parse().ok()?,
        prefix,
    })
}

impl<A: fmt::Display> fmt::Display for Cidr<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// `ip=` (`pve-ipv4-config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ipv4Config {
    Dhcp,
    Static(Cidr<Ipv4Addr>),
}

impl FromStr for Ipv4Config {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dhcp" => Ok(Self::Dhcp),
            _ => parse_cidr(s, 32)
                .map(Self::Static)
                .ok_or_else(|| InvalidValue::new("ip", s, "not dhcp or IPv4/CIDR")),
        }
    }
}

impl fmt::Display for Ipv4Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dhcp => f.write_str("dhcp"),
            Self::Static(cidr) => cidr.fmt(f),
        }
    }
}

/// `ip6=` (`pve-ipv6-config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ipv6Config {
    Dhcp,
    /// Stateless autoconfiguration (SLAAC).
    Auto,
    Static(Cidr<Ipv6Addr>),
}

impl FromStr for Ipv6Config {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dhcp" => Ok(Self::Dhcp),
            "auto" => Ok(Self::Auto),
            _ => parse_cidr(s, 128)
                .map(Self::Static)
                .ok_or_else(|| InvalidValue::new("ip6", s, "not dhcp, auto or IPv6/CIDR")),
        }
    }
}

impl fmt::Display for Ipv6Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dhcp => f.write_str("dhcp"),
            Self::Auto => f.write_str("auto"),
            Self::Static(cidr) => cidr.fmt(f),
        }
    }
}

/// The addresses of one interface. A gateway needs an address of its family
/// (the format's `requires`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpConfig {
    pub ip: Option<Ipv4Config>,
    pub gw: Option<Ipv4Addr>,
    pub ip6: Option<Ipv6Config>,
    pub gw6: Option<Ipv6Addr>,
}

impl IpConfig {
    /// IPv4 by DHCP.
    pub fn dhcp() -> Self {
        Self {
            ip: Some(Ipv4Config::Dhcp),
            ..Self::default()
        }
    }

    /// Parses an `ipconfigN` value.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        s.parse()
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl FromStr for IpConfig {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = FORMAT.parse(s)?;
        let err = |reason: String| InvalidValue::new("ipconfig", s, reason);
        let c = IpConfig {
            ip: p.take_with("ip", |v| v.parse().ok()).map_err(err)?,
            gw: p.take_with("gw", |v| v.parse().ok()).map_err(err)?,
            ip6: p.take_with("ip6", |v| v.parse().ok()).map_err(err)?,
            gw6: p.take_with("gw6", |v| v.parse().ok()).map_err(err)?,
        };
        if let Some(key) = p.pairs.keys().next() {
            return Err(err(format!("unknown key {key}")));
        }
        if (c.gw.is_some() && c.ip.is_none()) || (c.gw6.is_some() && c.ip6.is_none()) {
            return Err(err("a gateway needs an address".into()));
        }
        Ok(c)
    }
}

impl fmt::Display for IpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = [
            self.ip.map(|v| format!("ip={v}")),
            self.gw.map(|v| format!("gw={v}")),
            self.ip6.map(|v| format!("ip6={v}")),
            self.gw6.map(|v| format!("gw6={v}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_as_sent() {
        let c = IpConfig::parse("ip=10.0.10.123/24,gw=10.0.10.1").unwrap();
        assert_eq!(c.gw, Some(Ipv4Addr::new(10, 0, 10, 1)));
        assert_eq!(c.to_string(), "ip=10.0.10.123/24,gw=10.0.10.1");
        assert_eq!(IpConfig::dhcp().to_string(), "ip=dhcp");
        let v6 = IpConfig::parse(" ip6=auto , ip=dhcp").unwrap();
        assert_eq!(v6.to_string(), "ip=dhcp,ip6=auto");
        let gw6 = IpConfig::parse("gw6=fd00::1,ip6=fd00:0::5/64").unwrap();
        assert_eq!(gw6.to_string(), "ip6=fd00::5/64,gw6=fd00::1");
        assert!(IpConfig::parse("").unwrap().is_empty());
    }

    #[test]
    fn refuses_what_pve_refuses() {
        for bad in [
            "dhcp",
            "ip=10.0.0.5",
            "ip=10.0.0.5/33",
            "ip=auto",
            "ip6=fd00::5/129",
            "gw=10.0.0.1",
            "ip=dhcp,gw6=fd00::1",
            "ip=dhcp,mtu=1500",
            "ip=10.0.0.5/+4",
        ] {
            assert!(IpConfig::parse(bad).is_err(), "{bad}");
        }
    }
}
