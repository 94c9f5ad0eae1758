//! Where Proxmox may be told to download from: a URL (`download-url`) or
//! an OCI registry (`oci-registry-pull`) runs as the provider's token on a
//! node, inside the management network, so a tenant's spec must not name
//! the node itself, the cloud's metadata service or anything else only the
//! inside reaches (SSRF). The provider config's `downloadPolicy` widens the
//! default; this module decides, purely, for any kind.
//!
//! What is checked here, before anything is sent: the scheme, and the host
//! as written (a literal address in a refused range, a numeric form of
//! one, `localhost`, a single-label name, a node's name, the config's
//! endpoint host). Then, in [`resolve`] (I/O), what a host name resolves to
//! on the provider's side. Not checked: what it resolves to on the node
//! (only Proxmox resolves it there, maybe with other DNS, later), and
//! redirects Proxmox follows.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod resolve;
mod room;
pub use resolve::checked;
pub use room::{Room, room};

use crate::api::provider_config::DownloadPolicy;

/// What is to be downloaded.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// An http(s) URL.
    Url(&'a str),
    /// An OCI image reference (`registry/repository:tag`; without a
    /// registry host, Docker Hub).
    Oci(&'a str),
}

/// Why `field`'s `source` is refused, naming the field and the rule, or
/// `None`. `internal` holds the names the nodes answer to (node names, the
/// config's endpoint host).
pub fn refusal(
    policy: Option<&DownloadPolicy>,
    field: &str,
    source: Source<'_>,
    internal: &[String],
) -> Option<String> {
    let default = DownloadPolicy::default();
    let policy = policy.unwrap_or(&default);
    let host = match source {
        Source::Url(url) => {
            let (scheme, rest) = url.split_once("://")?;
            if scheme.eq_ignore_ascii_case("http") && !policy.allow_http {
                return Some(format!(
                    "{field} {url:?} is plain http:// and the provider config's downloadPolicy.allowHttp is not true: use https://"
                ));
            }
            url_host(rest)
        }
        Source::Oci(reference) => oci_host(reference),
    };
    let Some(host) = host else {
        return Some(format!("{field}: no host can be read from it"));
    };
    if allowed(policy, &host) {
        return None;
    }
    let why = match host.parse::<IpAddr>() {
        Ok(ip) => internal_range(ip).map(|range| format!("the address {ip} is {range}")),
        Err(_) => name_problem(&host, internal),
    }?;
    Some(format!(
        "{field} names host {host}: {why}, which Proxmox would fetch from inside the management network; the provider config's downloadPolicy.allowedHosts does not list it"
    ))
}

/// The host of an http(s) URL, lower case, without user info, port or IPv6
/// brackets.
pub fn host_of_url(url: &str) -> Option<String> {
    url_host(url.split_once("://")?.1)
}

/// The host of `rest` (a URL after `scheme://`), lower case, without
/// user info, port or IPv6 brackets.
fn url_host(rest: &str) -> Option<String> {
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host_of(host_port)
}

/// The registry host of an OCI reference, or `docker.io` when the first
/// part names none (no `.` or `:` and not `localhost`, as Docker reads it).
fn oci_host(reference: &str) -> Option<String> {
    let first = reference.split('/').next()?;
    let names_registry = reference.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost");
    if names_registry {
        host_of(first)
    } else {
        Some("docker.io".to_owned())
    }
}

fn host_of(host_port: &str) -> Option<String> {
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => host_port
            .rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map_or(host_port, |(h, _)| h),
    };
    (!host.is_empty()).then(|| host.trim_end_matches('.').to_ascii_lowercase())
}

fn allowed(policy: &DownloadPolicy, host: &str) -> bool {
    let ip = host.parse::<IpAddr>().ok();
    policy.allowed_hosts.iter().any(|entry| {
        entry.eq_ignore_ascii_case(host)
            || match (ip, entry.split_once('/')) {
                (Some(ip), Some((net, bits))) => in_cidr(ip, net, bits),
                (Some(ip), None) => entry.parse::<IpAddr>().ok() == Some(ip),
                (None, _) => false,
            }
    })
}

