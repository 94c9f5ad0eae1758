//! pve-sim as a child process (dies with the test binary, however it
//! ends), its control API (`/_sim/`, never faulted) and reads of its state
//! through the Proxmox API with a token of the checker's own.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::secrets::Credentials;
use crate::support;

/// A running simulator.
pub struct Sim {
    child: Child,
    pub base_url: String,
    pub fingerprint: String,
    http: reqwest::Client,
    /// `PVEAPIToken=...` of the checker's token.
    checker: String,
    /// Where its output goes.
    pub log: PathBuf,
}

impl Sim {
    /// Starts `pve-sim` with three nodes, the run's credentials and seed.
    pub fn start(dir: &Path, creds: &Credentials, seed: u64, time_scale: f64) -> Self {
        let ca = dir.join("pve-sim-ca.pem");
        let log = dir.join("pve-sim.log");
        let log_file = std::fs::File::create(&log).expect("creating the pve-sim log");
        let mut command = Command::new(support::workspace_binary("pve-sim", "pve-sim"));
        command
            .arg("--listen=127.0.0.1:0")
            .arg(format!("--nodes={}", super::fleet::NODES.join(",")))
            .arg(format!("--time-scale={time_scale}"))
            .arg(format!("--seed={seed}"))
            .arg(format!("--ca-out={}", ca.display()))
            .arg(format!("--api-token={}", creds.provider_token()))
            .arg(format!("--api-token={}", creds.checker_token()))
            .arg(format!("--user={}", creds.login()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file.try_clone().expect("log file handle")));
        let mut child = testenv::spawn_attached(command).expect("pve-sim starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (base_url, fingerprint, rest) = read_banner(stdout);
        // Keep draining stdout so the simulator never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut log_file = log_file;
            for line in rest.lines().map_while(Result::ok) {
                let _ = writeln!(log_file, "{line}");
            }
        });
        let ca_pem = std::fs::read_to_string(&ca).expect("pve-sim wrote its CA");
        let ca_cert = reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA PEM");
        let http = reqwest::Client::builder()
            .tls_certs_only([ca_cert])
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("an HTTP client for the simulator");
        Self {
            child,
            base_url,
            fingerprint,
            http,
            checker: format!("PVEAPIToken={}", creds.checker_token()),
            log,
        }
    }

    fn control_url(&self, path: &str) -> String {
        format!("{}/_sim/{path}", self.base_url)
    }

    /// `GET /_sim/<path>` (control API: no auth, no faults).
    pub async fn control_get(&self, path: &str) -> Value {
        let url = self.control_url(path);
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        response
            .json()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"))
    }

    /// `POST /_sim/faults`: adds a rule; panics if the simulator refuses it.
    pub async fn add_fault(&self, rule: &Value) -> u64 {
        let response = self
            .http
            .post(self.control_url("faults"))
            .json(rule)
            .send()
            .await
            .expect("POST /_sim/faults");
        let status = response.status();
        let body: Value = response.json().await.expect("a JSON answer");
        assert!(status.is_success(), "fault rule {rule} refused: {body}");
        body["id"].as_u64().expect("a rule id")
    }

    /// `DELETE /_sim/faults/<id>` (gone already is fine).
    pub async fn remove_fault(&self, id: u64) {
        self.http
            .delete(self.control_url(&format!("faults/{id}")))
            .send()
            .await
            .expect("DELETE /_sim/faults/<id>");
    }

    /// `GET /_sim/faults`: the rules with how often each fired.
    pub async fn faults(&self) -> Vec<Value> {
        let listed = self.control_get("faults").await;
        listed["faults"].as_array().cloned().unwrap_or_default()
    }

    /// `DELETE /_sim/faults`.
    pub async fn clear_faults(&self) {
        self.http
            .delete(self.control_url("faults"))
            .send()
            .await
            .expect("DELETE /_sim/faults");
    }

    /// `GET /_sim/requests?since=<seq>`: the request log from `seq` on.
    pub async fn requests_since(&self, seq: u64) -> Vec<Value> {
        let log = self.control_get(&format!("requests?since={seq}")).await;
        log["requests"].as_array().cloned().unwrap_or_default()
    }

    /// `GET /api2/json<path>` as the checker; `Err` with what went wrong.
    pub async fn api_get(&self, path: &str) -> Result<Value, String> {
        let url = format!("{}/api2/json{path}", self.base_url);
        let response = self
            .http
            .get(&url)
            .header("Authorization", &self.checker)
            .send()
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("GET {path}: {status}"));
        }
        let body: Value = response
            .json()
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        Ok(body["data"].clone())
    }

    /// [`Sim::api_get`], retried for a while: faults may be active.
    pub async fn api_get_retrying(&self, path: &str) -> Value {
        support::poll(
            &format!("pve-sim to answer GET {path}"),
            Duration::from_secs(120),
            || self.api_get(path),
        )
        .await
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `listening on URL` and `fingerprint FP` (after `ca PATH`).
fn read_banner(
    stdout: std::process::ChildStdout,
) -> (String, String, BufReader<std::process::ChildStdout>) {
    let mut reader = BufReader::new(stdout);
    let (mut url, mut fingerprint) = (None, None);
    let mut line = String::new();
    while url.is_none() || fingerprint.is_none() {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .expect("reading pve-sim's stdout");
        assert!(
            read > 0,
            "pve-sim exited before printing its address; see its log"
        );
        if let Some(u) = line.trim().strip_prefix("listening on ") {
            url = Some(u.to_owned());
        } else if let Some(f) = line.trim().strip_prefix("fingerprint ") {
            fingerprint = Some(f.to_owned());
        }
    }
    (
        url.unwrap_or_default(),
        fingerprint.unwrap_or_default(),
        reader,
    )
}
