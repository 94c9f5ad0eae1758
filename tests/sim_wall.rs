//! The simulator must share no code with the Proxmox client, so that a UPID
//! or encoding bug written once cannot pass in both. This test fails if any
//! file under `src/sim/` (or the `pve-sim` binary) refers to the client.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn simulator_does_not_use_the_proxmox_client() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/sim"), &mut files);
    files.push(root.join("src/bin/pve-sim.rs"));
    assert!(
        files.len() > 10,
        "expected the simulator sources under src/sim, found {files:?}"
    );
    let forbidden = [
        "crate::proxmox",
        "provider_proxmox::proxmox",
        "super::proxmox",
        "use proxmox::",
    ];
    let mut offenders = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        for (n, line) in text.lines().enumerate() {
            if forbidden.iter().any(|f| line.contains(f)) && !line.trim_start().starts_with("//") {
                offenders.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "the simulator must not use the Proxmox client:\n{}",
        offenders.join("\n")
    );
}
