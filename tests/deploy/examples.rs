//! `examples/` on the real API server: every example is accepted
//! (`kubectl apply --dry-run=server` after the CRDs are installed), mistakes
//! are refused with a message that says what is wrong, the examples the kind
//! end-to-end script applies exist, and the status contract that kstatus,
//! Flux and `kubectl wait --for=condition=Ready` rely on holds: conditions
//! and observedGeneration live in the status subresource, status writes do
//! not bump the generation, spec changes do.

use std::path::PathBuf;

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::support;
use crate::tools::{kubectl_wait, prerequisites, proxmoxvms, read, repo, yaml_docs};

/// Every YAML file under examples/, sorted, but examples/crossplane/: its
/// XRD, Composition and composite resource need Crossplane's own CRDs
/// (apiextensions.crossplane.io) and the CRD Crossplane makes from the XRD,
/// which this control plane has not; `make crossplane-e2e`
/// (hack/crossplane/run.sh) applies them on a real Crossplane, and
/// [`composition_template_is_an_accepted_proxmoxvm`] checks here what the
/// Composition makes.
fn example_files() -> Vec<PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.ends_with("examples/crossplane") {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                out.push(path);
            }
        }
    }
    let mut files = vec![];
    walk(&repo().join("examples"), &mut files);
    files.sort();
    files
}

#[tokio::test]
async fn every_example_is_accepted() {
    prerequisites().await;
    let ns = support::namespace("examples").await;
    let files = example_files();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(repo()).unwrap().display().to_string())
        .collect();
    for expected in [
        "examples/vm-100.yaml",
        "examples/vm-clone.yaml",
        "examples/vm-static-ip.yaml",
        "examples/vm-observe.yaml",
        "examples/vm-orphan.yaml",
        "examples/vm-image-download.yaml",
        "examples/vm-windows11.yaml",
        "examples/vm-golden-template.yaml",
        "examples/vm-passthrough.yaml",
        "examples/ct-debian.yaml",
        "examples/ct-oci.yaml",
        "examples/pool.yaml",
        "examples/firewall-web.yaml",
        "examples/backup-job.yaml",
        "examples/snapshot.yaml",
        "examples/backup.yaml",
        "examples/vm-restore.yaml",
        "examples/container-restore.yaml",
        "examples/sdn-vnet.yaml",
        "examples/providerconfig/cluster-default.yaml",
        "examples/providerconfig/namespaced.yaml",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing: {names:?}"
        );
    }
    for file in &files {
        let yaml = std::fs::read_to_string(file).unwrap();
        assert_every_document_accepted(&yaml, &file.display().to_string(), ns.name()).await;
    }
}

/// examples/crossplane/composition.yaml stamps its template out with a
/// vmid per VM (hack/crossplane/function): such a ProxmoxVM is accepted.
#[tokio::test]
async fn composition_template_is_an_accepted_proxmoxvm() {
    prerequisites().await;
    let ns = support::namespace("composition").await;
    let composition = example("crossplane/composition.yaml");
    let pipeline = &composition[0]["spec"]["pipeline"];
    assert_eq!(pipeline[0]["functionRef"]["name"], "function-compose-vms");
    let mut vm = pipeline[0]["input"]["template"].clone();
    assert_eq!(vm["kind"], "ProxmoxVM", "the template: {vm:#}");
    vm["metadata"] = json!({"name": "web-0"});
    vm["spec"]["forProvider"]["vmid"] = json!(300);
    assert_every_document_accepted(&vm.to_string(), "composition.yaml's template", ns.name()).await;
    let xr = example("crossplane/vmgroup.yaml");
    let xrd = example("crossplane/xrd.yaml");
    assert_eq!(xrd[0]["spec"]["scope"], "Namespaced");
    assert_eq!(
        xrd[0]["spec"]["names"]["kind"], xr[0]["kind"],
        "vmgroup.yaml is the XRD's kind"
    );
}

/// Server dry-runs `yaml` as a user would apply it and asserts that the
/// server accepted each of its documents. Manifests that name their
/// namespace (crossplane-system) keep it; the others go to `ns`.
async fn assert_every_document_accepted(yaml: &str, origin: &str, ns: &str) {
    let docs = yaml_docs(yaml, origin);
    let names_namespace = docs.iter().any(|d| d["metadata"]["namespace"].is_string());
    let target = (!names_namespace).then_some(ns);
    let out = support::apply_dry_run_server(yaml, target).await;
    assert_eq!(
        out.matches("(server dry run)").count(),
        docs.len(),
        "{origin}: every document accepted:\n{yaml}\n{out}"
    );
}

fn example(name: &str) -> Vec<Value> {
    yaml_docs(&read(&format!("examples/{name}")), name)
}

