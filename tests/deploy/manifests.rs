//! Every manifest of `deploy/` is accepted by the real API server
//! (`kubectl apply --dry-run=server`, after the CRDs are installed and the
//! namespace exists): the kustomize install, the pve-sim add-on with the
//! TLS Secret its script makes, the Helm chart with default and other
//! values (and `helm lint`); the chart renders what kustomize installs; and
//! the pods meet the "restricted" Pod Security Standard, as enforced by the
//! API server's own admission.

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::support;
use crate::tools::{
    CHART, find, helm, helm_template, kinds_and_names, kustomize, prerequisites, pve_sim_tls, repo,
    server_version, tool, yaml_docs,
};

#[tokio::test]
async fn kustomize_install_is_accepted_by_the_api_server() {
    prerequisites().await;
    let rendered = kustomize("deploy").await;
    let docs = yaml_docs(&rendered, "kubectl kustomize deploy/");
    assert_eq!(
        kinds_and_names(&docs),
        [
            "ClusterRole/crossplane-provider-proxmox",
            "ClusterRoleBinding/crossplane-provider-proxmox",
            "CustomResourceDefinition/clusterproviderconfigs.proxmox.crossplane.io",
            "CustomResourceDefinition/providerconfigs.proxmox.crossplane.io",
            "CustomResourceDefinition/proxmoxcontainers.proxmox.crossplane.io",
            "CustomResourceDefinition/proxmoximages.proxmox.crossplane.io",
            "CustomResourceDefinition/proxmoxipsets.proxmox.crossplane.io",
            "CustomResourceDefinition/proxmoxsecuritygroups.proxmox.crossplane.io",
            "CustomResourceDefinition/proxmoxvms.proxmox.crossplane.io",
            "Deployment/crossplane-provider-proxmox",
            "Namespace/crossplane-system",
            "Role/crossplane-provider-proxmox-leader-election",
            "RoleBinding/crossplane-provider-proxmox-leader-election",
            "Service/crossplane-provider-proxmox-metrics",
            "ServiceAccount/crossplane-provider-proxmox",
        ]
    );
    let out = support::apply_dry_run_server(rendered.as_str(), None).await;
    assert_eq!(out.matches("(server dry run)").count(), docs.len(), "{out}");

    // What the runbook relies on.
    let deployment = find(&docs, "Deployment", "crossplane-provider-proxmox");
    assert_eq!(deployment["metadata"]["namespace"], "crossplane-system");
    let pod = &deployment["spec"]["template"];
    assert_eq!(
        pod["metadata"]["labels"]["app"],
        "crossplane-provider-proxmox"
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], "crossplane-provider-proxmox:latest");
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["ports"][0]["containerPort"], 8080);
    let env = env_map(container);
    assert_eq!(env["LEADER_ELECTION"], "true");
    assert_eq!(env["POD_NAMESPACE"], "fieldRef:metadata.namespace");
    let service = find(&docs, "Service", "crossplane-provider-proxmox-metrics");
    assert_eq!(
        service["spec"]["selector"],
        json!({"app": pod["metadata"]["labels"]["app"]})
    );
}

/// A container's environment as name → value (or `fieldRef:<path>`).
fn env_map(container: &Value) -> std::collections::BTreeMap<String, String> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let value = match e["value"].as_str() {
                Some(v) => v.to_owned(),
                None => format!(
                    "fieldRef:{}",
                    e["valueFrom"]["fieldRef"]["fieldPath"]
                        .as_str()
                        .unwrap_or("?")
                ),
            };
            (e["name"].as_str().unwrap().to_owned(), value)
        })
        .collect()
}