fn in_cidr(ip: IpAddr, net: &str, bits: &str) -> bool {
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return false;
    };
    match (unmapped(ip), unmapped(net)) {
        (IpAddr::V4(ip), IpAddr::V4(net)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// The refused range `ip` is in, or `None` for a public address.
fn internal_range(ip: IpAddr) -> Option<&'static str> {
    match unmapped(ip) {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address (the node itself)")
    } else if ip.is_link_local() {
        Some("link-local (169.254.0.0/16: cloud metadata services)")
    } else if ip.is_private() {
        Some("private (RFC 1918)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared address space (100.64.0.0/10)")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified (0.0.0.0/8 reaches the node itself)")
    } else if ip.is_broadcast() || ip.is_multicast() || a >= 240 {
        Some("not a unicast address")
    } else {
        None
    }
}

fn v6_range(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() || ip.is_unspecified() {
        Some("a loopback or unspecified address (the node itself)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local (fe80::/10)")
    } else if first & 0xfe00 == 0xfc00 {
        Some("unique-local (fc00::/7)")
    } else if ip.is_multicast() {
        Some("not a unicast address")
    } else {
        None
    }
}

/// Why a host name (not an address) is refused, or `None`.
fn name_problem(host: &str, internal: &[String]) -> Option<String> {
    let last = host.rsplit('.').next().unwrap_or(host);
    if host == "localhost" || host.ends_with(".localhost") {
        return Some("localhost (the node itself)".to_owned());
    }
    if !last.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Some(
            "a numeric form of an address (resolvers read 2130706433 or 0x7f.1 as 127.0.0.1)"
                .to_owned(),
        );
    }
    if !host.contains('.') {
        return Some(
            "a single-label name (resolved by the node's search domains, inside)".to_owned(),
        );
    }
    internal
        .iter()
        .find(|n| {
            let n = n.to_ascii_lowercase();
            host == n || host.strip_prefix(&n).is_some_and(|r| r.starts_with('.'))
        })
        .map(|n| format!("the name of a Proxmox node or of the config's endpoint ({n})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow_http: bool, hosts: &[&str]) -> DownloadPolicy {
        DownloadPolicy {
            allow_http,
            allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
        }
    }

    #[test]
    fn the_default_allows_public_https_hosts_and_registries_only() {
        let internal = vec!["pve1".to_owned(), "pve.example.com".to_owned()];
        // (source, None = allowed | Some(part of the refusal))
        let cases: Vec<(Source, Option<&str>)> = vec![
            (
                Source::Url("https://cloud-images.ubuntu.com/noble.img"),
                None,
            ),
            (Source::Url("https://images.example:8443/a.qcow2"), None),
            (Source::Url("https://8.8.8.8/a.img"), None),
            (
                Source::Url("http://images.example/a.img"),
                Some("plain http://"),
            ),
            (
                Source::Url("https://169.254.169.254/latest/meta-data/iam/security-credentials/x"),
                Some("link-local"),
            ),
            (
                Source::Url("https://127.0.0.1:8006/api2/json/access/users"),
                Some("loopback"),
            ),
            (
                Source::Url("https://localhost:9100/metrics"),
                Some("localhost"),
            ),
            (
                Source::Url("https://10.0.0.1:2375/containers/json"),
                Some("private"),
            ),
            (Source::Url("https://user@192.168.1.5/x"), Some("private")),
            (Source::Url("https://[::1]:8006/"), Some("loopback")),
            (Source::Url("https://[fd00::5]/x"), Some("unique-local")),
            (Source::Url("https://[fe80::1]/x"), Some("link-local")),
            (
                Source::Url("https://[::ffff:127.0.0.1]/x"),
                Some("loopback"),
            ),
            (Source::Url("https://2130706433/x"), Some("numeric form")),
            (Source::Url("https://0x7f.1/x"), Some("numeric form")),
            (
                Source::Url("https://100.64.1.1/x"),
                Some("shared address space"),
            ),
            (Source::Url("https://0.0.0.0:8006/"), Some("unspecified")),
            (Source::Url("https://intranet/x"), Some("single-label")),
            (Source::Url("https://pve1.lan/x"), Some("Proxmox node")),
            (
                Source::Url("https://PVE.example.com./x"),
                Some("Proxmox node"),
            ),
            (Source::Oci("docker.io/library/alpine:3.21"), None),
            (Source::Oci("library/alpine:3.21"), None),
            (Source::Oci("alpine:3.21"), None),
            (
                Source::Oci("127.0.0.1:5000/team-a/alpine:3.21"),
                Some("loopback"),
            ),
            (Source::Oci("localhost/alpine:3.21"), Some("localhost")),
            (Source::Oci("10.0.0.1:5000/alpine:3.21"), Some("private")),
        ];
        for (source, want) in cases {
            let got = refusal(None, "spec.forProvider.source.url", source, &internal);
            match want {
                None => assert_eq!(got, None, "{source:?}"),
                Some(part) => assert!(
                    got.as_deref().is_some_and(
                        |g| g.contains(part) && g.contains("spec.forProvider.source.url")
                    ),
                    "{source:?}: {got:?}"
                ),
            }
        }
    }

    #[test]
    fn the_policy_allows_named_hosts_cidrs_and_http() {
        let p = policy(true, &["127.0.0.0/8", "mirror.lan", "fd00::/8", "10.1.2.3"]);
        for source in [
            Source::Url("http://127.0.0.1:8080/a.img"),
            Source::Url("https://MIRROR.lan/a.img"),
            Source::Url("https://[fd00::9]/a.img"),
            Source::Url("https://10.1.2.3/a.img"),
            Source::Oci("127.0.0.1:5000/alpine:3.21"),
        ] {
            assert_eq!(refusal(Some(&p), "f", source, &[]), None, "{source:?}");
        }
        for source in [
            Source::Url("https://10.1.2.4/a.img"),
            Source::Url("https://169.254.169.254/"),
        ] {
            assert!(refusal(Some(&p), "f", source, &[]).is_some(), "{source:?}");
        }
        let https_only = policy(false, &["127.0.0.0/8"]);
        assert!(
            refusal(
                Some(&https_only),
                "f",
                Source::Url("http://127.0.0.1/a"),
                &[]
            )
            .is_some_and(|w| w.contains("downloadPolicy.allowHttp"))
        );
    }
}
