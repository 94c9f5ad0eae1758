//! pve-sim as a child process, and its control API (`/_sim/`) as the
//! referee: the request log (drained continuously, since the simulator
//! keeps only the last 20,000 requests) and the task table with exact start
//! and end times.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

use crate::child::{Sampler, terminate};

/// A PVE API token the simulator accepts: who makes which requests. The
/// log's `user` tells them apart.
#[derive(Clone, Debug)]
pub struct Token {
    /// `root@pam!name`
    pub id: String,
    pub secret: String,
}

impl Token {
    /// A token of `root@pam` with a fresh random secret.
    pub fn root(name: &str) -> Self {
        Self {
            id: format!("root@pam!{name}"),
            secret: format!("{:032x}", rand::random::<u128>()),
        }
    }

    /// `--api-token` value (the simulator never prints it).
    fn flag(&self) -> String {
        format!("{}={}", self.id, self.secret)
    }

    /// pve-client credentials.
    pub fn credentials(&self) -> pve_client::Credentials {
        pve_client::Credentials::Token {
            token_id: self.id.clone(),
            secret: pve_client::Secret::new(self.secret.clone()),
        }
    }
}

/// One entry of `/_sim/requests`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Request {
    pub seq: u64,
    pub time: f64,
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub route: Option<String>,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    pub status: u16,
    #[serde(default)]
    pub user: Option<String>,
}

/// One entry of `/_sim/tasks`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Task {
    pub upid: String,
    pub node: String,
    #[serde(rename = "type")]
    pub task_type: String,
    pub id: String,
    pub user: String,
    pub started: f64,
    #[serde(default)]
    pub ended: Option<f64>,
    #[serde(default)]
    pub exitstatus: Option<String>,
}

/// How to start the simulator.
pub struct SimOptions<'a> {
    pub binary: &'a Path,
    pub nodes: &'a [String],
    pub time_scale: f64,
    pub tokens: &'a [&'a Token],
    pub dir: &'a Path,
}

/// A running simulator.
pub struct Sim {
    child: Child,
    pub base_url: String,
    pub fingerprint: String,
    http: reqwest::Client,
    log: Arc<Mutex<Vec<Request>>>,
    drain: tokio::task::JoinHandle<()>,
    pub sampler: Sampler,
}

impl Sim {
    pub async fn start(options: SimOptions<'_>) -> anyhow::Result<Self> {
        let ca_path = options.dir.join("pve-sim-ca.pem");
        let mut command = Command::new(options.binary);
        command.args([
            "--listen",
            "127.0.0.1:0",
            "--nodes",
            &options.nodes.join(","),
            "--time-scale",
            &options.time_scale.to_string(),
            "--ca-out",
        ]);
        command.arg(&ca_path);
        for token in options.tokens {
            command.arg("--api-token").arg(token.flag());
        }
        let stderr = std::fs::File::create(options.dir.join("pve-sim.log"))
            .context("creating pve-sim.log")?;
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {}", options.binary.display()))?;
        let (base_url, fingerprint) = read_banner(&mut child).await?;
        let ca_pem = std::fs::read_to_string(&ca_path)
            .with_context(|| format!("reading {}", ca_path.display()))?;
        let http = reqwest::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(ca_pem.as_bytes()).context("the simulator's CA")?,
            )
            .build()
            .context("building the control API client")?;
        let pid = child.id().context("pve-sim exited at once")?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let drain = tokio::spawn(drain_forever(http.clone(), base_url.clone(), log.clone()));
        Ok(Self {
            child,
            base_url,
            fingerprint,
            http,
            log,
            drain,
            sampler: Sampler::start(pid),
        })
    }

    /// A pve-client for `token`: pinned to the simulator's certificate, with
    /// `limits` as given (the bench's own readers set them high).
    pub fn client(
        &self,
        token: &Token,
        limits: pve_client::Limits,
    ) -> anyhow::Result<pve_client::Client> {
        let mut config = pve_client::ClientConfig::new(&self.base_url, token.credentials())
            .context("client configuration")?;
        config.tls.pinned_fingerprints = vec![self.fingerprint.parse().context("fingerprint")?];
        config.limits = limits;
        pve_client::Client::new(config).context("building a pve-client")
    }

    /// Every task so far, with exact times.
    pub async fn tasks(&self) -> anyhow::Result<Vec<Task>> {
        #[derive(Deserialize)]
        struct Tasks {
            tasks: Vec<Task>,
        }
        let tasks: Tasks = get_json(&self.http, &format!("{}/_sim/tasks", self.base_url)).await?;
        Ok(tasks.tasks)
    }

    /// Drains the request log once more and returns all of it.
    pub async fn requests(&self) -> anyhow::Result<Vec<Request>> {
        drain_once(&self.http, &self.base_url, &self.log).await?;
        Ok(self.log.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Stops the simulator; returns its CPU/memory samples.
    pub async fn stop(mut self) -> Vec<crate::child::Sample> {
        self.drain.abort();
        self.sampler.mark();
        terminate(&mut self.child, Duration::from_secs(5)).await;
        self.sampler.finish()
    }
}

/// `listening on <url>` and `fingerprint <fp>` from the simulator's stdout.
async fn read_banner(child: &mut Child) -> anyhow::Result<(String, String)> {
    let stdout = child.stdout.take().context("pve-sim's stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let (mut url, mut fingerprint) = (None, None);
    let read = async {
        while let Some(line) = lines.next_line().await? {
            if let Some(u) = line.strip_prefix("listening on ") {
                url = Some(u.trim().to_owned());
            } else if let Some(f) = line.strip_prefix("fingerprint ") {
                fingerprint = Some(f.trim().to_owned());
            }
            if url.is_some() && fingerprint.is_some() {
                break;
            }
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .context("pve-sim did not report its address within 30 s")??;
    // Keep reading: a closed pipe would make the simulator's next line fail.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    match (url, fingerprint) {
        (Some(u), Some(f)) => Ok((u, f)),
        _ => bail!("pve-sim exited before reporting its address (see pve-sim.log)"),
    }
}

async fn drain_forever(http: reqwest::Client, base: String, log: Arc<Mutex<Vec<Request>>>) {
    loop {
        // A failed read is retried; the next one catches up from `since`.
        let _ = drain_once(&http, &base, &log).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn drain_once(
    http: &reqwest::Client,
    base: &str,
    log: &Mutex<Vec<Request>>,
) -> anyhow::Result<()> {
    #[derive(Deserialize)]
    struct Requests {
        requests: Vec<Request>,
    }
    let since = log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .last()
        .map_or(0, |r| r.seq + 1);
    let page: Requests = get_json(http, &format!("{base}/_sim/requests?since={since}")).await?;
    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
    // Another drain may have appended meanwhile: keep the sequence strict.
    let next = log.last().map_or(0, |r| r.seq + 1);
    log.extend(page.requests.into_iter().filter(|r| r.seq >= next));
    Ok(())
}

async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> anyhow::Result<T> {
    Ok(http
        .get(url)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?)
}

/// The directory of a variant's files.
pub fn variant_dir(work_dir: &Path, variant: &str) -> anyhow::Result<PathBuf> {
    let dir = work_dir.join(variant);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