#[tokio::test]
async fn pve_sim_addon_is_accepted_and_consistent() {
    prerequisites().await;
    let tls = pve_sim_tls(&[]);
    support::apply_dry_run_server(tls.as_str(), None).await;

    let rendered = kustomize("deploy/pve-sim").await;
    let docs = yaml_docs(&rendered, "kubectl kustomize deploy/pve-sim/");
    assert_eq!(
        kinds_and_names(&docs),
        [
            "ClusterProviderConfig/default",
            "Deployment/pve-sim",
            "Secret/pve-sim-credentials",
            "Service/pve-sim",
        ]
    );
    support::apply_dry_run_server(rendered.as_str(), None).await;

    // The pieces refer to each other by name; a typo would only show in kind.
    let tls = &yaml_docs(&tls, "pve-sim-tls.sh")[0];
    let deployment = find(&docs, "Deployment", "pve-sim");
    let service = find(&docs, "Service", "pve-sim");
    let config = find(&docs, "ClusterProviderConfig", "default");
    let credentials = find(&docs, "Secret", "pve-sim-credentials");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    // The image's ENTRYPOINT runs (the Dockerfile's `pve-sim` stage; the
    // pve_sim group checks that it is the simulator).
    assert!(container.get("command").is_none(), "{container}");
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        tls["metadata"]["name"]
    );
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.contains(&format!("--tls-cert={mount}/tls.crt").as_str()),
        "{args:?}"
    );
    assert!(
        args.contains(&format!("--tls-key={mount}/tls.key").as_str()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--api-token=$(PVE_TOKEN_ID)=$(PVE_TOKEN_SECRET)"),
        "{args:?}"
    );
    // The token comes from the Secret the ClusterProviderConfig names; the
    // user the simulator grants the role to is the token's user.
    let token_id = credentials["stringData"]["tokenId"].as_str().unwrap();
    for env in container["env"].as_array().unwrap() {
        match env["name"].as_str().unwrap() {
            "PVE_USER" => assert_eq!(env["value"], token_id.split('!').next().unwrap()),
            name => assert_eq!(
                env["valueFrom"]["secretKeyRef"]["name"], credentials["metadata"]["name"],
                "{name}"
            ),
        }
    }
    assert_eq!(
        service["spec"]["selector"]["app"],
        deployment["spec"]["template"]["metadata"]["labels"]["app"]
    );
    let port = service["spec"]["ports"][0]["port"].as_u64().unwrap();
    let host = format!(
        "{}.{}.svc",
        service["metadata"]["name"].as_str().unwrap(),
        service["metadata"]["namespace"].as_str().unwrap()
    );
    assert_eq!(config["spec"]["endpoint"], format!("https://{host}:{port}"));
    assert_eq!(
        config["spec"]["credentials"]["secretRef"]["name"],
        credentials["metadata"]["name"]
    );
    assert_eq!(
        config["spec"]["credentials"]["secretRef"]["namespace"],
        credentials["metadata"]["namespace"]
    );
    let ca = &config["spec"]["tls"]["caBundleSecretRef"];
    assert_eq!(ca["name"], tls["metadata"]["name"]);
    assert_eq!(ca["namespace"], tls["metadata"]["namespace"]);
    assert!(tls["data"].get(ca["key"].as_str().unwrap()).is_some());
}

#[tokio::test]
async fn helm_chart_renders_what_kustomize_installs() {
    prerequisites().await;
    let version = server_version().await;
    let rendered = helm_template(&version, &[]);
    let helm_docs = yaml_docs(&rendered, "helm template");
    support::apply_dry_run_server(rendered.as_str(), None).await;

    let kustomize_docs: Vec<Value> = yaml_docs(&kustomize("deploy").await, "deploy/")
        .into_iter()
        .filter(|d| d["kind"] != "Namespace") // Helm installs into an existing one
        .collect();
    assert_eq!(
        kinds_and_names(&helm_docs),
        kinds_and_names(&kustomize_docs)
    );
    for (kind, name) in [
        ("ClusterRole", "crossplane-provider-proxmox"),
        ("Role", "crossplane-provider-proxmox-leader-election"),
    ] {
        assert_eq!(
            find(&helm_docs, kind, name)["rules"],
            find(&kustomize_docs, kind, name)["rules"],
            "{kind} {name}: the chart and deploy/ grant the same"
        );
    }
    let pod = |docs: &[Value]| {
        find(docs, "Deployment", "crossplane-provider-proxmox")["spec"]["template"]["spec"].clone()
    };
    let (h, k) = (pod(&helm_docs), pod(&kustomize_docs));
    for field in [
        "securityContext",
        "volumes",
        "serviceAccountName",
        "terminationGracePeriodSeconds",
    ] {
        assert_eq!(h[field], k[field], "pod {field}");
    }
    let (hc, kc) = (&h["containers"][0], &k["containers"][0]);
    for field in [
        "args",
        "ports",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "securityContext",
        "volumeMounts",
        "imagePullPolicy",
    ] {
        assert_eq!(hc[field], kc[field], "container {field}");
    }
    assert_eq!(env_map(hc), env_map(kc), "container env");
    // Only the image tag differs: the chart defaults to its appVersion.
    assert_eq!(hc["image"], "crossplane-provider-proxmox:0.1.0");
    let latest = yaml_docs(
        &helm_template(&version, &["--set", "image.tag=latest"]),
        "helm",
    );
    assert_eq!(pod(&latest)["containers"][0]["image"], kc["image"]);
}

