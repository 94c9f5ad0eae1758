//! Cloud-init values besides addresses: `sshkeys` and `nameserver`.
//! (`ciuser`, `searchdomain` are plain strings; `cipassword` a
//! [`crate::Secret`]; addresses are [`crate::vm::IpConfig`].)

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use percent_encoding::percent_decode_str;

use crate::form::strict_percent_encode;
use crate::vm::value::{InvalidValue, is_dns_name, split_list};

/// `sshkeys`: public keys, one per line, stored URL-encoded.
///
/// PVE's format is `urlencoded` (`[-%a-zA-Z0-9_.!~*'()]*`) and qemu-server
/// decodes it with `uri_unescape`; what a client sends is stored as is.
/// [`SshKeys`] writes what `uri_escape` writes (everything but
/// `A-Za-z0-9-._~` escaped, a space as `%20`, never `+`). Keys compare by
/// their text with runs of spaces collapsed, so a key re-typed with other
/// spacing is the same key.
#[derive(Clone, Debug, Default)]
pub struct SshKeys(Vec<String>);

impl SshKeys {
    /// The keys, one per line of each item; blank lines dropped.
    pub fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(keys: I) -> Self {
        Self(
            keys.into_iter()
                .flat_map(|k| {
                    k.as_ref()
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect(),
        )
    }

    /// Parses an `sshkeys` value as the config shows it.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        s.parse()
    }

    /// The keys.
    pub fn keys(&self) -> &[String] {
        &self.0
    }

    /// The keys with runs of whitespace collapsed: the form to compare.
    fn normalized(&self) -> impl Iterator<Item = String> + '_ {
        self.0
            .iter()
            .map(|k| k.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

impl PartialEq for SshKeys {
    fn eq(&self, other: &Self) -> bool {
        self.normalized().eq(other.normalized())
    }
}

impl Eq for SshKeys {}

impl FromStr for SshKeys {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let urlencoded = s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-%_.!~*'()".contains(&b));
        if !urlencoded {
            return Err(InvalidValue::new("sshkeys", s, "not URL-encoded"));
        }
        let text = percent_decode_str(s)
            .decode_utf8()
            .map_err(|_| InvalidValue::new("sshkeys", s, "not UTF-8 once decoded"))?;
        Ok(Self::new([text]))
    }
}

impl fmt::Display for SshKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&strict_percent_encode(&self.0.join("\n")))
    }
}

/// `nameserver` (`address-list`): IP addresses (or DNS names), written
/// space-separated; PVE reads any of space, `,` and `;` between them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Nameservers(Vec<String>);

impl Nameservers {
    /// The servers, in order.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(servers: I) -> Self {
        Self(servers.into_iter().map(Into::into).collect())
    }

    /// Parses a `nameserver` value.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        s.parse()
    }

    /// The servers.
    pub fn servers(&self) -> &[String] {
        &self.0
    }
}

impl FromStr for Nameservers {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let servers = split_list(s);
        match servers
            .iter()
            .find(|a| a.parse::<IpAddr>().is_err() && !is_dns_name(a))
        {
            Some(bad) => Err(InvalidValue::new(
                "nameserver",
                s,
                format!("{bad:?} is not an address"),
            )),
            None => Ok(Self(servers)),
        }
    }
}

impl fmt::Display for Nameservers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_keys_are_escaped_as_uri_escape_does() {
        let keys = SshKeys::new([
            "ssh-ed25519 AAAAC3Nza+C1lZD/I1NTE5= alice@laptop",
            "ssh-rsa AAAAB3NzaC1yc2E= bob@host",
        ]);
        let wire = keys.to_string();
        assert_eq!(
            wire,
            "ssh-ed25519%20AAAAC3Nza%2BC1lZD%2FI1NTE5%3D%20alice%40laptop%0A\
             ssh-rsa%20AAAAB3NzaC1yc2E%3D%20bob%40host"
        );
        assert_eq!(SshKeys::parse(&wire), Ok(keys));
        // Odd spacing and CRLF in what is stored.
        let odd = SshKeys::parse("%20ssh-ed25519%20%20AAAA%20a%40b%0D%0A%0A").unwrap();
        assert_eq!(odd.keys(), ["ssh-ed25519  AAAA a@b"]);
        assert_eq!(odd, SshKeys::new(["ssh-ed25519 AAAA a@b"]));
        assert_ne!(odd, SshKeys::new(["ssh-ed25519 AAAA a@c"]));
        assert!(SshKeys::parse("ssh-ed25519 AAAA").is_err(), "a raw space");
        assert!(SshKeys::parse("%FF").is_err());
    }

    #[test]
    fn nameservers_read_any_separator_and_write_spaces() {
        let n = Nameservers::parse("1.1.1.1,9.9.9.9; fd00::53").unwrap();
        assert_eq!(n.servers(), ["1.1.1.1", "9.9.9.9", "fd00::53"]);
        assert_eq!(n.to_string(), "1.1.1.1 9.9.9.9 fd00::53");
        assert_ne!(n, Nameservers::new(["9.9.9.9", "1.1.1.1", "fd00::53"]));
        assert!(Nameservers::parse("1.1.1.1 -bad").is_err());
    }
}
