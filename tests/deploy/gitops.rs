//! GitOps health of ProxmoxVMs.
//!
//! Argo CD (`deploy/argocd/`): every case of the check's `health_test.yaml`
//! (Argo CD's own test format) gives the expected status and message in
//! gopher-lua set up exactly as Argo CD runs argocd-cm scripts, and in Lua 5.4
//! from Debian with the same libraries; the argocd-cm entry is the script
//! verbatim; the sample objects are valid ProxmoxVMs for the real API server.
//!
//! Flux (`deploy/flux/`): the Kustomization is accepted with Flux's real
//! CRD, and its CEL health expressions classify the same samples the way the
//! Argo CD check does.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support;
use crate::tools::{proxmoxvms, read, repo, run_with_input, temp_file, tool, yaml_docs};

const DIR: &str = "deploy/argocd/proxmox.crossplane.io/ProxmoxVM";

/// What a health check returned: (status, message), or the interpreter's error.
type Health = Result<(String, String), String>;

struct Case {
    input: String,
    status: String,
    message: String,
}

fn cases() -> Vec<Case> {
    let doc = &yaml_docs(
        &read(&format!("{DIR}/health_test.yaml")),
        "health_test.yaml",
    )[0];
    doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| Case {
            input: t["inputPath"].as_str().unwrap().to_owned(),
            status: t["healthStatus"]["status"].as_str().unwrap().to_owned(),
            message: t["healthStatus"]["message"].as_str().unwrap().to_owned(),
        })
        .collect()
}

fn sample(input: &str) -> Value {
    let docs = yaml_docs(&read(&format!("{DIR}/{input}")), input);
    assert_eq!(docs.len(), 1, "{input}");
    docs.into_iter().next().unwrap()
}

fn script() -> PathBuf {
    repo().join(DIR).join("health.lua")
}

