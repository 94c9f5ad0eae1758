//! The committed CRDs in `crds/` match the Rust types, and are structural.

use std::path::Path;

use provider_proxmox::api::{crd, kinds};
use serde_json::Value;

const REGENERATE: &str = "cargo run -- crds --output-dir crds";

#[test]
fn committed_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let mut stale = vec![];
    let mut files = vec!["Kustomization".to_owned()];
    for (file, crd) in crd::all() {
        let want = crd::to_yaml(&crd).unwrap();
        match std::fs::read_to_string(dir.join(&file)) {
            Ok(have) if have == want => {}
            Ok(_) => stale.push(format!("{file} differs")),
            Err(e) => stale.push(format!("{file}: {e}")),
        }
        files.push(file);
    }
    match std::fs::read_to_string(dir.join("Kustomization")) {
        Ok(have) if have == crd::kustomization() => {}
        Ok(_) => stale.push("Kustomization differs".into()),
        Err(e) => stale.push(format!("Kustomization: {e}")),
    }
    // A file of a kind that is gone would still be installed.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !files.contains(&name) {
            stale.push(format!("{name} is no kind's"));
        }
    }
    assert!(
        stale.is_empty(),
        "crds/ is out of date with src/api ({}); regenerate it with `{REGENERATE}` and commit the result",
        stale.join(", ")
    );
}

#[test]
fn printed_stream_holds_every_crd() {
    let yaml = crd::all_yaml().unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    let kinds: Vec<String> = kinds::all().iter().map(|k| k.crd_name()).collect();
    assert_eq!(names, kinds);
    assert!(names.contains(&"proxmoxvms.proxmox.m.crossplane.io"));
}

/// The API server refuses non-structural schemas: every node names its type,
/// nothing refers elsewhere (`$ref`), and `anyOf`/`oneOf`/`allOf` branches
/// (which we do not use) would have to repeat the structure.
fn assert_structural(node: &Value, path: &str) {
    let obj = node.as_object().unwrap();
    for banned in [
        "$ref",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "definitions",
        "$defs",
    ] {
        assert!(!obj.contains_key(banned), "{path}: has {banned}");
    }
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if !int_or_string && !preserve {
        let ty = obj.get("type").and_then(Value::as_str);
        assert!(ty.is_some(), "{path}: no type");
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            assert!(
                child.get("description").is_some() || path.is_empty() && name != "spec",
                "{path}.{name}: no description (kubectl explain would be silent)"
            );
            assert_structural(child, &format!("{path}.{name}"));
        }
    }
    if let Some(items) = obj.get("items") {
        assert_structural(items, &format!("{path}[]"));
    }
    if let Some(list_type) = obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
        assert_eq!(
            obj.get("type").and_then(Value::as_str),
            Some("array"),
            "{path}"
        );
        if list_type == "map" {
            let keys = obj["x-kubernetes-list-map-keys"].as_array().unwrap();
            let required = obj["items"]["required"].as_array().unwrap();
            for key in keys {
                assert!(
                    required.contains(key),
                    "{path}: map key {key} must be required"
                );
            }
        }
    }
}

#[test]
fn schemas_are_structural_and_described() {
    for (file, crd) in crd::all() {
        let version = &crd.spec.versions[0];
        let schema = version.schema.clone().unwrap().open_api_v3_schema.unwrap();
        assert_structural(&serde_json::to_value(schema).unwrap(), "");
        assert!(
            version.subresources.as_ref().unwrap().status.is_some(),
            "{file}"
        );
    }
}