fn vm(docs: &[Value]) -> &Value {
    docs.iter().find(|d| d["kind"] == "ProxmoxVM").unwrap()
}

#[test]
fn examples_show_what_their_names_promise() {
    let vm100 = example("vm-100.yaml");
    let p = &vm(&vm100)["spec"]["forProvider"];
    assert_eq!(vm(&vm100)["metadata"]["name"], "vm-100");
    assert_eq!(p["vmid"], 100);
    assert_eq!(
        p["disks"][0]["importFrom"], "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2",
        "the image pve-sim seeds"
    );

    let clone = example("vm-clone.yaml");
    assert_eq!(
        vm(&clone)["spec"]["forProvider"]["clone"]["templateVmid"],
        9000
    );

    let static_ip = example("vm-static-ip.yaml");
    let ci = &vm(&static_ip)["spec"]["forProvider"]["cloudInit"];
    assert!(ci["ipConfigs"][0]["ip"].as_str().unwrap().contains('/'));
    assert!(ci["ipConfigs"][0]["gateway"].is_string());
    let secret = static_ip.iter().find(|d| d["kind"] == "Secret").unwrap();
    assert_eq!(ci["passwordSecretRef"]["name"], secret["metadata"]["name"]);

    let observe = example("vm-observe.yaml");
    assert_eq!(
        vm(&observe)["spec"]["managementPolicies"],
        json!(["Observe"])
    );
    assert!(
        vm(&observe)["metadata"]["annotations"]["crossplane.io/external-name"]
            .as_str()
            .unwrap()
            .parse::<u32>()
            .is_ok()
    );

    let orphan = example("vm-orphan.yaml");
    let policies = vm(&orphan)["spec"]["managementPolicies"]
        .as_array()
        .unwrap();
    assert!(!policies.contains(&json!("Delete")) && !policies.contains(&json!("*")));
    assert!(policies.contains(&json!("Create")));

    let debian = example("ct-debian.yaml");
    let ct = debian
        .iter()
        .find(|d| d["kind"] == "ProxmoxContainer")
        .unwrap();
    assert_eq!(
        ct["spec"]["forProvider"]["template"]["volume"],
        "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
        "the template pve-sim seeds"
    );
    let secret = debian.iter().find(|d| d["kind"] == "Secret").unwrap();
    assert_eq!(
        ct["spec"]["forProvider"]["passwordSecretRef"]["name"],
        secret["metadata"]["name"]
    );
    let oci = example("ct-oci.yaml");
    assert!(
        oci[0]["spec"]["forProvider"]["template"]["oci"]["reference"]
            .as_str()
            .unwrap()
            .contains(':'),
        "an OCI reference with a tag"
    );

    let firewall = example("firewall-web.yaml");
    let kind = |k: &str| firewall.iter().find(|d| d["kind"] == k).unwrap();
    assert_eq!(
        kind("ProxmoxSecurityGroup")["spec"]["forProvider"]["rules"][0]["source"]["ipSet"],
        kind("ProxmoxIPSet")["metadata"]["name"],
        "the group names the IP set of its namespace by its Kubernetes name"
    );
    let rules = &kind("ProxmoxVM")["spec"]["forProvider"]["firewall"]["rules"];
    assert_eq!(
        rules[0]["securityGroup"],
        kind("ProxmoxSecurityGroup")["metadata"]["name"],
        "the VM's firewall names the group of its namespace by its Kubernetes name"
    );
    let own = &kind("ProxmoxVM")["spec"]["forProvider"]["firewall"];
    assert_eq!(
        rules[2]["dest"]["guestIpSet"], own["ipSets"][0]["name"],
        "a rule names the VM's own IP set"
    );
    assert_eq!(
        rules[3]["dest"]["guestAlias"], own["aliases"][0]["name"],
        "a rule names the VM's own alias"
    );

    let backup = example("backup-job.yaml");
    assert_eq!(
        backup[0]["spec"]["forProvider"]["guestSelector"]["matchLabels"]["tier"], "web",
        "guests chosen by label"
    );

    let snapshot = example("snapshot.yaml");
    assert_eq!(
        snapshot[0]["spec"]["forProvider"]["guestRef"]["kind"], "ProxmoxVM",
        "the guest named by reference, not by VMID"
    );

    let on_demand = example("backup.yaml");
    assert_eq!(
        on_demand[0]["spec"]["forProvider"]["guestRef"]["name"], "vm-100",
        "the guest named by reference, not by VMID"
    );

    let restored = example("vm-restore.yaml");
    assert_eq!(
        restored[0]["spec"]["forProvider"]["restore"]["backupRef"]["name"],
        on_demand[0]["metadata"]["name"],
        "the VM restores the backup of examples/backup.yaml, by reference"
    );

    let ct_restore = example("container-restore.yaml");
    let kind = |k: &str| ct_restore.iter().find(|d| d["kind"] == k).unwrap();
    let (ct_backup, copy) = (kind("ProxmoxBackup"), kind("ProxmoxContainer"));
    assert_eq!(
        ct_backup["spec"]["forProvider"]["guestRef"],
        json!({"kind": "ProxmoxContainer", "name": example("ct-debian.yaml").iter().find(|d| d["kind"] == "ProxmoxContainer").unwrap()["metadata"]["name"]}),
        "the backup is of examples/ct-debian.yaml's container, by reference"
    );
    assert_eq!(
        copy["spec"]["forProvider"]["restore"]["backupRef"]["name"], ct_backup["metadata"]["name"],
        "the container restores that backup, by reference"
    );
    assert!(
        copy["spec"]["forProvider"].get("template").is_none(),
        "a restore has no template"
    );

    let sdn = example("sdn-vnet.yaml");
    let kind = |k: &str| sdn.iter().find(|d| d["kind"] == k).unwrap();
    assert_eq!(
        kind("ProxmoxVNet")["spec"]["forProvider"]["zoneRef"]["name"],
        kind("ProxmoxSDNZone")["metadata"]["name"],
        "the VNet names the zone of its namespace by its Kubernetes name"
    );

    let config = example("providerconfig/cluster-default.yaml");
    let cpc = config
        .iter()
        .find(|d| d["kind"] == "ClusterProviderConfig")
        .unwrap();
    assert_eq!(
        cpc["metadata"]["name"], "default",
        "what ProxmoxVMs use by default"
    );
    assert_eq!(
        cpc["spec"]["tls"]["fingerprint"].as_str().unwrap().len(),
        95
    );
    let secret = config.iter().find(|d| d["kind"] == "Secret").unwrap();
    assert_eq!(
        cpc["spec"]["credentials"]["secretRef"]["name"],
        secret["metadata"]["name"]
    );
    assert!(
        secret["stringData"]["tokenId"]
            .as_str()
            .unwrap()
            .contains('!'),
        "an API token"
    );
}