/// (status, message) from Argo CD's interpreter (hack/tools/argocd-lua).
fn gopher_lua(script: &Path, obj: &Value) -> Health {
    let out = run_with_input(
        Command::new(tool("argocd-lua")).arg(script),
        &obj.to_string(),
    );
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let hs: Value = serde_json::from_slice(&out.stdout).unwrap();
    Ok((
        hs["status"].as_str().unwrap_or_default().to_owned(),
        hs["message"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// A Lua literal for a JSON value (integers stay integers, as in Argo CD
/// where Kubernetes integers arrive as whole numbers).
fn lua_literal(value: &Value) -> String {
    match value {
        Value::Null => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) => format!("{f:?}"),
            (None, None) => n.to_string(),
        },
        Value::String(s) => lua_string(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(lua_literal).collect();
            format!("{{{}}}", items.join(", "))
        }
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("[{}] = {}", lua_string(k), lua_literal(v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

fn lua_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\{:03}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// (status, message) from Debian's Lua 5.4, the script loaded with only the
/// libraries Argo CD opens for argocd-cm scripts (base, package, table).
fn lua54(script: &Path, obj: &Value) -> Health {
    let program = format!(
        r#"
local denied = {{ string = true, math = true, io = true, os = true, debug = true, utf8 = true, coroutine = true }}
local env = setmetatable({{ obj = {obj} }}, {{ __index = function(_, k)
  if denied[k] then return nil end
  return _G[k]
end }})
local file = assert(io.open({path}, "r"))
local source = file:read("a")
file:close()
local chunk = assert(load(source, "=health.lua", "t", env))
local hs = chunk()
io.write(tostring(hs.status), "\n", tostring(hs.message), "\n")
"#,
        obj = lua_literal(obj),
        path = lua_string(&script.display().to_string()),
    );
    let out = run_with_input(Command::new(tool("lua")).arg("-"), &program);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let (status, message) = text.trim_end_matches('\n').split_once('\n').unwrap();
    Ok((status.to_owned(), message.to_owned()))
}

fn check_all(interpreter: &str, eval: fn(&Path, &Value) -> Health) {
    let mut wrong = vec![];
    for case in cases() {
        let got = eval(&script(), &sample(&case.input))
            .unwrap_or_else(|e| panic!("{interpreter}: {} failed: {e}", case.input));
        if got != (case.status.clone(), case.message.clone()) {
            wrong.push(format!(
                "{}: expected {} {:?}, got {} {:?}",
                case.input, case.status, case.message, got.0, got.1
            ));
        }
    }
    assert!(wrong.is_empty(), "{interpreter}:\n{}", wrong.join("\n"));
}

#[test]
fn health_check_passes_argo_cases_in_gopher_lua() {
    check_all("gopher-lua", gopher_lua);
}

#[test]
fn health_check_passes_argo_cases_in_lua_5_4() {
    check_all("lua5.4", lua54);
}

#[test]
fn cases_cover_every_sample_and_every_health() {
    let cases = cases();
    let inputs: BTreeSet<String> = cases.iter().map(|c| c.input.clone()).collect();
    let files: BTreeSet<String> = std::fs::read_dir(repo().join(DIR).join("testdata"))
        .unwrap()
        .map(|e| format!("testdata/{}", e.unwrap().file_name().to_str().unwrap()))
        .collect();
    assert_eq!(inputs, files, "every sample has exactly one case");
    let statuses: BTreeSet<&str> = cases.iter().map(|c| c.status.as_str()).collect();
    assert_eq!(
        statuses,
        BTreeSet::from(["Degraded", "Healthy", "Progressing", "Suspended"])
    );
    assert!(
        cases
            .iter()
            .any(|c| c.status == "Progressing" && c.message.contains("42%")),
        "the import percent is in a Progressing message"
    );
}

#[test]
fn interpreters_refuse_libraries_argo_does_not_open() {
    // Argo CD opens no string or math library for argocd-cm scripts; a
    // script using them must fail here as it would there.
    let uses_string = temp_file(
        ".lua",
        "return { status = string.format('%s', 'Healthy'), message = '' }",
    );
    let obj = json!({"metadata": {"name": "x"}});
    let err = gopher_lua(&uses_string, &obj).unwrap_err();
    assert!(err.contains("string"), "{err}");
    let err = lua54(&uses_string, &obj).unwrap_err();
    assert!(err.contains("string"), "{err}");
}

#[test]
fn argocd_cm_entry_is_the_script_verbatim() {
    let docs = yaml_docs(&read("deploy/argocd/argocd-cm.yaml"), "argocd-cm.yaml");
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0]["kind"], "ConfigMap");
    assert_eq!(docs[0]["metadata"]["name"], "argocd-cm");
    let data = docs[0]["data"].as_object().unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["resource.customizations.health.proxmox.crossplane.io_ProxmoxVM"]
    );
    assert_eq!(
        data["resource.customizations.health.proxmox.crossplane.io_ProxmoxVM"],
        read(&format!("{DIR}/health.lua")),
        "deploy/argocd/argocd-cm.yaml must embed health.lua unchanged"
    );
}

#[tokio::test]
async fn argocd_cm_entry_is_accepted_by_the_api_server() {
    let ns = support::namespace("argocd-cm").await;
    let mut cm = yaml_docs(&read("deploy/argocd/argocd-cm.yaml"), "argocd-cm.yaml").remove(0);
    // The file names namespace argocd, which need not exist here.
    cm["metadata"]["namespace"] = Value::String(ns.name().to_owned());
    support::apply_dry_run_server(cm.to_string().as_str(), None).await;
}

/// Whether everything in `written` is in `stored` unchanged (the server may
/// add defaults).
fn within(written: &Value, stored: &Value) -> bool {
    match (written, stored) {
        (Value::Object(w), Value::Object(s)) => w
            .iter()
            .all(|(k, v)| s.get(k).is_some_and(|sv| within(v, sv))),
        (Value::Array(w), Value::Array(s)) => {
            w.len() == s.len() && w.iter().zip(s).all(|(a, b)| within(a, b))
        }
        _ => written == stored,
    }
}

#[tokio::test]
async fn samples_are_valid_proxmoxvms_for_the_api_server() {
    support::install_crds(repo().join("crds")).await;
    let ns = support::namespace("argocd-samples").await;
    let api = proxmoxvms(ns.name());
    for (i, case) in cases().iter().enumerate() {
        let sample = sample(&case.input);
        // What a client may set at creation: spec and annotations.
        let name = format!("sample-{i}");
        let mut object = json!({
            "apiVersion": sample["apiVersion"],
            "kind": sample["kind"],
            "metadata": {"name": name, "annotations": sample["metadata"]["annotations"]},
            "spec": sample["spec"],
        });
        if sample["metadata"]["annotations"].is_null() {
            object["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("annotations");
        }
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{}: spec refused: {e}", case.input));
        if let Some(status) = sample.get("status") {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: status refused: {e}", case.input));
            let stored = api.get(&name).await.unwrap();
            assert!(
                within(status, &stored.data["status"]),
                "{}: the server pruned or changed fields of the status (unknown to the CRD?):\nwritten: {status:#}\nstored: {:#}",
                case.input,
                stored.data["status"]
            );
        }
    }
}

fn flux_kustomization() -> Value {
    let docs = yaml_docs(
        &read("deploy/flux/proxmoxvms-kustomization.yaml"),
        "proxmoxvms-kustomization.yaml",
    );
    assert_eq!(docs.len(), 1);
    docs.into_iter().next().unwrap()
}

#[tokio::test]
async fn flux_kustomization_is_accepted_with_flux_crd() {
    support::install_crds(tool("flux-kustomization-crd")).await;
    let ns = support::namespace("flux").await;
    let mut kustomization = flux_kustomization();
    // The file names namespace flux-system, which need not exist here.
    kustomization["metadata"]["namespace"] = Value::String(ns.name().to_owned());
    support::apply_dry_run_server(kustomization.to_string().as_str(), None).await;
}

/// Evaluates a Flux health expression on an object: like Flux, with the
/// object's top-level fields as variables (a missing status as an empty one).
fn flux_eval(expression: &str, obj: &Value) -> bool {
    use kube::core::cel::cel::{Context, Program, Value as CelValue};
    let program = Program::compile(expression)
        .unwrap_or_else(|e| panic!("Flux expression does not compile: {e}\n{expression}"));
    let mut context = Context::default();
    for field in ["apiVersion", "kind", "metadata", "spec", "status"] {
        let value = obj.get(field).cloned().unwrap_or_else(|| json!({}));
        context.add_variable(field, value).unwrap();
    }
    match program.execute(&context) {
        Ok(CelValue::Bool(b)) => b,
        other => panic!("{expression} gave {other:?} for {obj}"),
    }
}

#[test]
fn flux_expressions_agree_with_the_argo_check() {
    let kustomization = flux_kustomization();
    let check = &kustomization["spec"]["healthCheckExprs"][0];
    assert_eq!(check["kind"], "ProxmoxVM");
    let failed = check["failed"].as_str().unwrap();
    let current = check["current"].as_str().unwrap();
    let mut wrong = vec![];
    for case in cases() {
        let obj = sample(&case.input);
        // Flux evaluates failed before current; neither means in progress.
        let flux = if flux_eval(failed, &obj) {
            "Failed"
        } else if flux_eval(current, &obj) {
            "Current"
        } else {
            "InProgress"
        };
        let ready = obj["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        let expected = match case.status.as_str() {
            "Healthy" => "Current",
            "Degraded" => "Failed",
            "Progressing" => "InProgress",
            // Flux has no "paused": a paused VM is as healthy as it was.
            "Suspended" if ready => "Current",
            _ => "InProgress",
        };
        if flux != expected {
            wrong.push(format!(
                "{}: Argo {}, Flux {flux}, expected {expected}",
                case.input, case.status
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
