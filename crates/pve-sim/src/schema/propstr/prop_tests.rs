//! Properties of the property-string parser: no panic on any text for any
//! format, and every property string written from valid key values (in any
//! order, the default key with or without its name, booleans in any of the
//! spellings PVE accepts) parses back to exactly those values.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::schema::{Format, Kind, Named, Param};

const ALL: [(&str, &PropFormat); 16] = [
    ("scsi0", &SCSI),
    ("sata0", &SATA),
    ("ide0", &IDE),
    ("virtio0", &VIRTIO),
    ("efidisk0", &EFIDISK),
    ("tpmstate0", &TPMSTATE),
    ("unused0", &UNUSED),
    ("net0", &NET),
    ("agent", &AGENT),
    ("memory", &MEMORY),
    ("vga", &VGA),
    ("ipconfig0", &IPCONFIG),
    ("boot", &BOOT),
    ("cicustom", &CICUSTOM),
    ("cpu", &CPU),
    ("smbios1", &SMBIOS1),
];

/// Valid values of a named format (those property-string keys use).
fn named_value(f: Named) -> BoxedStrategy<String> {
    let one = |v: &[&'static str]| {
        prop::sample::select(v.to_vec())
            .prop_map(str::to_owned)
            .boxed()
    };
    match f {
        Named::VolumeIdOrQmPath => one(&[
            "local-lvm:vm-100-disk-0",
            "local-lvm:0",
            "none",
            "cdrom",
            "/dev/sdb",
        ]),
        Named::VolumeIdOrAbsolutePath => one(&["local:import/jammy.qcow2", "/var/lib/vz/x.img"]),
        Named::PveVolumeId => one(&["local:snippets/user.yaml", "local-lvm:vm-100-disk-1"]),
        Named::DiskSize => r"[0-9]{1,4}(\.[0-9]{1,2})?[KMGT]?".boxed(),
        Named::Urlencoded => r"[-%a-zA-Z0-9_.!~*'()]{1,60}".boxed(),
        Named::PveBridgeId => r"vmbr[0-9]{1,3}".boxed(),
        Named::MacAddr => r"[0-9A-F][02468ACE](:[0-9A-F]{2}){5}".boxed(),
        Named::Ipv4 => any::<std::net::Ipv4Addr>()
            .prop_map(|a| a.to_string())
            .boxed(),
        Named::Ipv6 => any::<std::net::Ipv6Addr>()
            .prop_map(|a| a.to_string())
            .boxed(),
        Named::Ipv4Config => prop_oneof![
            one(&["dhcp", "manual"]),
            (any::<std::net::Ipv4Addr>(), 8..=32u8).prop_map(|(a, p)| format!("{a}/{p}")),
        ]
        .boxed(),
        Named::Ipv6Config => prop_oneof![
            one(&["auto", "dhcp", "manual"]),
            (any::<std::net::Ipv6Addr>(), 8..=128u8).prop_map(|(a, p)| format!("{a}/{p}")),
        ]
        .boxed(),
        Named::PveQmBootOrder => r"(scsi|ide|net|virtio)[0-9]{1,2}(;(scsi|net)[0-9])*".boxed(),
        other => panic!("no generator for format {}", other.name()),
    }
}

