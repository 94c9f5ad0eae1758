//! What a host name resolves to, on the provider's side: a name that
//! passed the check as written but resolves to an address the policy
//! refuses (a loopback, link-local, private or unique-local address, or
//! the address of the config's endpoint) is refused as that address
//! written literally would be. Proxmox resolves the name again when it
//! downloads, with its own DNS and later: an answer that differs or
//! changes in between is only Proxmox's (or the node's egress firewall's)
//! to stop.

use std::net::IpAddr;
use std::time::Duration;

use crate::reconcile::runtime::metrics::Metrics;

use super::{DownloadPolicy, Source, allowed, internal_range, oci_host, refusal, url_host};

/// How long a lookup may take: a resolver that does not answer leaves the
/// name to Proxmox rather than holding the pass.
const LOOKUP_FOR: Duration = Duration::from_secs(2);

/// [`refusal`], then, for a host name that passes it and that the policy
/// does not name, what it resolves to. `internal` as for [`refusal`];
/// `endpoint` is the config's endpoint host, whose addresses (literal or
/// resolved) are a node's own. Node names are not resolved: the provider
/// rarely can, and a node's address in a refused range is refused anyway.
pub async fn checked(
    policy: Option<&DownloadPolicy>,
    field: &str,
    source: Source<'_>,
    internal: &[String],
    endpoint: &str,
    metrics: &Metrics,
) -> Option<String> {
    if let Some(why) = refusal(policy, field, source, internal) {
        return Some(why);
    }
    let default = DownloadPolicy::default();
    let policy = policy.unwrap_or(&default);
    let host = match source {
        Source::Url(url) => url_host(url.split_once("://")?.1),
        Source::Oci(reference) => oci_host(reference),
    }?;
    if host.parse::<IpAddr>().is_ok() || allowed(policy, &host) {
        return None;
    }
    metrics.download_host_looked_up();
    let addresses = lookup(&host).await;
    let own = if addresses.is_empty() {
        vec![]
    } else {
        metrics.download_host_looked_up();
        lookup(endpoint).await
    };
    resolved_refusal(policy, field, &host, &addresses, &own)
}

/// Why `host`, resolving to `addresses`, is refused (naming `field` and
/// the rule), or `None`: an address in a refused range or among `own`
/// (the nodes' addresses), unless the policy allows that address.
pub fn resolved_refusal(
    policy: &DownloadPolicy,
    field: &str,
    host: &str,
    addresses: &[IpAddr],
    own: &[IpAddr],
) -> Option<String> {
    addresses
        .iter()
        .filter(|ip| !allowed(policy, &ip.to_string()))
        .find_map(|ip| {
            let why = match internal_range(*ip) {
                Some(range) => format!("{ip} is {range}"),
                None if own.contains(ip) => {
                    format!("{ip} is the address of a Proxmox node or of the config's endpoint")
                }
                None => return None,
            };
            Some(format!(
                "{field} names host {host}, which resolves (on the provider's side) to {why}, which Proxmox would fetch from inside the management network; the provider config's downloadPolicy.allowedHosts does not list it"
            ))
        })
}

/// The addresses `host` resolves to here; none if it does not resolve in
/// time (then only Proxmox resolves it).
async fn lookup(host: &str) -> Vec<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return vec![ip];
    }
    match tokio::time::timeout(LOOKUP_FOR, tokio::net::lookup_host((host, 443))).await {
        Ok(Ok(found)) => found.map(|a| a.ip()).collect(),
        Ok(Err(_)) | Err(_) => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_name_resolving_to_a_refused_address_is_refused_as_the_address() {
        let default = DownloadPolicy::default();
        let allow = |hosts: &[&str]| DownloadPolicy {
            allow_http: false,
            allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
        };
        let own = [ip("203.0.113.7")];
        // (policy, addresses, None = allowed | Some(part of the refusal))
        let rows: Vec<(&DownloadPolicy, Vec<IpAddr>, Option<&str>)> = vec![
            (&default, vec![ip("93.184.215.14")], None),
            (&default, vec![], None),
            (
                &default,
                vec![ip("127.0.0.1")],
                Some("127.0.0.1 is a loopback"),
            ),
            (
                &default,
                vec![ip("93.184.215.14"), ip("169.254.169.254")],
                Some("169.254.169.254 is link-local"),
            ),
            (&default, vec![ip("10.0.0.1")], Some("private")),
            (&default, vec![ip("fd00::1")], Some("unique-local")),
            (&default, vec![ip("::ffff:127.0.0.1")], Some("loopback")),
            (
                &default,
                vec![ip("203.0.113.7")],
                Some("the address of a Proxmox node"),
            ),
        ];
        let allowed_cidr = allow(&["10.0.0.0/8"]);
        let mut rows = rows;
        rows.push((&allowed_cidr, vec![ip("10.0.0.1")], None));
        rows.push((
            &allowed_cidr,
            vec![ip("10.0.0.1"), ip("127.0.0.1")],
            Some("loopback"),
        ));
        for (policy, addresses, want) in rows {
            let got = resolved_refusal(policy, "f.url", "mirror.example", &addresses, &own);
            match want {
                None => assert_eq!(got, None, "{addresses:?}"),
                Some(part) => assert!(
                    got.as_deref().is_some_and(|g| g.contains(part)
                        && g.contains("f.url names host mirror.example, which resolves")),
                    "{addresses:?}: {got:?}"
                ),
            }
        }
    }

    /// The lookup [`checked`] uses, with the one name every system resolves
    /// without a network (`localhost`, refused as written before it gets
    /// here) and a literal (not looked up).
    #[tokio::test]
    async fn the_lookup_finds_loopback_for_localhost() {
        let found = lookup("localhost").await;
        assert!(
            !found.is_empty() && found.iter().all(IpAddr::is_loopback),
            "{found:?}"
        );
        assert_eq!(lookup("127.0.0.1").await, vec![ip("127.0.0.1")]);
    }

    #[tokio::test]
    async fn an_allowed_name_is_not_resolved_and_a_literal_goes_through_the_ranges() {
        let p = DownloadPolicy {
            allow_http: false,
            allowed_hosts: vec!["localhost".to_owned()],
        };
        let metrics = Metrics::default();
        let url = |u| Source::Url(u);
        let allowed = checked(
            Some(&p),
            "f",
            url("https://localhost/a.img"),
            &[],
            "",
            &metrics,
        );
        assert_eq!(allowed.await, None);
        let literal = checked(None, "f", url("https://127.0.0.1/a.img"), &[], "", &metrics);
        assert!(literal.await.is_some_and(|w| w.contains("loopback")));
        assert!(
            metrics
                .encode()
                .contains("proxmox_provider_download_host_lookups_total 0"),
            "neither was looked up"
        );
        // A name the policy does not list is, and counted.
        let named = checked(None, "f", url("https://localhost/a.img"), &[], "", &metrics);
        assert!(named.await.is_some(), "localhost is refused as written");
        let other = checked(
            None,
            "f",
            url("https://mirror.invalid/a.img"),
            &[],
            "",
            &metrics,
        );
        let _ = other.await;
        assert!(
            metrics
                .encode()
                .contains("proxmox_provider_download_host_lookups_total 1"),
            "{}",
            metrics.encode()
        );
    }
}
