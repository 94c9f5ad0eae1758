//! Shared test harness: an in-process `pve-sim`, clients configured for it,
//! and the simulator's control API (`/_sim/stats`, `/_sim/requests`,
//! `/_sim/faults`) as the referee.

use std::time::Duration;

use pve_client::{
    Client, ClientConfig, Credentials, Fingerprint, RetryPolicy, Secret, TaskOptions, Upid,
};
use pve_sim::{Durations, SimConfig, SimHandle, Simulator};
use serde_json::{Value, json};

/// The default simulator API token (`root@pam!sim=pve-sim-secret`).
pub const TOKEN: &str = pve_sim::DEFAULT_API_TOKEN;
pub const USER: &str = "root@pam";
pub const PASSWORD: &str = "pve-sim";
pub const NODE: &str = "pve";
pub const TEMPLATE: u32 = 9000;
pub const IMAGE: &str = "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2";

/// A running simulator plus an HTTP client for its control API.
pub struct Harness {
    pub sim: SimHandle,
    control: reqwest::Client,
}

impl Harness {
    /// A simulator running 100× faster than real PVE.
    pub async fn start() -> Self {
        Self::start_with(SimConfig {
            time_scale: 0.01,
            ..SimConfig::default()
        })
        .await
    }

    /// A simulator with the given time scale (1.0 = real PVE timings).
    pub async fn start_scaled(time_scale: f64) -> Self {
        Self::start_with(SimConfig {
            time_scale,
            ..SimConfig::default()
        })
        .await
    }

    /// A simulator 100× faster than real PVE with some simulated durations
    /// changed.
    pub async fn start_with_durations(tweak: impl FnOnce(&mut Durations)) -> Self {
        let mut durations = Durations::default();
        tweak(&mut durations);
        Self::start_with(SimConfig {
            time_scale: 0.01,
            durations,
            ..SimConfig::default()
        })
        .await
    }

    pub async fn start_with(config: SimConfig) -> Self {
        pve_client::install_crypto_provider();
        let sim = Simulator::start(config)
            .await
            .expect("pve-sim must start on a loopback port");
        let ca = reqwest::Certificate::from_pem(sim.ca_pem().as_bytes()).expect("sim CA PEM");
        let control = reqwest::Client::builder()
            .tls_certs_only([ca])
            .timeout(Duration::from_secs(30))
            .build()
            .expect("control client");
        Self { sim, control }
    }

    pub fn fingerprint(&self) -> Fingerprint {
        self.sim
            .fingerprint()
            .parse()
            .expect("sim fingerprint parses")
    }

