//! The CRDs' CEL rules, evaluated client-side (kube's `cel` feature, enabled
//! for tests only) on the generated schemas: each rule compiles, stays within
//! the API server's cost budget, accepts good manifests and refuses bad ones
//! with the message a person will read. The real API server checks the same
//! rules (and the OpenAPI patterns, enums and bounds) in the integration tests.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::cel::{ScopeContext, Validator, WarningKind, analyze_rule, compile_schema};
use serde_json::{Value, json};

use crate::api::{ClusterProviderConfig, ProviderConfig, ProxmoxVM};

fn schema_of(crd: CustomResourceDefinition) -> Value {
    let schema = crd.spec.versions[0]
        .schema
        .clone()
        .and_then(|s| s.open_api_v3_schema)
        .expect("derived CRDs have a schema");
    serde_json::to_value(schema).unwrap()
}

/// The messages of every rule that refuses `object` (given `old` for updates).
fn refusals(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    match Validator::new().validate(schema, object, old) {
        Ok(()) => vec![],
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

fn vm(for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.crossplane.io/v1alpha1",
        "kind": "ProxmoxVM",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"forProvider": for_provider},
    })
}

fn good_disk() -> Value {
    json!({
        "slot": "scsi0",
        "storage": "local-lvm",
        "size": "20Gi",
        "image": {
            "url": "https://images.example/jammy.img",
            "checksum": "a".repeat(64),
            "checksumAlgorithm": "sha256",
        },
    })
}

/// Walks every node of a schema, calling `f` on nodes that carry rules.
fn each_rule_node(node: &Value, path: &str, f: &mut dyn FnMut(&str, &Value)) {
    if node.get("x-kubernetes-validations").is_some() {
        f(path, node);
    }
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            each_rule_node(child, &format!("{path}.{name}"), f);
        }
    }
    if let Some(items) = node.get("items") {
        each_rule_node(items, &format!("{path}[]"), f);
    }
}

#[test]
fn every_rule_compiles_and_fits_the_cost_budget() {
    let crds = [
        ProxmoxVM::crd(),
        ProviderConfig::crd(),
        ClusterProviderConfig::crd(),
    ];
    let mut rules = 0;
    for crd in crds {
        let schema = schema_of(crd);
        each_rule_node(&schema, "", &mut |path, node| {
            let compiled = compile_schema(node);
            let errors = compiled.compilation_errors();
            assert!(errors.is_empty(), "{path}: {errors:?}");
            for rule in node["x-kubernetes-validations"].as_array().unwrap() {
                rules += 1;
                let text = rule["rule"].as_str().unwrap();
                assert!(
                    rule.get("message").is_some(),
                    "{path}: `{text}` has no message"
                );
                // The scope check does not know comprehension variables
                // (`self.all(d, ...)`), so only cost and bounds count here.
                let warnings: Vec<_> = analyze_rule(text, &compiled, ScopeContext::CrdValidation)
                    .into_iter()
                    .filter(|w| w.kind != WarningKind::WrongScope)
                    .collect();
                assert!(warnings.is_empty(), "{path}: `{text}`: {warnings:?}");
            }
        });
    }
    assert!(
        rules > 30,
        "only {rules} rules found: did the schema walk break?"
    );
}

