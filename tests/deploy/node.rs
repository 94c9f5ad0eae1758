//! The provider deployed the way users deploy it, on a real node: the
//! Dockerfile's two images (built with buildah, `hack/node/images.sh`)
//! imported into the node's containerd (what `kind load docker-image` does),
//! then `kubectl apply -k deploy/` and `deploy/pve-sim/` as they are, then
//! the Helm chart, each with the restricted Pod Security level enforced on
//! `crossplane-system`, then the chart upgraded to the namespaced mode
//! (`watchNamespace`). The node (`hack/node/up.sh`: containerd, runc, the
//! kubelet, kube-proxy, CoreDNS and the CNI bridge next to testenv's
//! apiserver, kube-controller-manager and kube-scheduler) lives in a
//! network namespace of its own; everything here talks to it through
//! `nsenter`.
//!
//! Needs root and Debian 12; what is missing is installed and built (and
//! cached) on first use by the hack/node/ scripts. scripts/kind-e2e.sh runs
//! the same steps on kind, the namespaced upgrade aside.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::tools::{self, repo, run, run_ok, run_with_input};

const NAMESPACE: &str = "crossplane-system";
const DEPLOYMENT: &str = "crossplane-provider-proxmox";
const NETNS: &str = "crossplane-node-test";
/// The token deploy/pve-sim/credentials.yaml gives the simulator.
const PVE_TOKEN: &str = "PVEAPIToken=crossplane@pve!provider=5f0c2d9e-7a41-4c3b-9e58-1d2f6a7b8c90";

/// A node started by hack/node/up.sh, stopped by hack/node/down.sh when
/// dropped (after printing what explains a failure, if the test failed).
struct Node {
    dir: PathBuf,
    kubeconfig: PathBuf,
    /// One node test per machine at a time (other worktrees' `make test`
    /// wait): two kubelets would share the host's `kubepods` cgroups.
    _machine_lock: std::fs::File,
}

fn script(name: &str) -> Command {
    let mut command = Command::new("bash");
    command.arg(repo().join("hack/node").join(name));
    command
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    eprintln!("node test: {what}: {:.1} s", start.elapsed().as_secs_f64());
    out
}

impl Node {
    fn start() -> Self {
        assert!(
            run_ok(Command::new("id").arg("-u")).trim() == "0",
            "the node test needs root (network namespace, mounts, cgroups); \
             run `make test` as root, as CI does"
        );
        let lock_path = std::env::temp_dir().join("crossplane-provider-proxmox-node-test.lock");
        let machine_lock = std::fs::File::create(&lock_path)
            .unwrap_or_else(|e| panic!("creating {}: {e}", lock_path.display()));
        timed("waiting for other node tests on this machine", || {
            machine_lock
                .lock()
                .unwrap_or_else(|e| panic!("locking {}: {e}", lock_path.display()))
        });
        let dir = repo().join(".work/node-test");
        let env = |command: &mut Command| {
            command.env("NODE_DIR", &dir).env("NODE_NETNS", NETNS);
        };
        timed("hack/node/install.sh", || run_ok(&mut script("install.sh")));
        let images = timed("hack/node/images.sh project (the Dockerfile)", || {
            let out = run_ok(script("images.sh").arg("project"));
            out.lines().last().unwrap_or_default().trim().to_owned()
        });
        // A previous run killed half-way leaves a node behind.
        let mut down = script("down.sh");
        env(&mut down);
        run(&mut down);
        let mut up = script("up.sh");
        env(&mut up);
        up.env("NODE_IMAGES", &images);
        let stdout = timed("hack/node/up.sh", || run_ok(&mut up));
        let kubeconfig = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
        assert!(kubeconfig.is_file(), "up.sh printed {stdout:?}");
        Self {
            dir,
            kubeconfig,
            _machine_lock: machine_lock,
        }
    }

