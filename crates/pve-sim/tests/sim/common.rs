//! Shared helpers for the simulator conformance tests: start a simulator
//! in-process on 127.0.0.1:0 and talk to it over real HTTPS with reqwest,
//! trusting its CA.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use pve_sim::{SimConfig, SimHandle, Simulator};
use serde_json::Value;

/// The default API token of `SimConfig::default()`.
pub const TOKEN: &str = "PVEAPIToken=root@pam!sim=pve-sim-secret";
/// The path of the seeded Ubuntu image.
pub const UBUNTU: &str = "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2";

/// Generous deadline for anything that polls (a loaded 2-core machine).
pub const DEADLINE: Duration = Duration::from_secs(30);

pub struct Sim {
    pub handle: SimHandle,
    pub client: reqwest::Client,
}

/// What came back: status, reason phrase, body.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub reason: String,
    pub body: String,
    pub headers: reqwest::header::HeaderMap,
    pub version: reqwest::Version,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    pub fn data(&self) -> Value {
        assert_eq!(
            self.status, 200,
            "expected success, got {} {}: {}",
            self.status, self.reason, self.body
        );
        self.json()["data"].clone()
    }

    /// The `errors` object of a 400.
    pub fn errors(&self) -> Value {
        assert_eq!(
            self.status, 400,
            "expected 400, got {} {}: {}",
            self.status, self.reason, self.body
        );
        self.json()["errors"].clone()
    }

    pub fn upid(&self) -> String {
        let d = self.data();
        d.as_str()
            .unwrap_or_else(|| panic!("expected a UPID, got {d}"))
            .to_owned()
    }
}

/// A simulator with time scale 0.01 and the default credentials.
pub async fn start() -> Sim {
    start_with(|_| {}).await
}

pub async fn start_with(tweak: impl FnOnce(&mut SimConfig)) -> Sim {
    pve_sim::install_crypto_provider();
    let mut config = SimConfig {
        time_scale: 0.01,
        ..SimConfig::default()
    };
    tweak(&mut config);
    let handle = Simulator::start(config).await.expect("simulator starts");
    let ca = reqwest::Certificate::from_pem(handle.ca_pem().as_bytes()).expect("CA PEM parses");
    let client = reqwest::Client::builder()
        .tls_certs_only([ca])
        .timeout(DEADLINE)
        .build()
        .expect("client builds");
    Sim { handle, client }
}

