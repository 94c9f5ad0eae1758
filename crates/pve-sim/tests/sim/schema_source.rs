//! Where the tests get the real PVE API schema: `$PVE_API_SCHEMA` (PVE's
//! `apidata.json` tree, or paths → methods), else the file
//! `hack/tools/ensure.sh pve-api-schema` prints (fetched from the pinned
//! fakepve wheel, checksum verified, cached; never copied into the
//! repository).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

/// `$PVE_API_SCHEMA`, else the path `hack/tools/ensure.sh` prints.
pub fn schema_path() -> PathBuf {
    if let Some(p) = std::env::var_os("PVE_API_SCHEMA") {
        return PathBuf::from(p);
    }
    crate::common::ensure("pve-api-schema")
}

/// (path, method) → method info, from either form of the schema: PVE's
/// `apidata.json` (a tree of `{path, info, children}`) or fakepve's
/// `{"paths": {path: {method: info}}}`.
pub fn index() -> BTreeMap<(String, String), Value> {
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
