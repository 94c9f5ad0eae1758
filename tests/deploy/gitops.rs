//! GitOps health of every managed kind (ProxmoxVM, ProxmoxImage, ProxmoxContainer,
//! ProxmoxPool, ProxmoxSecurityGroup, ProxmoxIPSet, ProxmoxBackupJob,
//! ProxmoxSnapshot, ProxmoxBackup).
//!
//! Argo CD (`deploy/argocd/`): for each kind, every case of its check's
//! `health_test.yaml` (Argo CD's own test format) gives the expected status
//! and message in gopher-lua set up exactly as Argo CD runs argocd-cm
//! scripts, and in Lua 5.4 from Debian with the same libraries; the argocd-cm
//! entries are the scripts verbatim; the sample objects are valid objects of
//! their kind for the real API server.
//!
//! Flux (`deploy/flux/`): the Kustomization is accepted with Flux's real
//! CRD, and each kind's CEL health expressions classify that kind's samples
//! the way its Argo CD check does.
//!
//! kstatus: the image and container CRDs keep the contract `kubectl wait`
//! and kstatus read (a status write is no new generation, Ready and
//! observedGeneration are waited for), as the VM's does in `examples`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use provider_proxmox::api::{
    ProxmoxBackup, ProxmoxBackupJob, ProxmoxContainer, ProxmoxIPSet, ProxmoxImage, ProxmoxPool,
    ProxmoxSDNZone, ProxmoxSecurityGroup, ProxmoxSnapshot, ProxmoxVM, ProxmoxVNet,
};
use serde_json::{Value, json};

use crate::support::{self, KubectlOutput};
use crate::tools::{kubectl_wait, read, repo, run_with_input, temp_file, tool, yaml_docs};

/// A kind with a health check of its own.
struct Kind {
    name: &'static str,
    /// The Argo CD healths its samples must reach (every managed kind can
    /// be paused, so every one reaches Suspended).
    healths: &'static [&'static str],
    /// What some Progressing message must contain: the work in flight the
    /// check reports (a task's percent, the pull's task type).
    in_flight: &'static str,
}

const KINDS: [Kind; 11] = [
    Kind {
        name: "ProxmoxVM",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "42%",
    },
    Kind {
        name: "ProxmoxImage",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "42%",
    },
    Kind {
        name: "ProxmoxContainer",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "ociregistrypull",
    },
    Kind {
        name: "ProxmoxPool",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "still holds",
    },
    Kind {
        name: "ProxmoxSecurityGroup",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "being corrected",
    },
    Kind {
        name: "ProxmoxIPSet",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "still used by",
    },
    Kind {
        name: "ProxmoxBackupJob",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "matches no",
    },
    Kind {
        name: "ProxmoxSnapshot",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "qmrollback 42%",
    },
    Kind {
        name: "ProxmoxBackup",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "vzdump 42%",
    },
    Kind {
        name: "ProxmoxSDNZone",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "pending SDN configuration",
    },
    Kind {
        name: "ProxmoxVNet",
        healths: &["Degraded", "Healthy", "Progressing", "Suspended"],
        in_flight: "pending SDN configuration",
    },
];

impl Kind {
    fn dir(&self) -> String {
        format!("deploy/argocd/proxmox.m.crossplane.io/{}", self.name)
    }

    fn cm_key(&self) -> String {
        format!(
            "resource.customizations.health.proxmox.m.crossplane.io_{}",
            self.name
        )
    }

    /// The kind's objects in a namespace, untyped, so a test can write any
    /// spec or status.
    fn api(&self, namespace: &str) -> kube::Api<DynamicObject> {
        let resource = match self.name {
            "ProxmoxVM" => ApiResource::erase::<ProxmoxVM>(&()),
            "ProxmoxImage" => ApiResource::erase::<ProxmoxImage>(&()),
            "ProxmoxContainer" => ApiResource::erase::<ProxmoxContainer>(&()),
            "ProxmoxPool" => ApiResource::erase::<ProxmoxPool>(&()),
            "ProxmoxSecurityGroup" => ApiResource::erase::<ProxmoxSecurityGroup>(&()),
            "ProxmoxIPSet" => ApiResource::erase::<ProxmoxIPSet>(&()),
            "ProxmoxBackupJob" => ApiResource::erase::<ProxmoxBackupJob>(&()),
            "ProxmoxSnapshot" => ApiResource::erase::<ProxmoxSnapshot>(&()),
            "ProxmoxBackup" => ApiResource::erase::<ProxmoxBackup>(&()),
            "ProxmoxSDNZone" => ApiResource::erase::<ProxmoxSDNZone>(&()),
            "ProxmoxVNet" => ApiResource::erase::<ProxmoxVNet>(&()),
            other => panic!("no API for {other}"),
        };
        kube::Api::namespaced_with(support::client(), namespace, &resource)
    }
}

