//! How an observed config value is compared with the wanted one. Proxmox
//! does not echo everything back as written: tag order and case, MAC
//! addresses it generated, URL-encoded SSH keys, `cputype=` prefixes,
//! defaults it leaves out.

use std::collections::{BTreeMap, BTreeSet};

use percent_encoding::percent_decode_str;

use super::owner;

/// How an observed value is compared with the wanted one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Cmp {
    /// Equal after trimming.
    Text,
    /// Equal numbers; an absent key means `default`.
    Number(u64),
    /// Equal booleans (`1`/`0`); an absent key means `default`.
    Flag(bool),
    /// The agent option: `1`, `0` or `enabled=1,...`.
    Agent,
    /// The CPU model: first item, without a `cputype=` prefix.
    CpuType,
    /// Tags: same set, ignoring case and order.
    Tags,
    /// The description: the user's part must match (the marker is checked
    /// by ownership).
    Description,
    /// A network device; the MAC only counts when declared.
    Net {
        /// Whether the spec declares the MAC.
        mac: bool,
    },
    /// `k=v,k=v` lists compared as maps (ipconfig).
    KeyValues,
    /// Lists separated by space, `,` or `;` (nameserver).
    List,
    /// URL-encoded SSH keys, compared key by key.
    SshKeys,
}

/// One managed config key and its wanted value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Want {
    pub key: String,
    pub value: String,
    pub cmp: Cmp,
}

impl Want {
    pub fn new(key: impl Into<String>, value: impl Into<String>, cmp: Cmp) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            cmp,
        }
    }

    /// Whether `observed` (absent: `None`) already says what is wanted.
    pub fn matches(&self, observed: Option<&str>) -> bool {
        let want = self.value.as_str();
        match (&self.cmp, observed) {
            (Cmp::Number(default), None) => want.parse() == Ok(*default),
            (Cmp::Flag(default), None) => flag(want) == *default,
            (Cmp::Description, None) => owner::user_part(want).is_empty(),
            (_, None) => false,
            (Cmp::Text, Some(have)) => have.trim() == want.trim(),
            (Cmp::Number(_), Some(have)) => have.trim().parse::<u64>() == want.parse(),
            (Cmp::Flag(_), Some(have)) => flag(have) == flag(want),
            (Cmp::Agent, Some(have)) => agent_enabled(have) == flag(want),
            (Cmp::CpuType, Some(have)) => cpu_type(have) == want,
            (Cmp::Tags, Some(have)) => tag_set(have) == tag_set(want),
            (Cmp::Description, Some(have)) => owner::user_part(have) == owner::user_part(want),
            (Cmp::Net { mac }, Some(have)) => Net::parse(have).same_as(&Net::parse(want), *mac),
            (Cmp::KeyValues, Some(have)) => key_values(have) == key_values(want),
            (Cmp::List, Some(have)) => list(have) == list(want),
            (Cmp::SshKeys, Some(have)) => ssh_key_lines(have) == ssh_key_lines(want),
        }
    }

    /// The value to write, keeping what Proxmox chose and the spec leaves
    /// open (a generated MAC address).
    pub fn value_given(&self, observed: Option<&str>) -> String {
        match (&self.cmp, observed) {
            (Cmp::Net { mac: false }, Some(have)) => match Net::parse(have).mac {
                Some(mac) => with_mac(&self.value, &mac),
                None => self.value.clone(),
            },
            _ => self.value.clone(),
        }
    }
}

fn flag(v: &str) -> bool {
    matches!(v.trim(), "1" | "on" | "yes" | "true")
}

pub(super) fn agent_enabled(v: &str) -> bool {
    let first = v.split(',').next().unwrap_or_default();
    match first.split_once('=') {
        Some(("enabled", value)) => flag(value),
        Some(_) => false,
        None => flag(first),
    }
}

fn cpu_type(v: &str) -> &str {
    let first = v.split(',').next().unwrap_or_default().trim();
    first.strip_prefix("cputype=").unwrap_or(first)
}