#[tokio::test]
async fn mistakes_are_refused_with_a_message_that_says_what_is_wrong() {
    prerequisites().await;
    let ns = support::namespace("bad-examples").await;
    let cases = [
        (
            // A clone with an image import: the template provides the disks.
            r#"
apiVersion: proxmox.m.crossplane.io/v1alpha1
kind: ProxmoxVM
metadata: {name: bad-clone}
spec:
  forProvider:
    node: pve
    clone: {templateVmid: 9000}
    disks:
      - {slot: scsi0, storage: local-lvm, importFrom: "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2"}
"#,
            "a cloned VM gets its disks from the template",
        ),
        (
            r#"
apiVersion: proxmox.m.crossplane.io/v1alpha1
kind: ProxmoxVM
metadata: {name: tiny}
spec:
  forProvider: {memory: 8Mi}
"#,
            "memory must be at least 16Mi",
        ),
        (
            r#"
apiVersion: proxmox.m.crossplane.io/v1alpha1
kind: ProxmoxVM
metadata: {name: no-observe}
spec:
  managementPolicies: [Create, Delete]
  forProvider: {}
"#,
            "managementPolicies must include Observe",
        ),
        (
            r#"
apiVersion: proxmox.m.crossplane.io/v1alpha1
kind: ProviderConfig
metadata: {name: cross-namespace}
spec:
  endpoint: https://pve.example.com:8006
  credentials:
    secretRef: {name: pve, namespace: someone-else}
"#,
            "a namespaced ProviderConfig reads its Secret from its own namespace",
        ),
        (
            r#"
apiVersion: proxmox.m.crossplane.io/v1alpha1
kind: ClusterProviderConfig
metadata: {name: short-pin}
spec:
  endpoint: https://pve.example.com:8006
  credentials:
    secretRef: {name: pve, namespace: crossplane-system}
  tls: {fingerprint: "AA:BB:CC"}
"#,
            "fingerprint must be a SHA-256 fingerprint",
        ),
    ];
    for (manifest, expected) in cases {
        let message = support::apply_expect_rejected(manifest, Some(ns.name())).await;
        assert!(
            message.contains(expected),
            "expected the server to say {expected:?}, it said:\n{message}"
        );
    }
}