/// A valid value for one key, in a spelling the parser accepts, and the
/// value it must store. Never empty: `key=` is a syntax error.
fn key_value(p: &Param) -> BoxedStrategy<(String, String)> {
    let same = |s: BoxedStrategy<String>| s.prop_map(|v| (v.clone(), v)).boxed();
    if p.kind == Kind::Boolean {
        return prop::sample::select(vec![
            ("1", "1"),
            ("on", "1"),
            ("YES", "1"),
            ("true", "1"),
            ("0", "0"),
            ("off", "0"),
            ("No", "0"),
            ("FALSE", "0"),
        ])
        .prop_map(|(w, v)| (w.to_owned(), v.to_owned()))
        .boxed();
    }
    if !p.enum_values.is_empty() {
        return same(
            prop::sample::select(p.enum_values.to_vec())
                .prop_map(str::to_owned)
                .boxed(),
        );
    }
    if matches!(p.kind, Kind::Integer | Kind::Number) {
        let lo = p.min.unwrap_or(0);
        let hi = p.max.unwrap_or(lo + 100_000);
        return same((lo..=hi).prop_map(|n| n.to_string()).boxed());
    }
    match (p.format, p.pattern) {
        (Some(Format::Named(f)), _) => same(named_value(f)),
        (_, Some(pattern)) => same(
            proptest::string::string_regex(pattern)
                .unwrap_or_else(|e| panic!("{pattern}: {e}"))
                .prop_filter("a value has no comma", |v| {
                    !v.is_empty() && !v.contains(',')
                })
                .boxed(),
        ),
        _ => same(r"[a-zA-Z0-9 ._-]{1,16}".boxed()),
    }
}

/// A property string from some keys of `format` (all required ones) and
/// the map it must parse to.
fn written(
    format: &'static PropFormat,
) -> impl Strategy<Value = (String, BTreeMap<String, String>)> {
    let keys: Vec<&'static Param> = format.keys.iter().filter(|k| k.alias.is_none()).collect();
    let per_key: Vec<_> = keys
        .iter()
        .map(|k| {
            let include = if k.optional {
                any::<bool>().boxed()
            } else {
                Just(true).boxed()
            };
            (include, key_value(k), any::<bool>())
        })
        .collect();
    (per_key, any::<prop::sample::Index>()).prop_map(move |(chosen, rotate)| {
        let mut parts = Vec::new();
        let mut want = BTreeMap::new();
        for (key, (include, (written, stored), bare)) in keys.iter().zip(chosen) {
            if !include {
                continue;
            }
            parts.push(if key.default_key && bare {
                written
            } else {
                format!("{}={written}", key.name)
            });
            want.insert(key.name.to_owned(), stored);
        }
        if !parts.is_empty() {
            let n = rotate.index(parts.len());
            parts.rotate_left(n);
        }
        (parts.join(","), want)
    })
}

fn any_format() -> impl Strategy<Value = (&'static str, &'static PropFormat)> {
    prop::sample::select(ALL.to_vec())
}

proptest! {
    #[test]
    fn prop_any_text_parses_or_is_refused_without_panic((path, format) in any_format(), text in any::<String>()) {
        let _ = format.parse(path, &text);
    }

    /// Text made of the syntax's own characters reaches deeper paths.
    #[test]
    fn prop_property_like_text_never_panics(
        (path, format) in any_format(),
        text in r"([a-z0-9_-]{0,8}(=[a-zA-Z0-9:./ -]{0,12})?,?){0,6}",
    ) {
        if let Err(e) = format.parse(path, &text) {
            prop_assert!(e.ends_with('\n'), "PVE's messages end in a newline: {:?}", e);
        }
    }

    #[test]
    fn prop_written_strings_parse_back(
        ((path, _), (text, want)) in any_format().prop_flat_map(|f| (Just(f), written(f.1))),
    ) {
        let got = ALL.iter().find(|(p, _)| *p == path).map(|(_, f)| f.parse(path, &text));
        prop_assert_eq!(got, Some(Ok(want)), "{:?}", text);
    }

    /// `virtio=MAC`: the model's name is the key, the MAC the value.
    #[test]
    fn prop_net_model_alias_sets_model_and_mac(
        model in prop::sample::select(NET_MODELS.to_vec()),
        mac in r"[0-9A-F][02468ACE](:[0-9A-F]{2}){5}",
        bridge in r"vmbr[0-9]",
    ) {
        let n = NET.parse("net0", &format!("{model}={mac},bridge={bridge}"));
        let want: BTreeMap<String, String> = [("model", model), ("macaddr", &mac), ("bridge", &bridge)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        prop_assert_eq!(n, Ok(want));
    }
}
