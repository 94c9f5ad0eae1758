//! Waiting until etcd and kube-apiserver serve, while watching that they
//! have not died (a dead process is reported at once with its log tail,
//! not after the timeout).

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use tokio::time::{Instant, sleep};

use crate::error::Error;
use crate::process::{Supervised, log_tail};

/// Polls `probe` until it returns `Ok(())`, failing early if any of
/// `watched` exits and after `deadline` with the last probe's complaint and
/// the tail of the log at `blame_log`.
pub async fn wait_for<F, Fut>(
    what: &str,
    deadline: Instant,
    timeout: Duration,
    watched: &mut [&mut Supervised],
    blame_log: &Path,
    mut probe: F,
) -> Result<(), Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut pause = Duration::from_millis(50);
    loop {
        for process in watched.iter_mut() {
            process.check_running()?;
        }
        let last_probe = match probe().await {
            Ok(()) => {
                // Whoever answered, it must still be ours (a process that
                // lost a port race may be dying while another one answers).
                for process in watched.iter_mut() {
                    process.check_running()?;
                }
                return Ok(());
            }
            Err(complaint) => complaint,
        };
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                timeout,
                last_probe,
                log: blame_log.to_owned(),
                tail: log_tail(blame_log),
            });
        }
        sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// A client for the two plain health endpoints. It trusts only the
/// control plane's CA and presents no credentials: `/readyz` is public
/// under RBAC, which is also what a load balancer's probe would see.
pub fn http_client(ca_cert_pem: &str) -> Result<reqwest::Client, String> {
    let ca = reqwest::Certificate::from_pem(ca_cert_pem.as_bytes()).map_err(|e| e.to_string())?;
    reqwest::Client::builder()
        .tls_certs_only([ca])
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())
}

/// etcd's `/health` says `{"health":"true",...}` once it has a leader.
pub async fn etcd_health(client: &reqwest::Client, url: &str) -> Result<(), String> {
    let body = get_ok(client, &format!("{url}/health")).await?;
    if body.contains(r#""health":"true""#) {
        Ok(())
    } else {
        Err(format!("/health says {body}"))
    }
}

/// The apiserver's `/readyz` answers `ok` once every post-start hook (RBAC
/// bootstrap, CRD informers, ...) is done; before that 500 with a list.
pub async fn apiserver_ready(client: &reqwest::Client, server: &str) -> Result<(), String> {
    let body = get_ok(client, &format!("{server}/readyz")).await?;
    if body.trim() == "ok" {
        Ok(())
    } else {
        Err(format!("/readyz says {body}"))
    }
}

/// The `default` namespace is created by a controller loop inside the
/// apiserver shortly after it is ready; envtest waits for it too.
pub async fn default_namespace(client: &kube::Client) -> Result<(), String> {
    kube::Api::<Namespace>::all(client.clone())
        .get("default")
        .await
        .map(drop)
        .map_err(|e| format!("GET namespace default: {e}"))
}

async fn get_ok(client: &reqwest::Client, url: &str) -> Result<String, String> {
    let response = client.get(url).send().await.map_err(|e| {
        // The chain holds the useful part ("connection refused", ...).
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            message = format!("{message}: {cause}");
            source = cause.source();
        }
        message
    })?;
    let status = response.status();
    let body = response.text().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(body)
    } else {
        let short: String = body.chars().take(300).collect();
        Err(format!("{url} answered {status}: {short}"))
    }
}
