//! Properties of parameter validation: no panic for any parameters sent to
//! any endpoint, or any text checked against any named format; PVE's disk
//! sizes round-trip between `parse_size` and `format_size`.

use proptest::prelude::*;

use super::format::{format_size, parse_size};
use super::{Named, RawParams, RawValue, validate};

const NAMED: [Named; 32] = [
    Named::PveVmid,
    Named::PveNode,
    Named::PveStorageId,
    Named::PveBridgeId,
    Named::DnsName,
    Named::Urlencoded,
    Named::PveConfigid,
    Named::PveConfigidList,
    Named::PveTagList,
    Named::AddressList,
    Named::MacAddr,
    Named::DiskSize,
    Named::PveVolumeId,
    Named::VolumeIdOrQmPath,
    Named::VolumeIdOrAbsolutePath,
    Named::PveStorageContent,
    Named::PveStorageContentList,
    Named::PveRealm,
    Named::PvePoolid,
    Named::PveTaskStatusTypeList,
    Named::PveStartupOrder,
    Named::PveHotplugFeatures,
    Named::PveQmIpconfig,
    Named::PveQmBoot,
    Named::PveQmBootOrder,
    Named::PveQmCicustom,
    Named::PveVmCpuConf,
    Named::PveQmSmbios1,
    Named::Ipv4,
    Named::Ipv6,
    Named::Ipv4Config,
    Named::Ipv6Config,
];

fn raw_value() -> impl Strategy<Value = RawValue> {
    prop_oneof![
        any::<String>().prop_map(RawValue::Text),
        r"[+-]?[0-9]{0,12}(\.[0-9]{0,3})?([eE][+-]?[0-9]{0,3})?".prop_map(RawValue::Text),
        any::<bool>().prop_map(RawValue::Bool),
        Just(RawValue::Structured("ARRAY")),
    ]
}

proptest! {
    /// Keys are the endpoint's own parameter names (indexed ones with any
    /// index), so the values reach every check.
    #[test]
    fn prop_any_params_to_any_endpoint_validate_without_panic(
        route in any::<prop::sample::Index>(),
        picks in prop::collection::vec((any::<prop::sample::Index>(), 0..40u16, raw_value()), 0..12),
    ) {
        let routes = crate::api::routes();
        let route = &routes[route.index(routes.len())];
        let params: Vec<_> = route.params().collect();
        let mut raw = RawParams::new();
        for (which, index, value) in picks {
            if params.is_empty() {
                break;
            }
            let p = params[which.index(params.len())];
            let key = match p.name.strip_suffix("[n]") {
                Some(base) => format!("{base}{index}"),
                None => p.name.to_owned(),
            };
            raw.insert(key, value);
        }
        let _ = validate(route.params(), &raw);
    }

    #[test]
    fn prop_any_text_checked_against_any_format_without_panic(
        format in prop::sample::select(NAMED.to_vec()),
        text in prop_oneof![any::<String>(), r"[a-z0-9:/.,;=+%-]{0,24}"],
    ) {
        if let Err(e) = format.check("p", &text) {
            prop_assert!(e.ends_with('\n'), "{}: {:?}", format.name(), e);
        }
    }

    #[test]
    fn prop_sizes_round_trip(bytes in any::<u64>()) {
        let text = format_size(bytes);
        prop_assert!(Named::DiskSize.check("size", &text).is_ok(), "{}", text);
        prop_assert_eq!(parse_size(&text), Some(bytes), "{}", text);
    }

    #[test]
    fn prop_whole_sizes_parse_to_their_bytes(n in 0..(1u64 << 20), unit in 0..5u32, long in any::<bool>()) {
        let suffix = ["", "K", "M", "G", "T"][unit as usize];
        let ib = if long && unit > 0 { "iB" } else { "" };
        prop_assert_eq!(parse_size(&format!("{n}{suffix}{ib}")), Some(n << (10 * unit)));
    }
}
