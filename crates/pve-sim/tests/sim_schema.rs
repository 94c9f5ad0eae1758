//! Every endpoint and parameter the simulator serves must exist in the real
//! PVE API schema with the same method and type. The schema is read from
//! `$PVE_API_SCHEMA` (PVE's `apidata.json` tree, or paths → methods), else
//! fetched by `hack/tools/ensure.sh pve-api-schema` from the pinned fakepve
//! wheel (checksum verified, cached). It is reference data and is never
//! copied into the repository.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pve_sim::schema::{Format, Kind, Param};
use serde_json::Value;

/// `$PVE_API_SCHEMA`, else the path `hack/tools/ensure.sh` prints.
fn schema_path() -> PathBuf {
    if let Some(p) = std::env::var_os("PVE_API_SCHEMA") {
        return PathBuf::from(p);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/tools/ensure.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("pve-api-schema")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().unwrap_or_default().trim();
    assert!(
        out.status.success() && !path.is_empty(),
        "`hack/tools/ensure.sh pve-api-schema` failed; run it by hand to see why:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(path)
}

/// (path, method) → method info, from either form of the schema: PVE's
/// `apidata.json` (a tree of `{path, info, children}`) or fakepve's
/// `{"paths": {path: {method: info}}}`.
fn index() -> BTreeMap<(String, String), Value> {
    let path = schema_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading the PVE API schema {}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    let mut out = BTreeMap::new();
    if let Some(paths) = schema["paths"].as_object() {
        for (path, methods) in paths {
            for (method, info) in methods.as_object().expect("methods by name") {
                out.insert((path.clone(), method.clone()), info.clone());
            }
        }
        return out;
    }
    let mut stack: Vec<&Value> = schema
        .as_array()
        .expect("apidata.json is an array")
        .iter()
        .collect();
    while let Some(node) = stack.pop() {
        if let (Some(path), Some(info)) = (node["path"].as_str(), node["info"].as_object()) {
            for (method, m) in info {
                out.insert((path.to_owned(), method.clone()), m.clone());
            }
        }
        if let Some(children) = node["children"].as_array() {
            stack.extend(children);
        }
    }
    out
}

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
        let props = &info["parameters"]["properties"];
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
