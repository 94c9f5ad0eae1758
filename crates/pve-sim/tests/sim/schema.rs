//! Every endpoint and parameter the simulator serves must exist in the real
//! PVE API schema with the same method and type. The schema is read from
//! `$PVE_API_SCHEMA` (PVE's `apidata.json` tree, or paths → methods), else
//! fetched by `hack/tools/ensure.sh pve-api-schema` from the pinned fakepve
//! wheel (checksum verified, cached). It is reference data and is never
//! copied into the repository.

use pve_sim::schema::{Format, Kind, Param};
use serde_json::Value;

use crate::schema_source::index;

fn kind_name(k: Kind) -> &'static str {
    k.name()
}

/// Compares one of our parameters (or property-string keys) with the schema's.
fn compare(where_: &str, ours: &Param, theirs: &Value, problems: &mut Vec<String>) {
    if let Some(alias) = ours.alias {
        if theirs["alias"].as_str() != Some(alias) {
            problems.push(format!(
                "{where_}: we alias '{alias}', schema says {theirs}"
            ));
        }
        return;
    }
    if theirs.get("type").is_none() && theirs.get("alias").is_some() {
        problems.push(format!(
            "{where_}: schema has an alias ({theirs}), we have a full key"
        ));
        return;
    }
    let their_type = theirs["type"].as_str().unwrap_or("<none>");
    if their_type != kind_name(ours.kind) {
        problems.push(format!(
            "{where_}: type {} but schema says {their_type}",
            kind_name(ours.kind)
        ));
    }
    let their_optional =
        theirs["optional"].as_i64().unwrap_or(0) == 1 || theirs["optional"].as_bool() == Some(true);
    if ours.optional != their_optional && !ours.default_key {
        problems.push(format!(
            "{where_}: optional={} but schema says optional={their_optional}",
            ours.optional
        ));
    }
    if !ours.enum_values.is_empty() {
        let theirs_enum: Vec<&str> = theirs["enum"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for v in ours.enum_values {
            if !theirs_enum.contains(v) {
                problems.push(format!(
                    "{where_}: enum value '{v}' not in schema enum {theirs_enum:?}"
                ));
            }
        }
    }
    for (bound, ours_v) in [("minimum", ours.min), ("maximum", ours.max)] {
        if let (Some(o), Some(t)) = (ours_v, theirs[bound].as_f64())
            && o as f64 != t
        {
            problems.push(format!("{where_}: {bound} {o} but schema says {t}"));
        }
    }
    if let (Some(o), Some(t)) = (ours.max_len, theirs["maxLength"].as_u64())
        && o as u64 != t
    {
        problems.push(format!("{where_}: maxLength {o} but schema says {t}"));
    }
    match ours.format {
        Some(Format::Named(f)) => match theirs["format"].as_str() {
            Some(name) if name == f.name() => {}
            other => problems.push(format!(
                "{where_}: format '{}' but schema has {other:?}",
                f.name()
            )),
        },
        Some(Format::Prop(prop)) => match theirs["format"].as_object() {
            Some(keys) => {
                for key in prop.keys {
                    match keys.get(key.name) {
                        Some(t) => compare(&format!("{where_}.{}", key.name), key, t, problems),
                        None => problems.push(format!(
                            "{where_}: property-string key '{}' not in schema",
                            key.name
                        )),
                    }
                }
            }
            None => problems.push(format!(
                "{where_}: property string, but schema format is {}",
                theirs["format"]
            )),
        },
        None => {}
    }
}

/// The properties of a parameter schema. Section-config APIs (HA rules)
/// spread them over `allOf` parts and `oneOf` variants told apart by
/// `type` (their `instance-type`); a variant's property is optional
/// overall, since other variants do not have it.
fn properties(params: &Value) -> Value {
    let mut out = serde_json::Map::new();
    let mut types = Vec::new();
    let mut stack = vec![(params, false)];
    while let Some((p, variant)) = stack.pop() {
        if let Some(props) = p["properties"].as_object() {
            for (k, v) in props {
                let mut v = v.clone();
                if variant {
                    v["optional"] = Value::from(1);
                }
                out.entry(k.clone()).or_insert(v);
            }
        }
        if let Some(t) = p["instance-type"].as_str() {
            types.push(Value::from(t));
        }
        if let Some(parts) = p["allOf"].as_array() {
            stack.extend(parts.iter().map(|x| (x, variant)));
        }
        if let Some(parts) = p["oneOf"].as_array() {
            stack.extend(parts.iter().map(|x| (x, true)));
        }
    }
    if !types.is_empty() {
        out.entry("type")
            .or_insert_with(|| serde_json::json!({"type": "string", "enum": types}));
    }
    Value::Object(out)
}

#[test]
fn every_served_endpoint_and_parameter_is_in_the_pve_schema() {
    let schema = index();
    let endpoints = pve_sim::endpoints();
    assert!(
        endpoints.len() > 20,
        "the simulator should serve its route table, got {}",
        endpoints.len()
    );
    let mut problems = Vec::new();
    let mut checked_params = 0;
    for ep in &endpoints {
        let key = (ep.path.to_owned(), ep.method.to_owned());
        let Some(info) = schema.get(&key) else {
            problems.push(format!("{} {}: not in the PVE schema", ep.method, ep.path));
            continue;
        };
        let props = properties(&info["parameters"]);
        let props = &props;
        for p in &ep.params {
            checked_params += 1;
            match props.get(p.name) {
                Some(theirs) => compare(
                    &format!("{} {} {}", ep.method, ep.path, p.name),
                    p,
                    theirs,
                    &mut problems,
                ),
                None => problems.push(format!(
                    "{} {}: parameter '{}' not in the PVE schema",
                    ep.method, ep.path, p.name
                )),
            }
        }
    }
    assert!(
        checked_params > 150,
        "expected to check the simulator's parameters, checked {checked_params}"
    );
    assert!(
        problems.is_empty(),
        "{} mismatches with the PVE schema:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