#[test]
fn proxmox_vm_create_rules() {
    let schema = schema_of(ProxmoxVM::crd());
    let with_disk = |disk: Value| json!({"disks": [disk]});
    let mut image_disk = good_disk();
    image_disk["importFrom"] = json!("local:import/x.qcow2");
    let mut short_checksum = good_disk();
    short_checksum["image"]["checksum"] = json!("abc");
    let mut bad_filename = good_disk();
    bad_filename["image"]["filename"] = json!("jammy.img");

    // (case, forProvider, None = accepted | Some(part of the refusal message))
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("empty forProvider gets defaults", json!({}), None),
        ("image disk", with_disk(good_disk()), None),
        (
            "import disk without size",
            with_disk(
                json!({"slot": "virtio0", "storage": "local-lvm", "importFrom": "local:import/jammy.qcow2"}),
            ),
            None,
        ),
        (
            "two sources",
            with_disk(image_disk),
            Some("a disk takes one source"),
        ),
        (
            "empty disk without size",
            with_disk(json!({"slot": "scsi1", "storage": "local-lvm"})),
            Some("an empty disk (no importFrom, no image) needs a size"),
        ),
        (
            "slot out of range",
            with_disk(json!({"slot": "scsi31", "storage": "local-lvm", "size": "1Gi"})),
            Some("slot must be scsi0..scsi30"),
        ),
        (
            "size not a quantity",
            with_disk(json!({"slot": "scsi1", "storage": "local-lvm", "size": "lots"})),
            Some("must be a positive Kubernetes quantity"),
        ),
        (
            "absolute path import",
            with_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "/var/lib/vz/x.img"}),
            ),
            Some("must be a Proxmox volume ID"),
        ),
        (
            "checksum length",
            with_disk(short_checksum),
            Some("checksum length does not match"),
        ),
        (
            "image file name extension",
            with_disk(bad_filename),
            Some("must be a file name ending in .qcow2"),
        ),
        (
            "memory too small",
            json!({"memory": "8Mi"}),
            Some("memory must be at least 16Mi"),
        ),
        (
            "memory not a quantity",
            json!({"memory": "2 GB"}),
            Some("positive Kubernetes quantity"),
        ),
        (
            "clone with imported disk",
            json!({"clone": {"templateVmid": 9000}, "disks": [good_disk()]}),
            Some("a cloned VM gets its disks from the template"),
        ),
        (
            "clone growing a disk",
            json!({"clone": {"templateName": "jammy"}, "disks": [{"slot": "scsi0", "storage": "local-lvm", "size": "40Gi"}]}),
            None,
        ),
        (
            "clone template named twice",
            json!({"clone": {"templateVmid": 9000, "templateName": "jammy"}}),
            Some("exactly one of templateVmid or templateName"),
        ),
        (
            "clone template named never",
            json!({"clone": {"full": true}}),
            Some("exactly one of templateVmid or templateName"),
        ),
        (
            "linked clone with storage",
            json!({"clone": {"templateVmid": 9000, "full": false, "storage": "fast"}}),
            Some("storage can only be set for full clones"),
        ),
        (
            "node outside allowedNodes",
            json!({"node": "pve3", "allowedNodes": ["pve1", "pve2"]}),
            Some("node must be one of allowedNodes"),
        ),
        (
            "bad node name",
            json!({"node": "-pve"}),
            Some("must be a Proxmox node name"),
        ),
        (
            "bad vm name",
            json!({"name": "web_1"}),
            Some("must be a DNS name"),
        ),
        (
            "bad tag",
            json!({"tags": ["ok", "-bad"]}),
            Some("tags contain letters"),
        ),
        (
            "net slot",
            json!({"networks": [{"slot": "eth0", "bridge": "vmbr0"}]}),
            Some("slot must be net0 ... net31"),
        ),
        (
            "multicast mac",
            json!({"networks": [{"slot": "net0", "bridge": "vmbr0", "mac": "01:00:5E:00:00:01"}]}),
            Some("unicast MAC address"),
        ),
        (
            "good network",
            json!({"networks": [{"slot": "net0", "bridge": "vmbr0", "vlanTag": 10, "mac": "BC:24:11:00:00:01"}]}),
            None,
        ),
        (
            "static ipv4",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net0", "ip": "10.0.0.5/24", "gateway": "10.0.0.1"}]}}),
            None,
        ),
        (
            "gateway with dhcp",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net0", "ip": "dhcp", "gateway": "10.0.0.1"}]}}),
            Some("gateway needs a static ip"),
        ),
        (
            "ipv6 in ip",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net0", "ip": "fd00::5/64"}]}}),
            Some("ip must be dhcp or an IPv4 address"),
        ),
        (
            "address without prefix",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net0", "ip": "10.0.0.5"}]}}),
            Some("ip must be dhcp or an IPv4 address"),
        ),
        (
            "ipv6 slaac",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net1", "ip6": "auto"}]}}),
            None,
        ),
        (
            "nameserver not an ip",
            json!({"cloudInit": {"nameservers": ["dns.example"]}}),
            Some("nameservers must be IP addresses"),
        ),
        (
            "ssh key",
            json!({"cloudInit": {"user": "ubuntu", "sshKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0 me@laptop"]}}),
            None,
        ),
        (
            "ssh key with a newline",
            json!({"cloudInit": {"sshKeys": ["ssh-ed25519 AAAA a\nssh-rsa AAAA b"]}}),
            Some("one OpenSSH public key on one line"),
        ),
        (
            "private key pasted",
            json!({"cloudInit": {"sshKeys": ["-----BEGIN OPENSSH PRIVATE KEY-----"]}}),
            Some("one OpenSSH public key on one line"),
        ),
        (
            "cloud-init drive on a disk slot",
            json!({"disks": [{"slot": "ide2", "storage": "local-lvm", "size": "1Gi"}], "cloudInit": {}}),
            Some("cloudInit.driveSlot is already used by a disk"),
        ),
    ];
    for (name, for_provider, want) in cases {
        let got = refusals(&schema, &vm(for_provider), None);
        match want {
            None => assert!(got.is_empty(), "{name}: refused: {got:?}"),
            Some(msg) => assert!(
                got.iter().any(|g| g.contains(msg)),
                "{name}: want a refusal containing {msg:?}, got {got:?}"
            ),
        }
    }
}