    /// A command run inside the node's network namespace.
    fn in_ns(&self, program: &std::path::Path) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--net=/run/netns/{NETNS}"))
            .arg(program)
            .current_dir(repo());
        command
    }

    fn kubectl_command(&self, args: &[&str]) -> Command {
        let mut command = self.in_ns(&self.dir.join("kubectl"));
        command.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        command
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        run(&mut self.kubectl_command(args))
    }

    fn kubectl_ok(&self, args: &[&str]) -> String {
        run_ok(&mut self.kubectl_command(args))
    }

    fn kubectl_apply(&self, yaml: &str) {
        let out = run_with_input(&mut self.kubectl_command(&["apply", "-f", "-"]), yaml);
        assert!(
            out.status.success(),
            "kubectl apply failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl_ok(&all)).expect("kubectl printed JSON")
    }

    fn helm(&self, args: &[&str]) -> String {
        let mut command = self.in_ns(&tools::tool("helm"));
        command.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        run_ok(&mut command)
    }

    /// The one provider pod that is Ready and not going away.
    fn provider_pod(&self) -> Value {
        let pods = self.json(&[
            "-n",
            NAMESPACE,
            "get",
            "pods",
            "-l",
            "app=crossplane-provider-proxmox",
        ]);
        let ready: Vec<Value> = pods["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| {
                p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
            .cloned()
            .collect();
        assert_eq!(ready.len(), 1, "one Ready provider pod: {pods:#}");
        ready[0].clone()
    }

    /// `GET path` of the simulator's API, from inside the namespace, on its
    /// pod's address (the test process is outside the node's network).
    fn pve_sim(&self, path: &str) -> Value {
        let ip = self.pve_sim_ip();
        let mut curl = self.in_ns(std::path::Path::new("curl"));
        curl.args(["-sSfk", "-H"])
            .arg(format!("Authorization: {PVE_TOKEN}"))
            .arg(format!("https://{ip}:8006/api2/json{path}"));
        serde_json::from_str(&run_ok(&mut curl)).expect("pve-sim answers JSON")
    }

    /// The in-cluster pve-sim's pod address.
    fn pve_sim_ip(&self) -> String {
        let pod = self.json(&["-n", NAMESPACE, "get", "pods", "-l", "app=pve-sim"]);
        pod["items"][0]["status"]["podIP"]
            .as_str()
            .unwrap_or_else(|| panic!("pve-sim has no pod IP: {pod:#}"))
            .to_owned()
    }

    /// `POST /_sim/PATH` on the in-cluster pve-sim (its control API: no
    /// token), with a JSON body.
    fn pve_sim_control(&self, path: &str, body: &Value) {
        let ip = self.pve_sim_ip();
        let mut curl = self.in_ns(std::path::Path::new("curl"));
        curl.args([
            "-sSfk",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
        ])
        .arg("--data")
        .arg(body.to_string())
        .arg(format!("https://{ip}:8006/_sim/{path}"));
        run_ok(&mut curl);
    }

    /// The VMs the simulator holds with this VMID.
    fn vms_with_id(&self, vmid: u64) -> usize {
        self.pve_sim("/cluster/resources?type=vm")["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|vm| vm["vmid"].as_u64() == Some(vmid))
            .count()
    }

    fn wait(&self, what: &[&str]) {
        self.kubectl_ok(&[&["wait", "--timeout=180s"], what].concat());
    }

    fn rollout(&self, deployment: &str) {
        self.kubectl_ok(&[
            "-n",
            NAMESPACE,
            "rollout",
            "status",
            &format!("deployment/{deployment}"),
            "--timeout=180s",
        ]);
    }

    /// What explains a failure: pods, events, the provider's log.
    fn diagnostics(&self) {
        for args in [
            &[
                "get",
                "pods,deployments,proxmoxvms,clusterproviderconfigs,leases",
                "-A",
                "-o",
                "wide",
            ][..],
            &["get", "events", "-A", "--sort-by=.lastTimestamp"],
            &["-n", NAMESPACE, "describe", "pods"],
            &[
                "-n",
                NAMESPACE,
                "logs",
                "-l",
                "app=crossplane-provider-proxmox",
                "--tail=80",
                "--prefix",
            ],
            &["-n", "default", "get", "proxmoxvms", "-o", "yaml"],
            // DiskPressure and the like: the kubelet evicts the provider
            // when the machine's disk fills (seen at 99%).
            &[
                "get",
                "nodes",
                "-o",
                "custom-columns=NODE:.metadata.name,CONDITIONS:.status.conditions[*].type,STATUS:.status.conditions[*].status",
            ],
        ] {
            let out = self.kubectl(args);
            eprintln!(
                "--- kubectl {}\n{}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        eprintln!(
            "--- node logs (kubelet, containerd, control plane) in {}",
            self.dir.display()
        );
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.diagnostics();
        }
        let mut down = script("down.sh");
        down.env("NODE_DIR", &self.dir).env("NODE_NETNS", NETNS);
        if std::thread::panicking() {
            down.env("KEEP_NODE_DIR", "1");
        }
        let out = timed("hack/node/down.sh", || run(&mut down));
        if !out.status.success() {
            eprintln!("down.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

/// `crossplane-system` with the restricted level enforced, before anything
/// is installed into it: a pod that breaks the level is refused.
fn restricted_namespace(node: &Node) {
    // Created and labelled imperatively, as scripts/kind-e2e.sh does: the
    // apply of deploy/ then merges its own labels and keeps these (an
    // applied Namespace would lose them to the next apply).
    node.kubectl_ok(&["create", "namespace", NAMESPACE]);
    node.kubectl_ok(&[
        "label",
        "namespace",
        NAMESPACE,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    ]);
}

/// deploy/pve-sim/ as it is, with its TLS Secret from scripts/pve-sim-tls.sh.
fn install_pve_sim(node: &Node) {
    node.kubectl_apply(&tools::pve_sim_tls(&["--namespace", NAMESPACE]));
    node.kubectl_ok(&["apply", "-k", "deploy/pve-sim"]);
    node.rollout("pve-sim");
}

/// The checks every install path must pass: the provider pod runs as its
/// ServiceAccount, is Ready through its probes and holds the Lease; a
/// ProxmoxVM from examples/ becomes Ready against the in-cluster pve-sim;
/// its log shows the reconcile; its metrics are scraped from the pod; a
/// delete removes the VM.
fn provider_works(node: &Node, path: &str) {
    node.rollout(DEPLOYMENT);
    let pod = node.provider_pod();
    let pod_name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        pod["spec"]["serviceAccountName"], DEPLOYMENT,
        "{path}: {pod:#}"
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["readinessProbe"]["httpGet"]["path"], "/readyz",
        "{path}"
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"]["path"], "/healthz",
        "{path}"
    );
    assert!(
        pod["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["projected"]["sources"][0]["serviceAccountToken"].is_object()),
        "{path}: the pod gets its ServiceAccount token volume: {pod:#}"
    );
    // A Lease names the pod: it authenticated as its ServiceAccount
    // (RBAC lets nothing else write it).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let holder = node.kubectl(&[
            "-n",
            NAMESPACE,
            "get",
            "lease",
            "-l",
            "proxmox.crossplane.io/lease=member",
            "-o",
            "jsonpath={.items[*].spec.holderIdentity}",
        ]);
        // Its member Lease (one per replica; the config Leases follow).
        // The identity is the pod's name and a per-process suffix.
        if String::from_utf8_lossy(&holder.stdout)
            .split_whitespace()
            .any(|h| h.starts_with(&format!("{pod_name}-")))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{path}: {pod_name} never took the Lease"
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    node.kubectl_ok(&["-n", "default", "apply", "-f", "examples/vm-100.yaml"]);
    timed(&format!("{path}: examples/vm-100.yaml Ready"), || {
        node.wait(&["-n", "default", "--for=condition=Ready", "proxmoxvm/vm-100"])
    });
    assert_eq!(node.vms_with_id(100), 1, "{path}: VM 100 in the simulator");

    let log = node.kubectl_ok(&["-n", NAMESPACE, "logs", &format!("pod/{pod_name}")]);
    assert!(
        log.lines()
            .any(|l| l.contains("vm-100") && l.contains("reconcil")),
        "{path}: the provider's log shows the reconcile of vm-100:\n{log}"
    );
    let metrics = node.kubectl_ok(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod_name}:8080/proxy/metrics"),
    ]);
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("proxmox_provider_reconcile")),
        "{path}: reconcile metrics scraped from the pod:\n{metrics}"
    );

    timed(&format!("{path}: vm-100 deleted"), || {
        delete_vm_100(node, path)
    });
}

