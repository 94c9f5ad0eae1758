//! The pve-sim add-on (`deploy/pve-sim/`) without Kubernetes: the pod's
//! command line, with `$(VAR)`s expanded from its env and Secret as the
//! kubelet would, starts the real `pve-sim` binary; it serves the
//! certificate `scripts/pve-sim-tls.sh` makes, which verifies against the
//! CA for the host name of the ClusterProviderConfig's endpoint; and the
//! provider's token, holding only the least-privilege role of
//! docs/install.md, can do what the provider does: create with a disk
//! import, grow the disk, clone the template, start, stop and destroy.
//!
//! Only the listen address (loopback here) and the file paths of the
//! mounted Secret differ from the pod.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;

use crate::support;
use crate::tools::{find, pve_sim_tls, read, repo, run_ok, temp_file, tool, yaml_docs};

/// Kills the simulator when the test ends, passed or not.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Sim {
    _process: Running,
    client: reqwest::Client,
    base: String,
    token: String,
}

impl Sim {
    fn url(&self, path: &str) -> String {
        format!("{}/api2/json{path}", self.base)
    }

    async fn call(&self, method: reqwest::Method, path: &str, form: &[(&str, &str)]) -> Value {
        let mut request = self
            .client
            .request(method.clone(), self.url(path))
            .header("Authorization", format!("PVEAPIToken={}", self.token));
        if !form.is_empty() {
            // Like PVE: parameters of GET and DELETE go in the query.
            request = if method == reqwest::Method::GET || method == reqwest::Method::DELETE {
                request.query(form)
            } else {
                request.form(form)
            };
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {body}");
        serde_json::from_str::<Value>(&body).unwrap()["data"].clone()
    }

    /// Starts a task and waits until it stopped; asserts it succeeded.
    async fn task(&self, method: reqwest::Method, path: &str, form: &[(&str, &str)]) {
        let upid = self.call(method, path, form).await;
        let upid = upid
            .as_str()
            .unwrap_or_else(|| panic!("{path}: no UPID: {upid}"));
        let status_path = format!("/nodes/pve/tasks/{upid}/status");
        let status = support::poll(
            &format!("task {upid}"),
            Duration::from_secs(120),
            || async {
                let status = self.call(reqwest::Method::GET, &status_path, &[]).await;
                if status["status"] == "stopped" {
                    Ok(status)
                } else {
                    Err(format!("{status}"))
                }
            },
        )
        .await;
        assert_eq!(status["exitstatus"], "OK", "{path}: {status}");
    }
}

/// The pod's container and the objects it refers to, from the manifests.
struct AddOn {
    container: Value,
    credentials: BTreeMap<String, String>,
    endpoint: url::Url,
}

fn add_on() -> AddOn {
    let deployment = yaml_docs(&read("deploy/pve-sim/deployment.yaml"), "deployment.yaml");
    let credentials = yaml_docs(&read("deploy/pve-sim/credentials.yaml"), "credentials.yaml");
    let config = yaml_docs(
        &read("deploy/pve-sim/clusterproviderconfig.yaml"),
        "clusterproviderconfig.yaml",
    );
    let container =
        find(&deployment, "Deployment", "pve-sim")["spec"]["template"]["spec"]["containers"][0]
            .clone();
    let credentials: BTreeMap<String, String> = serde_json::from_value(
        find(&credentials, "Secret", "pve-sim-credentials")["stringData"].clone(),
    )
    .unwrap();
    let endpoint = find(&config, "ClusterProviderConfig", "default")["spec"]["endpoint"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    AddOn {
        container,
        credentials,
        endpoint,
    }
}

/// The container's args with `$(VAR)` expanded from its env, as the kubelet does.
fn expanded_args(add_on: &AddOn) -> Vec<String> {
    let mut env = BTreeMap::new();
    for var in add_on.container["env"].as_array().unwrap() {
        let value = match var["value"].as_str() {
            Some(v) => v.to_owned(),
            None => {
                let key = &var["valueFrom"]["secretKeyRef"];
                assert_eq!(key["name"], "pve-sim-credentials");
                add_on.credentials[key["key"].as_str().unwrap()].clone()
            }
        };
        env.insert(var["name"].as_str().unwrap().to_owned(), value);
    }
    let reference = regex::Regex::new(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)").unwrap();
    add_on.container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| {
            reference
                .replace_all(arg.as_str().unwrap(), |c: &regex::Captures| {
                    env.get(&c[1])
                        .unwrap_or_else(|| panic!("$({}) is not in the env", &c[1]))
                        .clone()
                })
                .into_owned()
        })
        .collect()
}

async fn start() -> Sim {
    provider_proxmox::install_crypto_provider();
    let add_on = add_on();
    let tls: Secret =
        serde_json::from_value(yaml_docs(&pve_sim_tls(&[]), "pve-sim-tls.sh").remove(0)).unwrap();
    let tls = tls.data.unwrap();
    let mount = add_on.container["volumeMounts"][0]["mountPath"]
        .as_str()
        .unwrap();
    let dir = temp_file(".tls", "").with_extension("mount");
    std::fs::create_dir_all(&dir).unwrap();
    for key in ["tls.crt", "tls.key"] {
        std::fs::write(dir.join(key), &tls[key].0).unwrap();
    }

    let args: Vec<String> = expanded_args(&add_on)
        .into_iter()
        .map(|arg| {
            if arg.starts_with("--listen=") {
                "--listen=127.0.0.1:0".to_owned()
            } else {
                arg.replace(mount, &dir.display().to_string())
            }
        })
        .collect();
    assert_eq!(
        add_on.container["image"], "pve-sim:latest",
        "the Dockerfile's pve-sim target"
    );
    assert!(
        add_on.container.get("command").is_none(),
        "the image's ENTRYPOINT runs: {}",
        add_on.container
    );
    let mut child = Command::new(support::workspace_binary("pve-sim", "pve-sim"))
        .args(&args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("pve-sim starts");
    let stdout = child.stdout.take().unwrap();
    let process = Running(child);
    let mut lines = BufReader::new(stdout).lines();
    let listening = lines
        .by_ref()
        .map(|l| l.expect("pve-sim's stdout"))
        .find_map(|l| l.strip_prefix("listening on ").map(str::to_owned))
        .unwrap_or_else(|| panic!("pve-sim exited without listening; args: {args:?}"));
    // Keep reading, so the simulator never writes into a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let port: u16 = listening.rsplit(':').next().unwrap().parse().unwrap();

    // Connect by the endpoint's host name (resolved to loopback), trusting
    // only the CA of the Secret, as the provider in the cluster does.
    let host = add_on.endpoint.host_str().unwrap().to_owned();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&tls["ca.crt"].0).unwrap()])
        .resolve(&host, SocketAddr::from(([127, 0, 0, 1], port)))
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let token = format!(
        "{}={}",
        add_on.credentials["tokenId"], add_on.credentials["secret"]
    );
    Sim {
        _process: process,
        client,
        base: format!("https://{host}:{port}"),
        token,
    }
}