#[test]
fn proxmox_vm_management_policy_rules() {
    let schema = schema_of(ProxmoxVM::crd());
    let with = |policies: Value| {
        let mut obj = vm(json!({}));
        obj["spec"]["managementPolicies"] = policies;
        obj
    };
    assert!(refusals(&schema, &with(json!(["Observe"])), None).is_empty());
    assert!(refusals(&schema, &with(json!([])), None).is_empty());
    let got = refusals(&schema, &with(json!(["*", "Delete"])), None);
    assert!(
        got.iter().any(|g| g.contains("cannot be combined")),
        "{got:?}"
    );
    let got = refusals(&schema, &with(json!(["Create", "Delete"])), None);
    assert!(
        got.iter().any(|g| g.contains("must include Observe")),
        "{got:?}"
    );
}

#[test]
fn proxmox_vm_update_rules() {
    let schema = schema_of(ProxmoxVM::crd());
    let disk = |size: &str| json!({"slot": "scsi0", "storage": "local-lvm", "size": size});
    // (case, old forProvider, new forProvider, None = accepted | Some(message))
    let cases: Vec<(&str, Value, Value, Option<&str>)> = vec![
        (
            "vmid change",
            json!({"vmid": 100}),
            json!({"vmid": 101}),
            Some("vmid cannot be changed"),
        ),
        (
            "vmid removal",
            json!({"vmid": 100}),
            json!({}),
            Some("vmid cannot be changed"),
        ),
        ("vmid added later", json!({}), json!({"vmid": 100}), None),
        (
            "node change",
            json!({"node": "pve1"}),
            json!({"node": "pve2"}),
            Some("node cannot be changed"),
        ),
        (
            "clone source change",
            json!({"clone": {"templateVmid": 9000}}),
            json!({"clone": {"templateVmid": 9001}}),
            Some("the clone source cannot be changed"),
        ),
        (
            "clone added",
            json!({}),
            json!({"clone": {"templateVmid": 9000}}),
            Some("clone cannot be added or removed"),
        ),
        (
            "disk grows",
            json!({"disks": [disk("10Gi")]}),
            json!({"disks": [disk("12Gi")]}),
            None,
        ),
        (
            "disk grows across units",
            json!({"disks": [disk("1Gi")]}),
            json!({"disks": [disk("2000M")]}),
            None,
        ),
        (
            "disk shrinks",
            json!({"disks": [disk("10Gi")]}),
            json!({"disks": [disk("9Gi")]}),
            Some("disks can only grow"),
        ),
        (
            "unrelated change",
            json!({"vmid": 100, "node": "pve1", "memory": "1Gi"}),
            json!({"vmid": 100, "node": "pve1", "memory": "4Gi"}),
            None,
        ),
    ];
    for (name, old, new, want) in cases {
        let got = refusals(&schema, &vm(new), Some(&vm(old)));
        match want {
            None => assert!(got.is_empty(), "{name}: refused: {got:?}"),
            Some(msg) => assert!(
                got.iter().any(|g| g.contains(msg)),
                "{name}: want a refusal containing {msg:?}, got {got:?}"
            ),
        }
    }
}