/// The examples scripts/kind-e2e.sh applies, from its `examples=(...)` line.
fn kind_e2e_examples() -> Vec<String> {
    let script = read("scripts/kind-e2e.sh");
    let line = script
        .lines()
        .find(|l| l.starts_with("examples=("))
        .expect("scripts/kind-e2e.sh lists its examples in examples=(...)");
    line.trim_start_matches("examples=(")
        .trim_end_matches(')')
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn kind_e2e_examples_exist_and_are_accepted_in_its_order() {
    prerequisites().await;
    let ns = support::namespace("kind-e2e").await;
    let examples = kind_e2e_examples();
    assert_eq!(examples.first().map(String::as_str), Some("vm-100.yaml"));
    let observe = examples
        .iter()
        .position(|e| e == "vm-observe.yaml")
        .unwrap();
    assert_eq!(
        observe,
        examples.len() - 1,
        "observes VM 100 once it exists"
    );
    for example in &examples {
        let docs = self::example(example);
        for doc in &docs {
            if doc["kind"] == "ProxmoxVM" {
                let reference = &doc["spec"]["providerConfigRef"];
                assert!(
                    reference.is_null()
                        || (reference["kind"] == "ClusterProviderConfig"
                            && reference["name"] == "default"),
                    "{example}: uses the ClusterProviderConfig of deploy/pve-sim/"
                );
            }
        }
        support::apply_dry_run_server(
            repo().join("examples").join(example).as_path(),
            Some(ns.name()),
        )
        .await;
    }
}

/// Writes `status` through the status subresource, as the provider does.
async fn write_status(api: &Api<DynamicObject>, name: &str, status: Value) -> DynamicObject {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap()
}

fn status(generation: i64, ready: &str, reason: &str) -> Value {
    json!({
        "observedGeneration": generation,
        "atProvider": {"vmid": 100, "node": "pve", "state": if ready == "True" { "running" } else { "absent" }},
        "conditions": [
            {"type": "Ready", "status": ready, "reason": reason,
             "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": generation},
            {"type": "Synced", "status": "True", "reason": "ReconcileSuccess",
             "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": generation},
        ],
    })
}

#[tokio::test]
async fn kubectl_wait_and_kstatus_see_what_the_provider_writes() {
    prerequisites().await;
    let ns = support::namespace("kstatus").await;
    let api = proxmoxvms(ns.name());
    support::apply_path(repo().join("examples/vm-100.yaml"), Some(ns.name())).await;
    let created = api.get("vm-100").await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let wait = |timeout: &'static str, condition: &'static str| {
        kubectl_wait(ns.name(), "proxmoxvm/vm-100", condition, timeout)
    };

    // Creating: Ready=False. `kubectl wait` must not return success.
    let written = write_status(&api, "vm-100", status(1, "False", "Creating")).await;
    assert_eq!(
        written.metadata.generation,
        Some(1),
        "a status write is not a new generation"
    );
    let out = wait("3s", "condition=Ready").await;
    assert!(
        !out.success,
        "kubectl wait returned while Ready=False: {}",
        out.stdout
    );
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);

    // Available: Ready=True. It returns.
    write_status(&api, "vm-100", status(1, "True", "Available")).await;
    let out = wait("120s", "condition=Ready").await;
    assert!(
        out.success,
        "kubectl wait failed with Ready=True: {}",
        out.stderr
    );
    assert!(out.stdout.contains("condition met"), "{}", out.stdout);

    // A spec change is a new generation the provider has not observed yet:
    // kstatus (Flux) reports InProgress until observedGeneration catches up.
    api.patch(
        "vm-100",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"forProvider": {"memory": "4Gi"}}})),
    )
    .await
    .unwrap();
    let changed = api.get("vm-100").await.unwrap();
    assert_eq!(changed.metadata.generation, Some(2));
    assert_eq!(changed.data["status"]["observedGeneration"], 1);
    let out = wait("3s", "jsonpath={.status.observedGeneration}=2").await;
    assert!(
        !out.success && out.stderr.contains("timed out"),
        "{}",
        out.stderr
    );
    write_status(&api, "vm-100", status(2, "True", "Available")).await;
    let out = wait("120s", "jsonpath={.status.observedGeneration}=2").await;
    assert!(out.success, "{}", out.stderr);
    let observed = api.get("vm-100").await.unwrap();
    assert_eq!(
        observed.metadata.generation,
        Some(2),
        "{}",
        observed.name_any()
    );
}

/// The YAML blocks of README.md, in order: the front door must not show a
/// manifest the API server refuses.
fn readme_manifests() -> Vec<String> {
    let readme = read("README.md");
    let mut blocks = vec![];
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```yaml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[tokio::test]
async fn readme_manifests_are_accepted() {
    prerequisites().await;
    let ns = support::namespace("readme").await;
    let blocks = readme_manifests();
    assert!(
        blocks.len() >= 2,
        "README.md shows a provider config and a VM: {blocks:?}"
    );
    for block in &blocks {
        assert_every_document_accepted(block, "README.md", ns.name()).await;
    }
}
