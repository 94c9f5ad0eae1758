//! The Proxmox client knows nothing of Kubernetes and shares no code with
//! the simulator (the reverse direction is `sim_wall.rs`). Fails if any file
//! under `src/proxmox/` names them outside a comment.

use std::path::Path;

/// Every `.rs` file under `dir` with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/proxmox is readable") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source is UTF-8");
                out.push((path.display().to_string(), text));
            }
        }
    }
    out
}

#[test]
fn client_uses_neither_the_simulator_nor_kubernetes() {
    let files = sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/proxmox"));
    assert!(
        files.len() > 10,
        "expected the client sources, found {}",
        files.len()
    );
    let forbidden = [
        "crate::sim",
        "provider_proxmox::sim",
        "kube::",
        "k8s_openapi",
        "crate::api",
        "crate::reconcile",
    ];
    let offenders: Vec<String> = files
        .iter()
        .flat_map(|(file, text)| {
            text.lines().enumerate().filter_map(move |(n, line)| {
                let code = !line.trim_start().starts_with("//");
                (code && forbidden.iter().any(|f| line.contains(f)))
                    .then(|| format!("{file}:{}: {}", n + 1, line.trim()))
            })
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "the client must stay independent:\n{}",
        offenders.join("\n")
    );
}
