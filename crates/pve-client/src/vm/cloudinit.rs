//! Cloud-init values: `ipconfigN`, `sshkeys`.

use std::fmt;

use percent_encoding::percent_decode_str;

use crate::form::strict_percent_encode;
use crate::vm::propstring;

/// `ipconfigN: ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpConfig {
    /// `IPv4/CIDR` or `dhcp`.
    pub ip: Option<String>,
    pub gw: Option<String>,
    /// `IPv6/CIDR`, `dhcp` or `auto`.
    pub ip6: Option<String>,
    pub gw6: Option<String>,
}

impl IpConfig {
    /// IPv4 by DHCP.
    pub fn dhcp() -> Self {
        Self {
            ip: Some("dhcp".to_owned()),
            ..Self::default()
        }
    }

    /// Parses an `ipconfigN` value; unknown keys are ignored.
    pub fn parse(s: &str) -> Self {
        let (_, pairs) = propstring::split(s);
        let mut c = IpConfig::default();
        for (k, v) in pairs {
            match k.as_str() {
                "ip" => c.ip = Some(v),
                "gw" => c.gw = Some(v),
                "ip6" => c.ip6 = Some(v),
                "gw6" => c.gw6 = Some(v),
                _ => {}
            }
        }
        c
    }
}

impl fmt::Display for IpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = [
            ("ip", &self.ip),
            ("gw", &self.gw),
            ("ip6", &self.ip6),
            ("gw6", &self.gw6),
        ]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
        .collect();
        f.write_str(&parts.join(","))
    }
}

/// Decodes `sshkeys` as the config returns it (still percent-encoded) into
/// one key per entry, trimmed, empty lines dropped.
pub fn decode_sshkeys(raw: &str) -> Vec<String> {
    let decoded = percent_decode_str(raw).decode_utf8_lossy();
    decoded
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Encodes keys for the `sshkeys` parameter: joined by newlines and
/// strictly percent-encoded (space → `%20`, never `+`). Form encoding then
/// happens on top, as for every parameter.
pub fn encode_sshkeys(keys: &[String]) -> String {
    strict_percent_encode(&keys.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipconfig_table() {
        let c = IpConfig::parse("ip=10.0.10.123/24,gw=10.0.10.1");
        assert_eq!(c.ip.as_deref(), Some("10.0.10.123/24"));
        assert_eq!(c.gw.as_deref(), Some("10.0.10.1"));
        assert_eq!(c.to_string(), "ip=10.0.10.123/24,gw=10.0.10.1");
        assert_eq!(IpConfig::dhcp().to_string(), "ip=dhcp");
        let v6 = IpConfig::parse(" ip6=auto , ip=dhcp");
        assert_eq!(v6.to_string(), "ip=dhcp,ip6=auto");
        assert_eq!(IpConfig::parse(&v6.to_string()), v6);
    }

    #[test]
    fn sshkeys_round_trip() {
        let keys = vec![
            "ssh-ed25519 AAAAC3Nza+C1lZD/I1NTE5= alice@laptop".to_owned(),
            "ssh-rsa AAAAB3NzaC1yc2E= bob@host".to_owned(),
        ];
        let wire = encode_sshkeys(&keys);
        assert!(!wire.contains(' ') && !wire.contains('+'), "{wire}");
        assert!(wire.contains("%20") && wire.contains("%2B") && wire.contains("%0A"));
        assert_eq!(decode_sshkeys(&wire), keys);
        // Odd spacing and CRLF in what the server returns.
        assert_eq!(
            decode_sshkeys("%20ssh-ed25519%20AAAA%20a%40b%0D%0A%0A"),
            ["ssh-ed25519 AAAA a@b"]
        );
    }
}
