//! The `pve-sim` binary: its machine-readable start lines, `--ca-out`,
//! credentials from flags, and a clean exit on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[tokio::test]
async fn binary_prints_address_and_fingerprint_and_stops_on_sigterm() {
    pve_sim::install_crypto_provider();
    let dir = std::env::temp_dir().join(format!("pve-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_path = dir.join("ca.pem");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pve-sim"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--api-token",
            "root@pam!ci=secret",
            "--time-scale",
            "0.01",
        ])
        .arg("--ca-out")
        .arg(&ca_path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("pve-sim starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line").expect("readable");
    assert_eq!(next(), format!("ca {}", ca_path.display()));
    let base = next()
        .strip_prefix("listening on ")
        .expect("listening line")
        .to_owned();
    let fingerprint = next()
        .strip_prefix("fingerprint ")
        .expect("fingerprint line")
        .to_owned();
    assert!(base.starts_with("https://127.0.0.1:"), "{base}");
    assert_eq!(fingerprint.len(), 95);

    let ca = std::fs::read(&ca_path).unwrap();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).unwrap()])
        .build()
        .unwrap();
    let ok = client
        .get(format!("{base}/api2/json/nodes/pve/qemu"))
        .header("Authorization", "PVEAPIToken=root@pam!ci=secret")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let body: serde_json::Value = ok.json().await.unwrap();
    assert_eq!(body["data"][0]["vmid"], 9000);
    // The default credentials are replaced by the given ones.
    let default = client
        .get(format!("{base}/api2/json/version"))
        .header("Authorization", "PVEAPIToken=root@pam!sim=pve-sim-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(default.status(), 401);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(next(), "shutting down");
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