/// What a health check returned: (status, message), or the interpreter's error.
type Health = Result<(String, String), String>;

struct Case {
    input: String,
    status: String,
    message: String,
}

fn cases(kind: &Kind) -> Vec<Case> {
    let dir = kind.dir();
    let doc = &yaml_docs(
        &read(&format!("{dir}/health_test.yaml")),
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

fn sample(kind: &Kind, input: &str) -> Value {
    let docs = yaml_docs(&read(&format!("{}/{input}", kind.dir())), input);
    assert_eq!(docs.len(), 1, "{input}");
    let doc = docs.into_iter().next().unwrap();
    assert_eq!(doc["kind"], kind.name, "{input}");
    doc
}

fn script(kind: &Kind) -> PathBuf {
    repo().join(kind.dir()).join("health.lua")
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
    for kind in &KINDS {
        for case in cases(kind) {
            let got = eval(&script(kind), &sample(kind, &case.input)).unwrap_or_else(|e| {
                panic!("{interpreter}: {} {} failed: {e}", kind.name, case.input)
            });
            if got != (case.status.clone(), case.message.clone()) {
                wrong.push(format!(
                    "{} {}: expected {} {:?}, got {} {:?}",
                    kind.name, case.input, case.status, case.message, got.0, got.1
                ));
            }
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
    let checks: BTreeSet<String> =
        std::fs::read_dir(repo().join("deploy/argocd/proxmox.m.crossplane.io"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
    assert_eq!(
        checks,
        KINDS.iter().map(|k| k.name.to_owned()).collect(),
        "every check in deploy/argocd/ is tested here"
    );
    for kind in &KINDS {
        let cases = cases(kind);
        let inputs: BTreeSet<String> = cases.iter().map(|c| c.input.clone()).collect();
        let files: BTreeSet<String> = std::fs::read_dir(repo().join(kind.dir()).join("testdata"))
            .unwrap()
            .map(|e| format!("testdata/{}", e.unwrap().file_name().to_str().unwrap()))
            .collect();
        assert_eq!(
            inputs, files,
            "{}: every sample has exactly one case",
            kind.name
        );
        let statuses: BTreeSet<&str> = cases.iter().map(|c| c.status.as_str()).collect();
        assert_eq!(
            statuses,
            kind.healths.iter().copied().collect(),
            "{}",
            kind.name
        );
        assert!(
            cases
                .iter()
                .any(|c| c.status == "Progressing" && c.message.contains(kind.in_flight)),
            "{}: the work in flight ({}) is in a Progressing message",
            kind.name,
            kind.in_flight
        );
    }
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
        data.keys().cloned().collect::<BTreeSet<_>>(),
        KINDS.iter().map(Kind::cm_key).collect(),
        "one entry per kind"
    );
    for kind in &KINDS {
        assert_eq!(
            data[&kind.cm_key()],
            read(&format!("{}/health.lua", kind.dir())),
            "deploy/argocd/argocd-cm.yaml must embed {}/health.lua unchanged",
            kind.name
        );
    }
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
async fn samples_are_valid_objects_for_the_api_server() {
    support::install_crds(repo().join("crds")).await;
    let ns = support::namespace("argocd-samples").await;
    for kind in &KINDS {
        samples_accepted(kind, ns.name()).await;
    }
}

async fn samples_accepted(kind: &Kind, namespace: &str) {
    let api = kind.api(namespace);
    for (i, case) in cases(kind).iter().enumerate() {
        let sample = sample(kind, &case.input);
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
            .unwrap_or_else(|e| panic!("{} {}: spec refused: {e}", kind.name, case.input));
        if let Some(status) = sample.get("status") {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap_or_else(|e| panic!("{} {}: status refused: {e}", kind.name, case.input));
            let stored = api.get(&name).await.unwrap();
            assert!(
                within(status, &stored.data["status"]),
                "{} {}: the server pruned or changed fields of the status (unknown to the CRD?):\nwritten: {status:#}\nstored: {:#}",
                kind.name,
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
    let checks = kustomization["spec"]["healthCheckExprs"]
        .as_array()
        .unwrap();
    assert_eq!(
        checks
            .iter()
            .map(|c| c["kind"].as_str().unwrap())
            .collect::<Vec<_>>(),
        KINDS.iter().map(|k| k.name).collect::<Vec<_>>(),
        "one healthCheckExprs entry per kind"
    );
    let mut wrong = vec![];
    for (kind, check) in KINDS.iter().zip(checks) {
        assert_eq!(check["apiVersion"], "proxmox.m.crossplane.io/v1alpha1");
        flux_agrees(kind, check, &mut wrong);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn flux_agrees(kind: &Kind, check: &Value, wrong: &mut Vec<String>) {
    let failed = check["failed"].as_str().unwrap();
    let current = check["current"].as_str().unwrap();
    for case in cases(kind) {
        let obj = sample(kind, &case.input);
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
            // Flux has no "paused": a paused resource is as healthy as it was.
            "Suspended" if ready => "Current",
            _ => "InProgress",
        };
        if flux != expected {
            wrong.push(format!(
                "{} {}: Argo {}, Flux {flux}, expected {expected}",
                kind.name, case.input, case.status
            ));
        }
    }
}

/// A status as the provider writes it: Ready and Synced of one generation.
fn status_of(generation: i64, ready: &str, reason: &str) -> Value {
    json!({
        "observedGeneration": generation,
        "conditions": [
            {"type": "Ready", "status": ready, "reason": reason,
             "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": generation},
            {"type": "Synced", "status": "True", "reason": "ReconcileSuccess",
             "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": generation},
        ],
    })
}

/// What `kubectl wait` and kstatus read of an image or a container: a status
/// write through the status subresource is no new generation, `kubectl wait
/// --for=condition=Ready` waits for Ready=True, and a spec change is a
/// generation that counts as observed only once observedGeneration says so.
/// `change` is a spec change of the kind.
async fn kstatus_contract(kind: &Kind, change: Value) {
    support::install_crds(repo().join("crds")).await;
    let ns = support::namespace("kstatus-gitops").await;
    let api = kind.api(ns.name());
    let healthy = sample(kind, "testdata/healthy.yaml");
    let name = healthy["metadata"]["name"].as_str().unwrap().to_owned();
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": healthy["apiVersion"],
        "kind": healthy["kind"],
        "metadata": {"name": name},
        "spec": healthy["spec"],
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &object).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1), "{}", kind.name);
    let write = |status: Value| {
        let api = api.clone();
        let name = name.clone();
        async move {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap()
        }
    };
    let target = format!("{}/{name}", kind.name.to_lowercase());
    let wait = |condition: &'static str, timeout: &'static str| {
        kubectl_wait(ns.name(), &target, condition, timeout)
    };
    let waits_in_vain = |out: KubectlOutput, what: &str| {
        assert!(
            !out.success && out.stderr.contains("timed out"),
            "{}: kubectl wait returned while {what}: {} {}",
            kind.name,
            out.stdout,
            out.stderr
        );
    };

    let written = write(status_of(1, "False", "Creating")).await;
    assert_eq!(
        written.metadata.generation,
        Some(1),
        "{}: a status write is not a new generation",
        kind.name
    );
    waits_in_vain(wait("condition=Ready", "3s").await, "Ready=False");
    write(status_of(1, "True", "Available")).await;
    let out = wait("condition=Ready", "120s").await;
    assert!(
        out.success && out.stdout.contains("condition met"),
        "{}: kubectl wait failed with Ready=True: {}",
        kind.name,
        out.stderr
    );

    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": change })),
    )
    .await
    .unwrap();
    let changed = api.get(&name).await.unwrap();
    assert_eq!(changed.metadata.generation, Some(2), "{}", kind.name);
    assert_eq!(
        changed.data["status"]["observedGeneration"], 1,
        "{}",
        kind.name
    );
    let observed = "jsonpath={.status.observedGeneration}=2";
    waits_in_vain(wait(observed, "3s").await, "generation 2 is not observed");
    write(status_of(2, "True", "Available")).await;
    let out = wait(observed, "120s").await;
    assert!(out.success, "{}: {}", kind.name, out.stderr);
}

#[tokio::test]
async fn kubectl_wait_and_kstatus_see_what_the_image_controller_writes() {
    kstatus_contract(&KINDS[1], json!({"forProvider": {"nodes": ["pve"]}})).await;
}

#[tokio::test]
async fn kubectl_wait_and_kstatus_see_what_the_container_controller_writes() {
    kstatus_contract(&KINDS[2], json!({"forProvider": {"memory": "2Gi"}})).await;
}