#[tokio::test]
async fn add_on_runs_and_its_token_can_do_what_the_provider_does() {
    use reqwest::Method;
    let sim = start().await;
    assert!(sim.call(Method::GET, "/version", &[]).await["version"].is_string());

    // examples/vm-100.yaml, the way the provider creates it.
    sim.task(
        Method::POST,
        "/nodes/pve/qemu",
        &[
            ("vmid", "100"),
            ("name", "vm-100"),
            ("cores", "2"),
            ("memory", "2048"),
            ("scsihw", "virtio-scsi-single"),
            (
                "scsi0",
                "local-lvm:0,import-from=local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2",
            ),
            ("net0", "virtio,bridge=vmbr0"),
            ("serial0", "socket"),
            ("vga", "serial0"),
            ("ide2", "local-lvm:cloudinit"),
            ("ciuser", "ubuntu"),
            ("ipconfig0", "ip=dhcp"),
            ("agent", "1"),
            ("description", "Managed by crossplane-provider-proxmox"),
        ],
    )
    .await;
    sim.task(
        Method::PUT,
        "/nodes/pve/qemu/100/resize",
        &[("disk", "scsi0"), ("size", "20G")],
    )
    .await;
    sim.task(Method::POST, "/nodes/pve/qemu/100/status/start", &[])
        .await;
    let current = sim
        .call(Method::GET, "/nodes/pve/qemu/100/status/current", &[])
        .await;
    assert_eq!(current["status"], "running");
    sim.task(Method::POST, "/nodes/pve/qemu/100/status/stop", &[])
        .await;

    // examples/vm-clone.yaml: a full clone of template 9000 to the next VMID.
    let next = sim.call(Method::GET, "/cluster/nextid", &[]).await;
    let newid = next
        .as_str()
        .map_or_else(|| next.to_string(), str::to_owned);
    sim.task(
        Method::POST,
        "/nodes/pve/qemu/9000/clone",
        &[("newid", &newid), ("full", "1"), ("name", "vm-clone")],
    )
    .await;

    for vmid in ["100", newid.as_str()] {
        sim.task(
            Method::DELETE,
            &format!("/nodes/pve/qemu/{vmid}"),
            &[("purge", "1"), ("destroy-unreferenced-disks", "1")],
        )
        .await;
    }
    let vms = sim
        .call(Method::GET, "/cluster/resources", &[("type", "vm")])
        .await;
    let left: Vec<&Value> = vms.as_array().unwrap().iter().map(|v| &v["vmid"]).collect();
    assert_eq!(left, [&Value::from(9000)], "only the template is left");
}

