//! The architecture, checked: the walls are the workspace's dependency
//! graph, and the plan is a pure function.
//!
//! * `pve-client` depends on no Kubernetes crate and not on the simulator;
//! * `pve-sim` depends on neither `pve-client` nor the provider (a UPID or
//!   encoding bug written once cannot pass in both);
//! * the provider's `reconcile::vm::plan` does no I/O: no async code, no
//!   clients, no clock (the time comes in `PlanInput::now`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Package name → names of its normal (non-dev, non-build) dependencies,
/// from `cargo metadata` (resolved for this platform).
fn normal_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let host = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let host = String::from_utf8_lossy(&host.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc names its host");
    // Offline and for this platform only: everything built is on disk.
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let meta: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata is JSON");
    let name_of: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let deps = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| {
                    d["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|k| k["kind"].is_null())
                })
                .map(|d| name_of[d["pkg"].as_str().unwrap()].to_owned())
                .collect();
            (name_of[node["id"].as_str().unwrap()].to_owned(), deps)
        })
        .collect()
}

/// Every package `package` needs at run time, itself excluded.
fn closure(graph: &BTreeMap<String, BTreeSet<String>>, package: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![package.to_owned()];
    while let Some(p) = stack.pop() {
        for d in graph.get(&p).into_iter().flatten() {
            if seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn the_walls_are_the_dependency_graph() {
    let graph = normal_dependencies();
    let client = closure(&graph, "pve-client");
    let sim = closure(&graph, "pve-sim");
    let provider = closure(&graph, "crossplane-provider-proxmox");
    assert!(
        provider.contains("pve-client") && provider.contains("kube"),
        "the provider uses the client and kube: {provider:?}"
    );
    for forbidden in [
        "kube",
        "kube-core",
        "k8s-openapi",
        "pve-sim",
        "crossplane-provider-proxmox",
    ] {
        assert!(
            !client.contains(forbidden),
            "pve-client must not depend on {forbidden}"
        );
    }
    for forbidden in [
        "pve-client",
        "crossplane-provider-proxmox",
        "kube",
        "k8s-openapi",
    ] {
        assert!(
            !sim.contains(forbidden),
            "pve-sim must not depend on {forbidden}"
        );
    }
    assert!(
        !provider.contains("pve-sim"),
        "the provider ships without the simulator (a dev-dependency only)"
    );
}

/// Every `.rs` file under `dir`, and `dir.rs` beside it.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut files = vec![dir.with_extension("rs")];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("readable source directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("UTF-8 source");
            (p.display().to_string(), text)
        })
        .collect()
}

#[test]
fn the_plan_does_no_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = sources(&root.join("src/reconcile/vm/plan"));
    assert!(files.len() > 10, "the plan's sources: {}", files.len());
    // The containers' plan, and the spec rendering it uses.
    let container = root.join("src/reconcile/container");
    let mut paths: Vec<_> = std::fs::read_dir(container.join("plan"))
        .expect("the container plan's directory")
        .map(|e| e.expect("directory entry").path())
        .collect();
    assert!(paths.len() >= 4, "the container plan's sources: {paths:?}");
    paths.push(container.join("render.rs"));
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("UTF-8 source");
        files.push((path.display().to_string(), text));
    }
    // What I/O or a clock would need, in code (comments are skipped).
    let forbidden = [
        "async ",
        ".await",
        "kube::Client",
        "kube::Api",
        "Api<",
        "pve_client::Client",
        "reqwest",
        "tokio",
        "std::fs",
        "TcpStream",
        "UdpSocket",
        "std::process",
        "Timestamp::now",
        "Instant::now",
        "SystemTime",
        "thread_rng",
        "rand::",
    ];
    let offenders: Vec<String> = files
        .iter()
        .flat_map(|(file, text)| {
            text.lines().enumerate().filter_map(move |(n, line)| {
                let code = line.split("//").next().unwrap_or_default();
                forbidden
                    .iter()
                    .find(|f| code.contains(*f))
                    .map(|f| format!("{file}:{}: {f}: {}", n + 1, line.trim()))
            })
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "the plan must stay a pure function:\n{}",
        offenders.join("\n")
    );
}
