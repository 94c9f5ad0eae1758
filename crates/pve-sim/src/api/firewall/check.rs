//! pve-firewall's checks of names, addresses, protocols and ports
//! (`PVE::Firewall`: `verify_rule`, `parse_address_list`,
//! `parse_ip_or_cidr`, `parse_port_name_number_or_range`).

use std::net::IpAddr;

use crate::http::ApiError;

/// `$security_group_name_pattern`, `$ipset_name_pattern`,
/// `$ip_alias_pattern`: a letter, then letters, digits, `-` and `_`.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The IP version of an address or CIDR (`parse_ip_or_cidr`).
pub fn ip_or_cidr(text: &str) -> Result<u8, String> {
    let (addr, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("invalid IP address: {text}"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    if let Some(p) = prefix {
        match p.parse::<u8>() {
            Ok(n) if n <= max && !p.starts_with('+') => {}
            _ => return Err(format!("invalid IP address: {text}")),
        }
    }
    Ok(if ip.is_ipv4() { 4 } else { 6 })
}

/// An IP set entry as PVE stores it (`clean_cidr`, then
/// `parse_ip_or_cidr`): host bits of a network cleared, IPv6 compressed,
/// a `/32` (`/128`) dropped.
pub fn clean_cidr(text: &str) -> Result<String, String> {
    const BAD: &str = "value does not look like a valid IP address or CIDR network";
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u32>().map_err(|_| BAD.to_owned())?)),
        None => (text, None),
    };
    let ip: IpAddr = addr.parse().map_err(|_| BAD.to_owned())?;
    Ok(match (ip, len) {
        (IpAddr::V4(_), Some(n)) if n > 32 => return Err(BAD.into()),
        (IpAddr::V6(_), Some(n)) if n > 128 => return Err(BAD.into()),
        (_, None) | (IpAddr::V4(_), Some(32)) | (IpAddr::V6(_), Some(128)) => ip.to_string(),
        (IpAddr::V4(v4), Some(n)) => {
            let mask = u32::MAX.checked_shl(32 - n).unwrap_or(0);
            format!("{}/{n}", std::net::Ipv4Addr::from(u32::from(v4) & mask))
        }
        (IpAddr::V6(v6), Some(n)) => {
            let mask = u128::MAX.checked_shl(128 - n).unwrap_or(0);
            format!("{}/{n}", std::net::Ipv6Addr::from(u128::from(v6) & mask))
        }
    })
}

/// `parse_address_list`: an IP set reference (`+name`), an alias name, or
/// a comma list of addresses and CIDRs of one IP version (or one range).
/// `Ok(None)`: a reference, whose version is not known here.
pub fn address_list(text: &str) -> Result<Option<u8>, String> {
    if let Some(set) = text.strip_prefix('+') {
        if text.len() > 65 {
            return Err("ipset name too long".into());
        }
        let name = set
            .strip_prefix("dc/")
            .or_else(|| set.strip_prefix("guest/"))
            .unwrap_or(set);
        if !is_name(name) {
            return Err(format!("invalid ipset name '{text}'"));
        }
        return Ok(None);
    }
    let alias = text
        .strip_prefix("dc/")
        .or_else(|| text.strip_prefix("guest/"))
        .unwrap_or(text);
    if is_name(alias) {
        if text.len() > 64 {
            return Err("alias name too long".into());
        }
        return Ok(None);
    }
    let elements: Vec<&str> = text.split(',').collect();
    if elements.iter().any(|e| e.is_empty()) {
        return Err("extraneous commas in list".into());
    }
    let mut version = None;
    let mut range = false;
    for elem in &elements {
        let v = match elem.split_once('-') {
            Some((a, b)) => {
                range = true;
                let (va, vb) = (ip_or_cidr(a)?, ip_or_cidr(b)?);
                if va != vb {
                    return Err(format!("invalid IP address: {elem}"));
                }
                va
            }
            None => ip_or_cidr(elem)?,
        };
        if version.is_some_and(|old| old != v) {
            return Err(format!(
                "detected mixed ipv4/ipv6 addresses in address list '{text}'"
            ));
        }
        version = Some(v);
    }
    if range && elements.len() > 1 {
        return Err("you can't use a range in a list".into());
    }
    Ok(version)
}