pub fn form(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl Sim {
    pub fn url(&self, path: &str) -> String {
        format!("{}/api2/json{path}", self.handle.base_url())
    }

    pub fn control_url(&self, path: &str) -> String {
        format!("{}/_sim{path}", self.handle.base_url())
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let resp = req.send().await.expect("request completes");
        let status = resp.status().as_u16();
        let reason = resp
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
            .or_else(|| resp.status().canonical_reason().map(str::to_owned))
            .unwrap_or_default();
        let headers = resp.headers().clone();
        let version = resp.version();
        let body = resp.text().await.expect("body reads");
        Resp {
            status,
            reason,
            body,
            headers,
            version,
        }
    }

    /// A request authenticated with the default API token.
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(path))
            .header("Authorization", TOKEN)
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.req(reqwest::Method::GET, path)).await
    }

    pub async fn get_q(&self, path: &str, query: &[(&str, &str)]) -> Resp {
        self.send(self.req(reqwest::Method::GET, path).query(query))
            .await
    }

    pub async fn post(&self, path: &str, params: &[(&str, &str)]) -> Resp {
        self.send(self.req(reqwest::Method::POST, path).form(&form(params)))
            .await
    }

    pub async fn put(&self, path: &str, params: &[(&str, &str)]) -> Resp {
        self.send(self.req(reqwest::Method::PUT, path).form(&form(params)))
            .await
    }

    pub async fn delete(&self, path: &str, query: &[(&str, &str)]) -> Resp {
        self.send(self.req(reqwest::Method::DELETE, path).query(query))
            .await
    }

    pub async fn control(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.client.request(method, self.control_url(path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = self.send(req).await;
        assert_eq!(
            resp.status, 200,
            "control call {path} failed: {}",
            resp.body
        );
        resp.json()
    }

    pub async fn add_fault(&self, rule: Value) -> u64 {
        self.control(reqwest::Method::POST, "/faults", Some(rule))
            .await["id"]
            .as_u64()
            .expect("fault id")
    }

    /// Holds the next `task_type` task as `hold` at its first wait on the
    /// simulated clock (`task-held` at `sleep`): what it does before (its
    /// lock, flock, first log lines) stays until [`Sim::release`].
    pub async fn hold_at_first_wait(&self, hold: &str, task_type: &str) {
        self.add_fault(serde_json::json!({"fault": "task-held", "hold": hold,
            "at": "sleep", "task_type": task_type, "count": 1}))
            .await;
    }

    /// Waits until `upid`'s log has a line starting with `prefix`.
    pub async fn log_line(&self, upid: &str, prefix: &str) {
        self.eventually(&format!("a log line {prefix:?}"), || async {
            let log = self.task_log(upid).await;
            log.iter().any(|l| l.starts_with(prefix)).then_some(())
        })
        .await;
    }

    /// `POST /_sim/release`: the tasks a `task-held` fault holds as `hold`
    /// go on.
    pub async fn release(&self, hold: &str) {
        self.control(
            reqwest::Method::POST,
            "/release",
            Some(serde_json::json!({"hold": hold})),
        )
        .await;
    }

    /// Polls a task until it stops; returns its final status object.
    pub async fn wait_task(&self, upid: &str) -> Value {
        let path = task_path(upid, "status");
        let start = std::time::Instant::now();
        loop {
            let resp = self.get(&path).await;
            if resp.status == 200 {
                let data = resp.data();
                if data["status"] == "stopped" {
                    return data;
                }
            }
            assert!(
                start.elapsed() < DEADLINE,
                "task {upid} did not stop in time: {}",
                resp.body
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for a task and asserts its exit status.
    pub async fn task_ok(&self, upid: &str) {
        let status = self.wait_task(upid).await;
        assert_eq!(
            status["exitstatus"],
            "OK",
            "task {upid} failed: {status}; log: {:?}",
            self.task_log(upid).await
        );
    }

    /// POSTs an async call and waits for its task to end OK; returns the UPID.
    pub async fn post_ok(&self, path: &str, params: &[(&str, &str)]) -> String {
        let upid = self.post(path, params).await.upid();
        self.task_ok(&upid).await;
        upid
    }

    /// `POST /nodes/pve/qemu/{vmid}/status/{action}` and wait for OK.
    pub async fn power(&self, vmid: &str, action: &str) -> String {
        self.post_ok(&format!("/nodes/pve/qemu/{vmid}/status/{action}"), &[])
            .await
    }

    pub async fn task_log(&self, upid: &str) -> Vec<String> {
        let resp = self.get_q(&task_path(upid, "log"), &[("limit", "0")]).await;
        resp.data()
            .as_array()
            .expect("log lines")
            .iter()
            .map(|l| l["t"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Polls `f` until it returns `Some`, with the common deadline.
    pub async fn eventually<T, F, Fut>(&self, what: &str, mut f: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let start = std::time::Instant::now();
        loop {
            if let Some(v) = f().await {
                return v;
            }
            assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Creates a small VM without disks and waits for the task.
    pub async fn create_plain(&self, vmid: &str, extra: &[(&str, &str)]) {
        let mut params = vec![
            ("vmid", vmid),
            ("name", "plain"),
            ("memory", "512"),
            ("net0", "virtio,bridge=vmbr0"),
        ];
        params.extend_from_slice(extra);
        self.post_ok("/nodes/pve/qemu", &params).await;
    }

    pub async fn config(&self, vmid: &str) -> Value {
        self.get(&format!("/nodes/pve/qemu/{vmid}/config"))
            .await
            .data()
    }
}

/// `/nodes/{node}/tasks/{upid}/{leaf}` for the task a UPID names.
fn task_path(upid: &str, leaf: &str) -> String {
    let node = upid.split(':').nth(1).expect("UPID has a node");
    format!("/nodes/{node}/tasks/{}/{leaf}", urlencode(upid))
}

/// Percent-encodes a path segment (UPIDs contain ':' and '!').
pub fn urlencode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A syntactically valid ed25519 public key line.
pub fn ssh_key(comment: &str) -> String {
    use base64::Engine;
    let mut blob = Vec::new();
    blob.extend_from_slice(&11u32.to_be_bytes());
    blob.extend_from_slice(b"ssh-ed25519");
    blob.extend_from_slice(&32u32.to_be_bytes());
    blob.extend_from_slice(&[7u8; 32]);
    format!(
        "ssh-ed25519 {} {comment}",
        base64::engine::general_purpose::STANDARD.encode(blob)
    )
}

/// The path `hack/tools/ensure.sh TOOL` prints: a pinned tool or file,
/// built or fetched once and cached.
pub fn ensure(tool: &str) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/tools/ensure.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(tool)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().unwrap_or_default().trim();
    assert!(
        out.status.success() && !path.is_empty(),
        "`hack/tools/ensure.sh {tool}` failed; run it by hand to see why:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(path)
}