fn provider_config(kind: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "proxmox.crossplane.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "default"},
        "spec": spec,
    })
}

#[test]
fn provider_config_rules() {
    let namespaced = schema_of(ProviderConfig::crd());
    let cluster = schema_of(ClusterProviderConfig::crd());
    let secret = |ns: Option<&str>| match ns {
        Some(ns) => json!({"secretRef": {"name": "pve", "namespace": ns}}),
        None => json!({"secretRef": {"name": "pve"}}),
    };
    let fp = ["AB"; 32].join(":");
    // (case, schema, kind, spec, None | Some(message))
    let cases: Vec<(&str, &Value, &str, Value, Option<&str>)> = vec![
        (
            "namespaced, own namespace",
            &namespaced,
            "ProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(None)}),
            None,
        ),
        (
            "namespaced naming another namespace",
            &namespaced,
            "ProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("other"))}),
            Some("reads its Secret from its own namespace"),
        ),
        (
            "cluster without namespace",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(None)}),
            Some("must name the Secret's namespace"),
        ),
        (
            "cluster with namespace and pinned fingerprint",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("crossplane-system")),
                   "tls": {"fingerprint": fp.clone()}}),
            None,
        ),
        (
            "plain http to a real host",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "http://pve.example:8006", "credentials": secret(Some("x"))}),
            Some("endpoint must be an https:// URL"),
        ),
        (
            "plain http to a simulator on loopback",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "http://127.0.0.1:8006", "credentials": secret(Some("x"))}),
            None,
        ),
        (
            "short fingerprint",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("x")),
                   "tls": {"fingerprint": "AB:CD"}}),
            Some("fingerprint must be a SHA-256 fingerprint"),
        ),
        (
            "insecure and pinned",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("x")),
                   "tls": {"fingerprint": fp.clone(), "insecureSkipTLSVerify": true}}),
            Some("insecureSkipTLSVerify turns verification off"),
        ),
        (
            "poll interval too short",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("x")),
                   "tasks": {"pollInterval": "10ms"}}),
            Some("pollInterval must be a Go duration between 500ms and 5m"),
        ),
        (
            "tuned timing",
            &cluster,
            "ClusterProviderConfig",
            json!({"endpoint": "https://pve.example:8006", "credentials": secret(Some("x")),
                   "tasks": {"pollInterval": "1s", "timeout": "30m"}, "resyncInterval": "30s"}),
            None,
        ),
    ];
    for (name, schema, kind, spec, want) in cases {
        let got = refusals(schema, &provider_config(kind, spec), None);
        match want {
            None => assert!(got.is_empty(), "{name}: refused: {got:?}"),
            Some(msg) => assert!(
                got.iter().any(|g| g.contains(msg)),
                "{name}: want a refusal containing {msg:?}, got {got:?}"
            ),
        }
    }
}