fn tag_set(v: &str) -> BTreeSet<String> {
    v.split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn key_values(v: &str) -> BTreeMap<String, String> {
    v.split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn list(v: &str) -> Vec<&str> {
    v.split([' ', ',', ';']).filter(|s| !s.is_empty()).collect()
}

fn ssh_key_lines(encoded: &str) -> Vec<String> {
    percent_decode_str(encoded)
        .decode_utf8_lossy()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect()
}

/// A `net<n>` value, parsed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Net {
    model: String,
    mac: Option<String>,
    bridge: Option<String>,
    tag: Option<String>,
    firewall: bool,
}

impl Net {
    fn parse(v: &str) -> Self {
        let mut net = Net::default();
        for (i, item) in v.split(',').enumerate() {
            let (k, val) = item.split_once('=').unwrap_or((item, ""));
            match k {
                "bridge" => net.bridge = Some(val.to_owned()),
                "tag" => net.tag = Some(val.to_owned()),
                "firewall" => net.firewall = flag(val),
                "macaddr" => net.mac = Some(val.to_uppercase()),
                _ if i == 0 => {
                    net.model = k.to_owned();
                    net.mac = (!val.is_empty()).then(|| val.to_uppercase());
                }
                _ => {}
            }
        }
        net
    }

    fn same_as(&self, want: &Net, compare_mac: bool) -> bool {
        self.model == want.model
            && self.bridge == want.bridge
            && self.tag == want.tag
            && self.firewall == want.firewall
            && (!compare_mac || self.mac == want.mac)
    }
}

fn with_mac(value: &str, mac: &str) -> String {
    match value.split_once(',') {
        Some((model, rest)) => format!("{}={mac},{rest}", model.split('=').next().unwrap_or(model)),
        None => format!("{value}={mac}"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::render::ssh_keys_value;
    use super::*;

    fn want(value: &str, cmp: Cmp) -> Want {
        Want::new("k", value, cmp)
    }

    #[test]
    fn comparisons_normalise_what_proxmox_echoes() {
        let keys = ssh_keys_value(&["ssh-ed25519 AAAA a@b".into(), "ssh-rsa BBBB+/= c".into()]);
        // (case, wanted, observed, same?)
        let cases: Vec<(&str, Want, Option<&str>, bool)> = vec![
            (
                "tags order and case",
                want("web;Prod", Cmp::Tags),
                Some("prod;web"),
                true,
            ),
            ("tags differ", want("web", Cmp::Tags), Some("web;db"), false),
            ("cores default", want("1", Cmp::Number(1)), None, true),
            ("cores differ", want("2", Cmp::Number(1)), Some("1"), false),
            (
                "onboot absent means off",
                want("0", Cmp::Flag(false)),
                None,
                true,
            ),
            (
                "agent with options",
                want("1", Cmp::Agent),
                Some("enabled=1,fstrim_cloned_disks=1"),
                true,
            ),
            ("agent plain", want("1", Cmp::Agent), Some("0"), false),
            (
                "cpu with flags",
                want("host", Cmp::CpuType),
                Some("cputype=host,flags=+aes"),
                true,
            ),
            (
                "generated mac ignored",
                want("virtio,bridge=vmbr0,tag=10", Cmp::Net { mac: false }),
                Some("virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10"),
                true,
            ),
            (
                "declared mac compared",
                want(
                    "virtio=BC:24:11:00:00:02,bridge=vmbr0",
                    Cmp::Net { mac: true },
                ),
                Some("virtio=bc:24:11:00:00:01,bridge=vmbr0"),
                false,
            ),
            (
                "bridge differs",
                want("virtio,bridge=vmbr1", Cmp::Net { mac: false }),
                Some("virtio=BC:24:11:00:00:01,bridge=vmbr0"),
                false,
            ),
            (
                "ipconfig order",
                want("ip=10.0.0.5/24,gw=10.0.0.1", Cmp::KeyValues),
                Some("gw=10.0.0.1,ip=10.0.0.5/24"),
                true,
            ),
            (
                "nameservers",
                want("1.1.1.1 9.9.9.9", Cmp::List),
                Some("1.1.1.1,9.9.9.9"),
                true,
            ),
            (
                "ssh keys as echoed",
                want(&keys, Cmp::SshKeys),
                Some(keys.as_str()),
                true,
            ),
            (
                "ssh keys missing one",
                want(&keys, Cmp::SshKeys),
                Some("ssh-ed25519%20AAAA%20a%40b"),
                false,
            ),
            (
                "description user part",
                want(
                    "notes\n\nManaged by crossplane-provider-proxmox: x uid=1",
                    Cmp::Description,
                ),
                Some("notes\n\nManaged by crossplane-provider-proxmox: x uid=1\n"),
                true,
            ),
        ];
        for (name, w, observed, same) in cases {
            assert_eq!(w.matches(observed), same, "{name}");
        }
    }

    #[test]
    fn a_changed_device_keeps_its_generated_mac() {
        let w = want("virtio,bridge=vmbr1,tag=5", Cmp::Net { mac: false });
        let observed = "virtio=BC:24:11:00:00:01,bridge=vmbr0";
        assert_eq!(
            w.value_given(Some(observed)),
            "virtio=BC:24:11:00:00:01,bridge=vmbr1,tag=5"
        );
    }
}