/// The namespaced mode's two installs, deploy/namespaced/ and the chart's
/// `watchNamespace`: nothing cluster-scoped (the CRDs aside, installed once
/// per cluster), a Role of the namespace served with the ClusterRole's
/// rules less ClusterProviderConfigs, and WATCH_NAMESPACE; each accepted by
/// the API server.
#[tokio::test]
async fn the_namespaced_installs_are_roles_of_the_namespace_served() {
    prerequisites().await;
    let ns = support::namespace("namespaced").await;
    let version = server_version().await;
    let kustomized = yaml_docs(&kustomize("deploy/namespaced").await, "deploy/namespaced/");
    let charted: Vec<Value> = yaml_docs(
        &helm_template(&version, &["--set", "watchNamespace=team-a"]),
        "helm template --set watchNamespace=team-a",
    )
    .into_iter()
    .filter(|d| d["kind"] != "CustomResourceDefinition")
    .collect();
    let names = [
        "Deployment/crossplane-provider-proxmox",
        "Role/crossplane-provider-proxmox",
        "Role/crossplane-provider-proxmox-leader-election",
        "RoleBinding/crossplane-provider-proxmox",
        "RoleBinding/crossplane-provider-proxmox-leader-election",
        "Service/crossplane-provider-proxmox-metrics",
        "ServiceAccount/crossplane-provider-proxmox",
    ];
    assert_eq!(kinds_and_names(&kustomized), names);
    assert_eq!(kinds_and_names(&charted), names);
    assert!(
        kustomized
            .iter()
            .all(|d| d["metadata"]["namespace"] == "team-a"),
        "everything in the namespace served"
    );
    let role = |docs: &[Value]| find(docs, "Role", "crossplane-provider-proxmox").clone();
    assert_eq!(role(&charted)["metadata"]["namespace"], "team-a");
    assert_eq!(role(&charted)["rules"], role(&kustomized)["rules"]);
    // The ClusterRole's rules, without ClusterProviderConfigs.
    let cluster = yaml_docs(&kustomize("deploy").await, "deploy/");
    let mut rules = find(&cluster, "ClusterRole", "crossplane-provider-proxmox")["rules"].clone();
    for rule in rules.as_array_mut().unwrap() {
        rule["resources"]
            .as_array_mut()
            .unwrap()
            .retain(|r| !r.as_str().unwrap().starts_with("clusterproviderconfigs"));
    }
    assert_eq!(role(&kustomized)["rules"], rules);
    let env = |docs: &[Value]| {
        env_map(
            &find(docs, "Deployment", "crossplane-provider-proxmox")["spec"]["template"]["spec"]["containers"]
                [0],
        )
    };
    assert_eq!(
        env(&kustomized)["WATCH_NAMESPACE"],
        "fieldRef:metadata.namespace"
    );
    assert_eq!(env(&charted)["WATCH_NAMESPACE"], "team-a");
    let default = yaml_docs(&helm_template(&version, &[]), "helm template");
    assert!(!env(&default).contains_key("WATCH_NAMESPACE"));
    // Into the test's namespace instead of team-a (and crossplane-system).
    for docs in [kustomized, charted] {
        let moved: Vec<String> = docs
            .into_iter()
            .map(|mut d| {
                d["metadata"]["namespace"] = json!(ns.name());
                if let Some(subjects) = d["subjects"].as_array_mut() {
                    for subject in subjects {
                        subject["namespace"] = json!(ns.name());
                    }
                }
                d.to_string()
            })
            .collect();
        support::apply_dry_run_server(moved.join("\n---\n").as_str(), None).await;
    }
}

