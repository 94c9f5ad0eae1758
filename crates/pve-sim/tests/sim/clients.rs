//! Third-party clients against the simulator: go-proxmox (the client
//! CAPMOX uses, pinned in hack/tools/go-proxmox) runs a CAPMOX-style
//! machine lifecycle (cluster status, placement by free memory, a clone
//! without a VMID, a cloud-init ISO upload, start, the guest agent,
//! delete); proxmoxer (pinned in hack/tools/proxmoxer) and Ansible's
//! community.proxmox (pinned in hack/tools/ansible) a VM lifecycle.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::{Sim, ensure, start_with};

/// A scratch directory for a client run, holding the simulator's CA.
fn scratch_with_ca(sim: &Sim, tag: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, sim.handle.ca_pem()).unwrap();
    (dir, ca)
}

#[tokio::test]
async fn go_proxmox_runs_a_capmox_style_lifecycle() {
    let binary = ensure("go-proxmox-lifecycle");
    // pve2 has less free memory: placement must pick the template's node.
    let sim = start_with(|c| {
        c.nodes = vec!["pve".into(), "pve2".into()];
        c.node_memory.insert("pve2".into(), 8 << 30);
    })
    .await;
    let (dir, ca) = scratch_with_ca(&sim, "pve-sim-go");
    let out = tokio::process::Command::new(&binary)
        .arg("-url")
        .arg(format!("{}/api2/json", sim.handle.base_url()))
        .arg("-token-id")
        .arg("root@pam!sim")
        .arg("-ca")
        .arg(&ca)
        .env("PVE_TOKEN_SECRET", "pve-sim-secret")
        .env("TMPDIR", &dir)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("runs the go-proxmox lifecycle");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("lifecycle OK"),
        "go-proxmox lifecycle failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("placed on pve "), "{stdout}");
    // It cloned without a VMID (nextid), uploaded its ISO and deleted both.
    let log = sim.handle.requests();
    let called = |m: &str, route: &str| {
        log.iter()
            .any(|e| e.method == m && e.route.as_deref() == Some(route) && e.status == 200)
    };
    assert!(called("GET", "/cluster/nextid"));
    assert!(called("POST", "/nodes/{node}/storage/{storage}/upload"));
    assert!(called(
        "DELETE",
        "/nodes/{node}/storage/{storage}/content/{volume}"
    ));
    assert!(called("GET", "/nodes/{node}/qemu/{vmid}/agent/get-osinfo"));
}

/// proxmoxer (pinned in hack/tools/proxmoxer, installed into a cached venv)
/// takes a VM through create with an import, clone, cloud-init, resize,
/// start, the agent, a snapshot, a live migration, stop and delete.
#[tokio::test]
async fn proxmoxer_runs_a_vm_lifecycle() {
    let python = ensure("proxmoxer");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/tools/proxmoxer/lifecycle.py");
    let sim = start_with(|c| c.nodes = vec!["pve".into(), "pve2".into()]).await;
    let (dir, ca) = scratch_with_ca(&sim, "pve-sim-px");
    let addr = sim.handle.addr();
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .arg(&ca)
        .env("PVE_TOKEN_SECRET", "pve-sim-secret")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("runs the proxmoxer lifecycle");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("lifecycle OK"),
        "proxmoxer lifecycle failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Ansible's community.proxmox collection (ansible-core and the collection
/// pinned in hack/tools/ansible, installed into a cached venv) runs
/// hack/tools/ansible/lifecycle.yml: create with an import, clone,
/// cloud-init, resize, start, the agent, a snapshot, stop, migrate, delete.
#[tokio::test]
async fn ansible_community_proxmox_runs_a_vm_lifecycle() {
    let ansible_playbook = ensure("ansible");
    let playbook =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/tools/ansible/lifecycle.yml");
    let sim = start_with(|c| c.nodes = vec!["pve".into(), "pve2".into()]).await;
    let (dir, ca) = scratch_with_ca(&sim, "pve-sim-ansible");
    let addr = sim.handle.addr();
    // Run where no ansible.cfg is, with Ansible's own files in `dir`.
    let out = tokio::process::Command::new(&ansible_playbook)
        .args(["-i", "localhost,", "-c", "local"])
        .arg(&playbook)
        .current_dir(&dir)
        .env("ANSIBLE_HOME", &dir)
        .env("ANSIBLE_LOCAL_TEMP", dir.join("tmp"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("LC_ALL", "C.UTF-8")
        .env("PROXMOX_HOST", addr.ip().to_string())
        .env("PROXMOX_PORT", addr.port().to_string())
        .env("PROXMOX_USER", "root@pam")
        .env("PROXMOX_TOKEN_ID", "sim")
        .env("PROXMOX_TOKEN_SECRET", "pve-sim-secret")
        .env("PROXMOX_VALIDATE_CERTS", "true")
        .env("REQUESTS_CA_BUNDLE", &ca)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("runs ansible-playbook");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("failed=0"),
        "the Ansible lifecycle failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every step reached the API it is about, over verified TLS.
    let log = sim.handle.requests();
    for (method, route) in [
        ("POST", "/nodes/{node}/qemu"),
        ("POST", "/nodes/{node}/qemu/{vmid}/clone"),
        ("PUT", "/nodes/{node}/qemu/{vmid}/config"),
        ("PUT", "/nodes/{node}/qemu/{vmid}/resize"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/start"),
        (
            "GET",
            "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
        ),
        ("POST", "/nodes/{node}/qemu/{vmid}/snapshot"),
        ("DELETE", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown"),
        ("POST", "/nodes/{node}/qemu/{vmid}/migrate"),
        ("DELETE", "/nodes/{node}/qemu/{vmid}"),
    ] {
        assert!(
            log.iter().any(|e| e.method == method
                && e.route.as_deref() == Some(route)
                && e.status == 200),
            "no successful {method} {route}"
        );
    }
}