#[test]
fn the_role_granted_in_the_add_on_is_the_documented_one() {
    let docs = read("docs/install.md");
    let line = docs
        .lines()
        .find(|l| l.starts_with("pveum role add CrossplaneProvider -privs "))
        .expect("docs/install.md creates the role with pveum role add");
    let documented: Vec<&str> = line.split('"').nth(1).unwrap().split_whitespace().collect();
    let add_on = add_on();
    let grants: Vec<String> = expanded_args(&add_on)
        .into_iter()
        .filter_map(|a| a.strip_prefix("--grant=").map(str::to_owned))
        .collect();
    let token_id = &add_on.credentials["tokenId"];
    let user = token_id.split('!').next().unwrap();
    let subjects: Vec<&str> = grants
        .iter()
        .map(|g| g.split(':').next().unwrap())
        .collect();
    assert_eq!(
        subjects,
        [user, token_id.as_str()],
        "granted to the user and to the privilege-separated token"
    );
    for grant in &grants {
        let privileges: Vec<&str> = grant.splitn(3, ':').nth(2).unwrap().split(',').collect();
        assert_eq!(privileges, documented, "{grant}");
    }
}

/// The add-on runs the image `docker build --target pve-sim` makes: the
/// Dockerfile's `pve-sim` stage (its ENTRYPOINT, user and port are the
/// pod's), and the kind end-to-end script builds and loads that image.
#[test]
fn the_add_on_runs_the_dockerfile_pve_sim_target() {
    let report: Value = serde_json::from_str(&run_ok(
        Command::new(tool("dockerfile-lint"))
            .arg("-json")
            .arg("-context")
            .arg(repo())
            .arg(repo().join("Dockerfile")),
    ))
    .unwrap();
    let stage = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "pve-sim")
        .expect("a pve-sim stage")
        .clone();
    let add_on = add_on();
    let container = &add_on.container;
    assert_eq!(container["image"], "pve-sim:latest");
    assert_eq!(stage["entrypoint"][0], "/usr/local/bin/pve-sim");
    let deployment = yaml_docs(&read("deploy/pve-sim/deployment.yaml"), "deployment.yaml");
    let pod = &find(&deployment, "Deployment", "pve-sim")["spec"]["template"]["spec"];
    let user = format!(
        "{}:{}",
        pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]
    );
    assert_eq!(stage["user"], user, "the pod runs as the image's USER");
    let port = container["ports"][0]["containerPort"].as_u64().unwrap();
    assert_eq!(stage["expose"], serde_json::json!([port.to_string()]));

    let script = read("scripts/kind-e2e.sh");
    assert!(
        script.contains("docker build --target pve-sim -t \"$sim_image\""),
        "kind-e2e.sh builds the simulator's image"
    );
    assert!(
        script.contains("kind load docker-image \"$sim_image\""),
        "and loads it into the cluster"
    );
}