#[tokio::test]
async fn helm_chart_with_other_values_is_accepted() {
    prerequisites().await;
    // The optional ServiceMonitor needs the Prometheus Operator's CRD: the
    // real one, from the pinned prometheus-operator module.
    support::install_crds(tool("servicemonitor-crd")).await;
    let version = server_version().await;
    let values = repo().join(CHART).join("ci/other-values.yaml");
    let rendered = helm_template(&version, &["--values", &values.display().to_string()]);
    let docs = yaml_docs(&rendered, "helm template (other values)");
    support::apply_dry_run_server(rendered.as_str(), None).await;

    let deployment = find(&docs, "Deployment", "proxmox");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert_eq!(pod["tolerations"][0]["key"], "dedicated");
    assert_eq!(pod["securityContext"]["runAsUser"], 2000);
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert!(pod["affinity"]["podAntiAffinity"].is_object());
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        "registry.example/proxmox/provider:v9.9.9"
    );
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(container["resources"]["limits"]["memory"], "512Mi");
    let env = env_map(container);
    assert_eq!(env["RUST_LOG"], "info,provider_proxmox=debug");
    assert_eq!(env["LOG_FORMAT"], "text");
    assert_eq!(env["POLL_INTERVAL"], "30s");
    assert_eq!(env["LEADER_ELECTION"], "true");
    assert_eq!(env["MAX_CONCURRENT_RECONCILES"], "4");
    assert_eq!(env["METRICS_ADDR"], "0.0.0.0:9090");
    assert_eq!(env["EXTRA"], "yes");
    let monitor = find(&docs, "ServiceMonitor", "proxmox");
    let service = find(&docs, "Service", "proxmox-metrics");
    for (key, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "ServiceMonitor selects the Service"
        );
    }
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
    assert_eq!(
        monitor["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    assert_eq!(
        find(&docs, "ServiceAccount", "proxmox")["metadata"]["annotations"]["example.com/role"],
        "provider"
    );
}

#[test]
fn helm_lint_passes_with_default_and_other_values() {
    let values = repo().join(CHART).join("ci/other-values.yaml");
    for extra in [vec![], vec!["--values", values.to_str().unwrap()]] {
        let mut args = vec!["lint", "--strict", CHART];
        args.extend(extra);
        let out = helm(&args);
        assert!(
            out.status.success(),
            "helm {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn helm_values_schema_refuses_bad_values() {
    for (set, field) in [
        ("logFormat=xml", "logFormat"),
        ("pollInterval=soon", "pollInterval"),
        ("replicas=-1", "replicas"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("metrics.port=0", "port"),
        ("watchNamespace=Team_A", "watchNamespace"),
        ("typoedKey=1", "typoedKey"),
    ] {
        let out = helm(&[
            "template",
            "x",
            CHART,
            "--kube-version",
            "1.36.0",
            "--set",
            set,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--set {set} was accepted");
        assert!(
            stderr.contains("values don't meet the specifications of the schema")
                && stderr.contains(field),
            "--set {set}: {stderr}"
        );
    }
}

/// A namespace whose Pod Security admission enforces "restricted".
async fn restricted_namespace() -> support::TestNamespace {
    let ns = support::namespace("restricted").await;
    Api::<Namespace>::all(support::client())
        .patch(
            ns.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
            }}})),
        )
        .await
        .unwrap();
    ns
}

/// A Pod made of a Deployment's template, as the ReplicaSet would make it
/// (its ServiceAccount need not exist for this check).
fn pod_of(deployment: &Value, name: &str) -> Value {
    let mut spec = deployment["spec"]["template"]["spec"].clone();
    spec.as_object_mut().unwrap().remove("serviceAccountName");
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn pods_meet_the_restricted_pod_security_standard() {
    let ns = restricted_namespace().await;
    let version = server_version().await;
    let provider = yaml_docs(&kustomize("deploy").await, "deploy/");
    let sim = yaml_docs(&kustomize("deploy/pve-sim").await, "deploy/pve-sim/");
    let chart = yaml_docs(&helm_template(&version, &[]), "helm template");
    let pods = [
        pod_of(
            find(&provider, "Deployment", "crossplane-provider-proxmox"),
            "kustomize-provider",
        ),
        pod_of(find(&sim, "Deployment", "pve-sim"), "pve-sim"),
        pod_of(
            find(&chart, "Deployment", "crossplane-provider-proxmox"),
            "helm-provider",
        ),
    ];
    for pod in &pods {
        support::apply_dry_run_server(pod.to_string().as_str(), Some(ns.name())).await;
    }
    // The check is real: the same pod allowed to escalate privileges is refused.
    let mut loose = pods[0].clone();
    loose["metadata"]["name"] = json!("loose");
    loose["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = json!(true);
    let message = support::apply_expect_rejected(loose.to_string().as_str(), Some(ns.name())).await;
    assert!(
        message.contains("violates PodSecurity \"restricted:latest\"")
            && message.contains("allowPrivilegeEscalation"),
        "{message}"
    );
}