    /// Token auth, pinned fingerprint, fast retries and polling.
    pub fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new(
            &self.sim.base_url(),
            Credentials::token_from_str(TOKEN).unwrap(),
        )
        .unwrap();
        c.tls.pinned_fingerprints = vec![self.fingerprint()];
        c.retry = RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
            retry_locked: true,
        };
        c.tasks = TaskOptions {
            poll_interval: Duration::from_millis(50),
            task_timeout: Duration::from_secs(120),
            not_visible_grace: Duration::from_secs(10),
            ..TaskOptions::default()
        };
        c.limits.requests_per_second = 0.0; // unlimited: tests count requests, not pace them
        c.limits.max_concurrent_requests = 64;
        c
    }

    /// Ticket (user/password) auth, otherwise like [`Harness::config`].
    pub fn ticket_config(&self) -> ClientConfig {
        let mut c = self.config();
        c.credentials = Credentials::Password {
            username: USER.to_owned(),
            password: Secret::new(PASSWORD),
        };
        c
    }

    pub fn client(&self) -> Client {
        Client::new(self.config()).unwrap()
    }

    pub fn client_with(&self, f: impl FnOnce(&mut ClientConfig)) -> Client {
        let mut c = self.config();
        f(&mut c);
        Client::new(c).unwrap()
    }

    /// Sends a request to the control API and returns its JSON answer
    /// (`null` when empty); fails the test unless it succeeded.
    async fn control_request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Value {
        let url = format!("{}/_sim/{path}", self.sim.base_url());
        let mut request = self.control.request(method.clone(), url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let r = request.send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        let sent = body.map(ToString::to_string).unwrap_or_default();
        assert!(
            status.is_success(),
            "{method} /_sim/{path} {sent}: {status}: {text}"
        );
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }

    /// `GET /_sim/stats`.
    /// `POST /_sim/backup-jobs/{id}/run`: the job runs now, as the
    /// scheduler runs it; the UPIDs of its tasks.
    pub async fn run_backup_job(&self, id: &str) -> Vec<String> {
        let path = format!("backup-jobs/{id}/run");
        let v = self
            .control_request(reqwest::Method::POST, &path, None)
            .await;
        v["upids"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|u| u.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub async fn stats(&self) -> Value {
        self.control_request(reqwest::Method::GET, "stats", None)
            .await
    }

    /// How many requests the simulator saw for `METHOD /route/{template}`
    /// (any status).
    pub async fn count(&self, method: &str, route: &str) -> u64 {
        let stats = self.stats().await;
        stats["requests"][format!("{method} {route}")]["count"]
            .as_u64()
            .unwrap_or(0)
    }

    /// Requests for a route with a given status.
    pub async fn count_status(&self, method: &str, route: &str, status: u16) -> u64 {
        let stats = self.stats().await;
        stats["requests"][format!("{method} {route}")]["status"][status.to_string()]
            .as_u64()
            .unwrap_or(0)
    }

    /// Total requests seen.
    pub async fn total(&self) -> u64 {
        self.stats().await["total"].as_u64().unwrap_or(0)
    }

    /// `GET /_sim/requests`.
    pub async fn requests(&self) -> Vec<Value> {
        let v = self
            .control_request(reqwest::Method::GET, "requests", None)
            .await;
        v["requests"].as_array().cloned().unwrap_or_default()
    }

    /// `DELETE /_sim/stats`.
    pub async fn clear_stats(&self) {
        self.control_request(reqwest::Method::DELETE, "stats", None)
            .await;
    }

    /// `POST /_sim/faults`; returns the rule id.
    pub async fn fault(&self, rule: Value) -> u64 {
        let body = self
            .control_request(reqwest::Method::POST, "faults", Some(&rule))
            .await;
        body["id"].as_u64().expect("fault id")
    }

    /// Holds every `task_type` task that starts from now on running, until
    /// [`Harness::release`]`(hold)`: the test looks at a running task for
    /// as long as it needs, whatever the machine's load.
    pub async fn hold_tasks(&self, hold: &str, task_type: &str) {
        self.fault(json!({"fault": "task-held", "hold": hold, "task_type": task_type}))
            .await;
    }

    /// `POST /_sim/release`: the tasks held as `hold` go on and end.
    pub async fn release(&self, hold: &str) {
        self.control_request(
            reqwest::Method::POST,
            "release",
            Some(&json!({"hold": hold})),
        )
        .await;
    }

    /// `DELETE /_sim/faults`.
    pub async fn clear_faults(&self) {
        self.control_request(reqwest::Method::DELETE, "faults", None)
            .await;
    }
}

/// A running task's UPID for a fresh linked clone of the template.
pub async fn clone_template(client: &Client, newid: u32) -> Upid {
    use pve_client::vm::CloneVm;
    client
        .clone_vm(
            NODE,
            TEMPLATE,
            &CloneVm {
                newid,
                name: Some(format!("t{newid}")),
                ..CloneVm::default()
            },
        )
        .await
        .expect("clone of the template starts")
}

/// VM settings with `scsi0` imported from [`IMAGE`] (`import-from`).
pub fn import_params() -> pve_client::vm::VmParams {
    use pve_client::vm::{AgentConfig, Boot, Drive, ScsiHw, VmParams};
    let mut p = VmParams {
        name: Some("web-1".into()),
        memory: Some(2048),
        cores: Some(2),
        agent: Some(AgentConfig::enabled(true)),
        scsihw: Some(ScsiHw::VirtioScsiPci),
        boot: Some(Boot::order(["scsi0"])),
        ..VmParams::default()
    };
    p.disks.insert(
        "scsi0".parse().expect("a drive slot"),
        Drive::import("local-lvm", IMAGE),
    );
    p
}

/// Starts a create with [`import_params`]; returns the `qmcreate` task.
pub async fn start_import(client: &Client, vmid: u32) -> Upid {
    use pve_client::vm::CreateVm;
    let create = CreateVm {
        vmid,
        params: import_params(),
        ..CreateVm::default()
    };
    client
        .create_vm(NODE, &create)
        .await
        .expect("the create starts")
}

/// Whether an import volume (`local:import/x.qcow2`) is listed in its
/// storage's content, as the provider looks for downloaded images.
pub async fn has_import(client: &Client, volid: &str) -> bool {
    let storage = volid.split_once(':').map_or(volid, |(s, _)| s);
    client
        .storage_content(NODE, storage, Some("import"))
        .await
        .expect("the storage content lists")
        .iter()
        .any(|c| c.volid == volid)
}

/// Clones the template and waits for it.
pub async fn cloned_vm(client: &Client, newid: u32) {
    let upid = clone_template(client, newid).await;
    client.wait_task(&upid).await.expect("clone succeeds");
}

/// `n` concurrent `GET /version` calls from clones of `client`; all must
/// succeed.
pub async fn concurrent_versions(client: &Client, n: usize) {
    let calls: Vec<_> = (0..n)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.version().await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
}

/// Polls `f` until it returns `Some`, with a generous deadline.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn http_fault(method: &str, path: &str, status: u16, count: Option<u32>) -> Value {
    let mut r = json!({"method": method, "path": path, "fault": "http-error", "status": status});
    if let Some(c) = count {
        r["count"] = json!(c);
    }
    r
}