/// Deletes ProxmoxVM vm-100; the VM must be gone from the simulator.
fn delete_vm_100(node: &Node, path: &str) {
    node.kubectl_ok(&[
        "-n",
        "default",
        "delete",
        "proxmoxvm",
        "vm-100",
        "--wait",
        "--timeout=180s",
    ]);
    assert_eq!(
        node.vms_with_id(100),
        0,
        "{path}: VM 100 gone from the simulator"
    );
}

/// `kubectl rollout restart` while the provider follows an import task: the
/// new leader follows the same task (status.atProvider.task) to the end; no second
/// VM, no second create.
fn restart_during_import(node: &Node) {
    // VM 100 was created (and deleted) before: the simulator keeps those tasks.
    let earlier = creates_of_vm_100(node);
    // The import runs until the restart is over (at the add-on's time scale
    // it would take about 3 s: the restart could come after its end).
    node.pve_sim_control(
        "faults",
        &serde_json::json!({"fault": "task-held", "hold": "import", "task_type": "qmcreate"}),
    );
    node.kubectl_ok(&["-n", "default", "apply", "-f", "examples/vm-100.yaml"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let upid = loop {
        let out = node.kubectl(&[
            "-n",
            "default",
            "get",
            "proxmoxvm",
            "vm-100",
            "-o",
            "jsonpath={.status.atProvider.task.type} {.status.atProvider.task.upid}",
        ]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(upid) = text.strip_prefix("qmcreate ") {
            break upid.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "vm-100 never showed its import task: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    node.kubectl_ok(&[
        "-n",
        NAMESPACE,
        "rollout",
        "restart",
        &format!("deployment/{DEPLOYMENT}"),
    ]);
    node.rollout(DEPLOYMENT);
    node.pve_sim_control("release", &serde_json::json!({"hold": "import"}));
    node.wait(&["-n", "default", "--for=condition=Ready", "proxmoxvm/vm-100"]);
    assert_eq!(node.vms_with_id(100), 1, "one VM 100 after the restart");
    let creates: Vec<Value> = creates_of_vm_100(node)
        .into_iter()
        .filter(|t| !earlier.contains(t))
        .collect();
    assert_eq!(
        creates,
        [Value::from(upid.as_str())],
        "one create task, the one started before the restart"
    );
    delete_vm_100(node, "after the restart");
}

/// The UPIDs of the simulator's create tasks of VM 100.
fn creates_of_vm_100(node: &Node) -> Vec<Value> {
    node.pve_sim("/nodes/pve/tasks?vmid=100&limit=1000")["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "qmcreate")
        .map(|t| t["upid"].clone())
        .collect()
}

/// Everything kustomize installed into crossplane-system and the cluster
/// scope but the namespace (pve-sim stays) and the CRDs (Helm's chart
/// carries the same).
fn uninstall_kustomize(node: &Node) {
    let rendered = node.kubectl_ok(&["kustomize", "deploy"]);
    let keep = ["Namespace", "CustomResourceDefinition"];
    let rest: Vec<String> = tools::yaml_docs(&rendered, "kubectl kustomize deploy")
        .into_iter()
        .filter(|d| !keep.contains(&d["kind"].as_str().unwrap_or_default()))
        .map(|d| serde_json::to_string(&d).expect("JSON"))
        .collect();
    let out = run_with_input(
        &mut node.kubectl_command(&["delete", "--wait", "-f", "-"]),
        &rest.join("\n"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    node.wait(&[
        "-n",
        NAMESPACE,
        "--for=delete",
        "pod",
        "-l",
        "app=crossplane-provider-proxmox",
    ]);
}

/// `helm install` or `helm upgrade` (`verb`) of the chart as release
/// [`DEPLOYMENT`] in [`NAMESPACE`], with the image the node holds and the
/// values `set`, waiting until it is ready.
fn helm_release(node: &Node, verb: &str, set: &[&str]) -> String {
    let mut args = vec![
        verb,
        DEPLOYMENT,
        tools::CHART,
        "--namespace",
        NAMESPACE,
        "--set",
        "image.tag=latest",
        "--wait",
        "--timeout=180s",
    ];
    args.extend(set.iter().flat_map(|s| ["--set", s]));
    node.helm(&args)
}

/// The namespace the chart's namespaced mode serves.
const SERVED: &str = "team-a";

/// The chart upgraded to the namespaced mode (`watchNamespace`): a Role in
/// [`SERVED`] instead of the ClusterRole, and the provider serves only
/// that namespace: there a ProxmoxVM of examples/vm-100.yaml naming a
/// ProviderConfig of [`SERVED`] (pointing at the in-cluster pve-sim, its
/// credentials and CA copied there) becomes Ready and is deleted with its
/// VM, while the same ProxmoxVM in `default` is left untouched; the
/// replica's Leases, in the release namespace, say which namespace they
/// serve.
fn namespaced_helm_works(node: &Node) {
    let before = node.provider_pod()["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    node.kubectl_ok(&["create", "namespace", SERVED]);
    timed("helm upgrade --set watchNamespace", || {
        helm_release(node, "upgrade", &[&format!("watchNamespace={SERVED}")])
    });
    node.rollout(DEPLOYMENT);
    // The cluster-wide replica is gone before anything else is applied.
    node.wait(&["-n", NAMESPACE, "--for=delete", &format!("pod/{before}")]);
    let pod = node.provider_pod();
    let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
    // The simulator's credentials and CA, as a team would hold them.
    let mut credentials = tools::yaml_docs(
        &tools::read("deploy/pve-sim/credentials.yaml"),
        "deploy/pve-sim/credentials.yaml",
    )[0]
    .clone();
    credentials["metadata"] =
        serde_json::json!({"name": "pve-sim-credentials", "namespace": SERVED});
    let ca = node.kubectl_ok(&[
        "-n",
        NAMESPACE,
        "get",
        "secret",
        "pve-sim-tls",
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]);
    let config = serde_json::json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "pve-sim", "namespace": SERVED},
        "spec": {
            "endpoint": format!("https://pve-sim.{NAMESPACE}.svc:8006"),
            "credentials": {"source": "Secret", "secretRef": {"name": "pve-sim-credentials"}},
            "tls": {"caBundleSecretRef": {"name": "pve-sim-ca", "key": "ca.crt"}},
            "tasks": {"pollInterval": "1s"},
        },
    });
    let ca = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "pve-sim-ca", "namespace": SERVED},
        "data": {"ca.crt": ca.trim()},
    });
    let mut vm =
        tools::yaml_docs(&tools::read("examples/vm-100.yaml"), "examples/vm-100.yaml")[0].clone();
    let mut unserved = vm.clone();
    unserved["metadata"]["namespace"] = "default".into();
    vm["metadata"]["namespace"] = SERVED.into();
    vm["spec"]["providerConfigRef"] =
        serde_json::json!({"kind": "ProviderConfig", "name": "pve-sim"});
    for object in [&credentials, &ca, &config, &unserved, &vm] {
        node.kubectl_apply(&object.to_string());
    }
    timed(&format!("namespaced: {SERVED}/vm-100 Ready"), || {
        node.wait(&["-n", SERVED, "--for=condition=Ready", "proxmoxvm/vm-100"])
    });
    assert_eq!(node.vms_with_id(100), 1, "VM 100 in the simulator");
    let untouched = node.json(&["-n", "default", "get", "proxmoxvm", "vm-100"]);
    assert!(
        untouched["status"].is_null() && untouched["metadata"]["finalizers"].is_null(),
        "default/vm-100 untouched: {untouched:#}"
    );
    let holders = node.kubectl_ok(&[
        "-n",
        NAMESPACE,
        "get",
        "lease",
        "-l",
        &format!("proxmox.crossplane.io/lease=member,proxmox.crossplane.io/serves={SERVED}"),
        "-o",
        "jsonpath={.items[*].spec.holderIdentity}",
    ]);
    assert!(
        holders
            .split_whitespace()
            .any(|h| h.starts_with(&format!("{pod_name}-"))),
        "{pod_name}'s member Lease serves {SERVED}: {holders:?}"
    );
    node.kubectl_ok(&[
        "-n",
        SERVED,
        "delete",
        "proxmoxvm",
        "vm-100",
        "--wait",
        "--timeout=180s",
    ]);
    assert_eq!(node.vms_with_id(100), 0, "VM 100 gone from the simulator");
    node.kubectl_ok(&["-n", "default", "delete", "proxmoxvm", "vm-100", "--wait"]);
}

#[test]
fn kustomize_and_helm_installs_run_on_a_real_node() {
    let node = Node::start();
    restricted_namespace(&node);

    timed("kubectl apply -k deploy/ + deploy/pve-sim/", || {
        node.kubectl_ok(&["apply", "-k", "deploy"]);
        node.wait(&[
            "--for=condition=Established",
            "crd/proxmoxvms.proxmox.m.crossplane.io",
        ]);
        install_pve_sim(&node);
    });
    let labels = node.json(&["get", "namespace", NAMESPACE]);
    assert_eq!(
        labels["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
        "{labels:#}"
    );
    timed("kustomize: provider checks", || {
        provider_works(&node, "kubectl apply -k deploy/")
    });
    timed("kustomize: rollout restart during an import", || {
        restart_during_import(&node)
    });
    uninstall_kustomize(&node);

    timed("helm install", || helm_release(&node, "install", &[]));
    timed("helm: provider checks", || {
        provider_works(&node, "helm install")
    });
    timed("helm, namespaced: provider checks", || {
        namespaced_helm_works(&node)
    });
    node.helm(&["uninstall", DEPLOYMENT, "--namespace", NAMESPACE, "--wait"]);
}