/// The protocols `/etc/protocols` names that rules use, and whether they
/// have ports (`$PROTOCOLS_WITH_PORTS`).
const PROTOCOLS: &[(&str, u8, bool)] = &[
    ("tcp", 6, true),
    ("udp", 17, true),
    ("udplite", 136, true),
    ("sctp", 132, true),
    ("dccp", 33, true),
    ("icmp", 1, false),
    ("icmpv6", 58, false),
    ("ipv6-icmp", 58, false),
    ("igmp", 2, false),
    ("gre", 47, false),
    ("esp", 50, false),
    ("ah", 51, false),
    ("ospf", 89, false),
    ("vrrp", 112, false),
    ("pim", 103, false),
    ("l2tp", 115, false),
];

/// `pve_fw_verify_protocol_spec`: a protocol name or number; whether it
/// has ports.
pub fn protocol(proto: &str) -> Result<bool, String> {
    if let Ok(n) = proto.parse::<u8>() {
        return Ok(PROTOCOLS.iter().any(|(_, num, ports)| *num == n && *ports));
    }
    PROTOCOLS
        .iter()
        .find(|(name, _, _)| *name == proto)
        .map(|(_, _, ports)| *ports)
        .ok_or_else(|| format!("unknown protocol '{proto}'"))
}

/// Whether the protocol is an ICMP variant.
pub fn is_icmp(proto: &str) -> bool {
    matches!(proto, "icmp" | "icmpv6" | "ipv6-icmp" | "1" | "58")
}

/// `parse_port_name_number_or_range`: comma list of ports (1-65535, or a
/// service name) and ranges `a:b`.
pub fn ports(text: &str) -> Result<(), String> {
    for elem in text.split(',') {
        let parts: Vec<&str> = elem.split(':').collect();
        if parts.len() > 2 {
            return Err(format!("invalid port '{elem}'"));
        }
        for part in &parts {
            let named = part.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && part.starts_with(|c: char| c.is_ascii_alphabetic());
            match part.parse::<u32>() {
                Ok(n) if (1..=65535).contains(&n) => {}
                Ok(_) => return Err(format!("invalid port '{part}'")),
                Err(_) if named => {}
                Err(_) => return Err(format!("invalid port '{part}'")),
            }
        }
    }
    Ok(())
}

/// `assert_if_modified`: a digest sent with a write must be the current
/// one.
pub fn digest(current: &str, sent: Option<&str>) -> Result<(), ApiError> {
    match sent {
        Some(d) if d != current => Err(ApiError::internal(
            "detected modified configuration - file changed by other user? Try again.",
        )),
        Some(_) | None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_as_pve_parses_them() {
        let cases: &[(&str, Result<Option<u8>, ()>)] = &[
            ("10.0.0.0/8", Ok(Some(4))),
            ("10.0.0.1,10.0.0.2", Ok(Some(4))),
            ("fd00::/64", Ok(Some(6))),
            ("10.0.0.1-10.0.0.9", Ok(Some(4))),
            ("+web-servers", Ok(None)),
            ("+dc/web", Ok(None)),
            ("myalias", Ok(None)),
            ("10.0.0.1,fd00::1", Err(())),
            ("10.0.0.0/33", Err(())),
            ("10.0.0.1,,10.0.0.2", Err(())),
            ("10.0.0.1-10.0.0.9,10.0.0.20", Err(())),
            ("+1bad", Err(())),
            ("300.1.1.1", Err(())),
        ];
        for (text, want) in cases {
            assert_eq!(address_list(text).map_err(|_| ()), *want, "{text}");
        }
    }

    #[test]
    fn protocols_and_ports() {
        assert_eq!(protocol("tcp"), Ok(true));
        assert_eq!(protocol("icmp"), Ok(false));
        assert_eq!(protocol("6"), Ok(true));
        assert!(protocol("nosuch").is_err());
        assert!(ports("22,80:90,ssh").is_ok());
        assert!(ports("0").is_err());
        assert!(ports("70000").is_err());
        assert!(ports("1:2:3").is_err());
    }

    #[test]
    fn entries_are_stored_clean() {
        assert_eq!(clean_cidr("10.1.2.3/8").as_deref(), Ok("10.0.0.0/8"));
        assert_eq!(clean_cidr("10.1.2.3/32").as_deref(), Ok("10.1.2.3"));
        assert_eq!(clean_cidr("FD00:0:0::1/64").as_deref(), Ok("fd00::/64"));
        assert_eq!(clean_cidr("10.0.0.0/0").as_deref(), Ok("0.0.0.0/0"));
        assert!(clean_cidr("10.0.0.0/40").is_err());
        assert!(clean_cidr("web").is_err());
    }

    #[test]
    fn names() {
        assert!(is_name("web-1_x"));
        assert!(!is_name("1web"));
        assert!(!is_name("a"));
        assert!(!is_name("a.b"));
    }
}
