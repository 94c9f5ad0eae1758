//! Properties of the wire encoding, checked against the simulator's
//! independently written request decoder: whatever this client encodes
//! (form bodies, query strings, path segments, strictly encoded `sshkeys`)
//! decodes to exactly what was meant.

use proptest::prelude::*;
use pve_sim::http::decode::{RawParams, RawValue, uri_unescape, urlencoded};

use super::{Params, strict_percent_encode};
use crate::request::ApiPath;

fn pairs() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((r"[a-z][a-z0-9_-]{0,8}", any::<String>()), 0..8)
}

proptest! {
    #[test]
    fn prop_form_bodies_decode_to_the_params(pairs in pairs()) {
        let mut params = Params::new();
        for (k, v) in &pairs {
            params.set(k, v.clone());
        }
        let mut decoded = RawParams::new();
        urlencoded(&params.to_form(), &mut decoded);
        let want: RawParams = params
            .pairs()
            .iter()
            .map(|(k, v)| (k.clone(), RawValue::Text(v.clone())))
            .collect();
        prop_assert_eq!(decoded, want);
    }

    /// `sshkeys` is percent-encoded before the form encoding: PVE's format
    /// check accepts it, and one more unescape gives the keys back.
    #[test]
    fn prop_strict_encoding_passes_pve_check_and_decodes_back(text in any::<String>()) {
        let encoded = strict_percent_encode(&text);
        prop_assert!(pve_sim::schema::Named::Urlencoded.check("sshkeys", &encoded).is_ok(), "{}", encoded);
        let mut decoded = RawParams::new();
        urlencoded(&Params::new().text("sshkeys", &encoded).to_form(), &mut decoded);
        prop_assert_eq!(decoded.get("sshkeys"), Some(&RawValue::Text(encoded.clone())));
        prop_assert_eq!(uri_unescape(&encoded), text);
    }

    /// Path arguments (node names, storage ids, volume ids, UPIDs) survive
    /// the trip through the path as one segment each. `.` and `..` are the
    /// exception the URL standard makes (even escaped, as `%2E`); none of
    /// those arguments can be one.
    #[test]
    fn prop_path_segments_decode_to_the_arguments(
        node in any::<String>().prop_filter("dot segment", |s| s != "." && s != ".."),
        upid in any::<String>().prop_filter("dot segment", |s| s != "." && s != ".."),
    ) {
        let path = ApiPath::new("/nodes/{node}/tasks/{upid}/status", &[&node, &upid]);
        // What goes on the wire is what the URL parser makes of it.
        let url = url::Url::parse(&format!("https://pve:8006/api2/json{}", path.rendered))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let segments: Vec<&str> = url.path().trim_start_matches("/api2/json").split('/').collect();
        prop_assert_eq!(segments.len(), 6, "{}", path.rendered);
        prop_assert_eq!(uri_unescape(segments[2]), node);
        prop_assert_eq!(uri_unescape(segments[4]), upid);
    }
}
