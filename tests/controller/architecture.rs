//! The architecture, checked: the walls are the workspace's dependency
//! graph, and the plan is a pure function.
//!
//! * `pve-client` depends on no Kubernetes crate and not on the simulator;
//! * `pve-sim` depends on neither `pve-client` nor the provider (a UPID or
//!   encoding bug written once cannot pass in both);
//! * the provider's `reconcile::vm::plan` does no I/O: no async code, no
//!   clients, no clock (the time comes in `PlanInput::now`).
//! * the imports of `src/reconcile` point down: a shared module names no
//!   kind's module, and no kind names another's.

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

/// Every `.rs` file under `dir`, and `dir.rs` beside it (either may be
/// missing).
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<_> = Some(dir.with_extension("rs"))
        .filter(|f| f.is_file())
        .into_iter()
        .collect();
    let mut stack: Vec<_> = Some(dir.to_path_buf())
        .filter(|d| d.is_dir())
        .into_iter()
        .collect();
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

/// The pure decision files of every kind, found by name, not by a hand
/// list: in each folder of `src/reconcile` that holds a kind, its
/// `plan.rs` and `plan/`, and the pure helpers the recipe names
/// (`render.rs`, `names.rs`, `templates.rs`, `report.rs`); and the shared
/// vocabulary, `common/`.
fn pure_sources(reconcile: &Path) -> Vec<(String, String)> {
    const HELPERS: [&str; 4] = ["render.rs", "names.rs", "templates.rs", "report.rs"];
    let mut files = sources(&reconcile.join("common"));
    let mut kinds = 0;
    for entry in std::fs::read_dir(reconcile).expect("src/reconcile") {
        let dir = entry.expect("directory entry").path();
        if !dir.is_dir() {
            continue;
        }
        let plan = dir.join("plan");
        if plan.is_dir() || plan.with_extension("rs").is_file() {
            kinds += 1;
            files.extend(sources(&plan));
        }
        for helper in HELPERS {
            let path = dir.join(helper);
            if path.is_file() {
                let text = std::fs::read_to_string(&path).expect("UTF-8 source");
                files.push((path.display().to_string(), text));
            }
        }
    }
    assert!(kinds >= 3, "kinds with a plan: {kinds}");
    files
}

#[test]
fn the_plan_does_no_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let reconcile = root.join("src/reconcile");
    let files = pure_sources(&reconcile);
    let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    for expected in [
        "vm/plan.rs",
        "vm/plan/task.rs",
        "container/plan/mod.rs",
        "container/render.rs",
        "image/plan.rs",
        "fleet/templates.rs",
        "common/tasks.rs",
    ] {
        assert!(
            names.iter().any(|n| n.ends_with(expected)),
            "{expected} is checked: {names:?}"
        );
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

/// The modules of `src/reconcile` that every kind shares: they name no
/// kind's module (a kind's API types, in `crate::api`, they may name).
const SHARED: [&str; 12] = [
    "common",
    "context",
    "downloads",
    "error",
    "events",
    "identity",
    "inventory",
    "invalid",
    "managed",
    "providers",
    "runtime",
    "schedule",
];

/// The composition root, which names every kind.
const ROOT: [&str; 3] = ["mod", "controllers", "process"];

/// Kinds that name another kind's module, each with why (empty: none may).
const ALLOWED: [(&str, &str, &str); 0] = [];

/// The module path of a source file under `src/`: `["reconcile", "vm",
/// "pass"]` for `src/reconcile/vm/pass.rs` and for `.../vm/pass/mod.rs`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("a file under src/");
    let mut path: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    path
}

/// The top-level modules of `src/reconcile` a line of code names, through
/// `crate::reconcile::x`, `crate::reconcile::{x, y}` or `super::` paths
/// resolved from `module`.
fn named_modules(module: &[String], code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut named = vec![];
    let mut rest = code;
    while let Some(at) = rest.find("crate::reconcile::") {
        let after = &rest[at + "crate::reconcile::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or_default();
            named.extend(inner.split(',').map(|p| ident(p.trim())));
        } else {
            named.push(ident(after));
        }
        rest = after;
    }
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        // Only the start of a path (not `a::super::`, which Rust refuses).
        let before = rest[..at].chars().last();
        let mut after = &rest[at..];
        rest = &rest[at + "super::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut base = module.to_vec();
        while let Some(next) = after.strip_prefix("super::") {
            base.pop();
            after = next;
        }
        rest = after;
        let targets: Vec<String> = match after.strip_prefix('{') {
            Some(group) => group
                .split('}')
                .next()
                .unwrap_or_default()
                .split(',')
                .map(|p| ident(p.trim()))
                .collect(),
            None => vec![ident(after)],
        };
        for target in targets {
            let mut full = base.clone();
            full.push(target);
            if full.len() >= 2 && full[0] == "reconcile" {
                named.push(full[1].clone());
            }
        }
    }
    named.retain(|n| !n.is_empty());
    named
}

/// Imports in `src/reconcile` point down: a shared module names no kind's
/// module, and a kind names no other kind's (but through [`ALLOWED`]).
/// The kinds are found by name: every module of `src/reconcile` that is
/// neither shared nor the composition root.
#[test]
fn the_imports_of_reconcile_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let reconcile = src.join("reconcile");
    let declared = std::fs::read_to_string(reconcile.join("mod.rs")).expect("reconcile/mod.rs");
    let modules: Vec<String> = declared
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_owned())
        .collect();
    let kinds: Vec<&String> = modules
        .iter()
        .filter(|m| !SHARED.contains(&m.as_str()) && !ROOT.contains(&m.as_str()))
        .collect();
    for kind in [
        "vm",
        "container",
        "image",
        "fleet",
        "pool",
        "security_group",
    ] {
        assert!(
            kinds.iter().any(|k| *k == kind),
            "{kind} is a kind: {kinds:?}"
        );
    }
    for shared in SHARED {
        assert!(
            modules.iter().any(|m| m == shared),
            "{shared} is a module of src/reconcile: {modules:?}"
        );
    }
    let mut arrows = BTreeSet::new();
    let mut offenders = vec![];
    for (file, text) in sources(&reconcile) {
        let module = module_of(&src, Path::new(&file));
        let Some(owner) = module.get(1).cloned() else {
            continue;
        };
        if ROOT.contains(&owner.as_str()) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for target in named_modules(&module, code) {
                if target == owner || !kinds.iter().any(|k| **k == target) {
                    continue;
                }
                let shared = SHARED.contains(&owner.as_str());
                let allowed = ALLOWED
                    .iter()
                    .any(|(from, to, _)| *from == owner && *to == target);
                if shared || !allowed {
                    offenders.push(format!(
                        "{file}:{}: {owner} → {target}: {}",
                        n + 1,
                        line.trim()
                    ));
                } else {
                    arrows.insert((owner.clone(), target));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "imports pointing up or across (shared code takes what it needs from controllers.rs, or the piece moves down):\n{}",
        offenders.join("\n")
    );
    // Every allowed arrow is still used (a debt paid is struck off).
    for (from, to, why) in ALLOWED {
        assert!(
            arrows.contains(&(from.to_owned(), to.to_owned())),
            "{from} → {to} is allowed ({why}) but no longer taken: remove it from ALLOWED"
        );
    }
}

/// The check finds what it is meant to find.
#[test]
fn the_import_check_sees_every_way_of_naming_a_module() {
    let module = |p: &str| p.split('/').map(str::to_owned).collect::<Vec<_>>();
    let cases: [(&str, &str, &[&str]); 7] = [
        ("reconcile/context", "use super::vm::pass::Known;", &["vm"]),
        (
            "reconcile/managed/reserve",
            "use super::super::fleet::cache;",
            &["fleet"],
        ),
        (
            "reconcile/managed",
            "use crate::reconcile::{ip_set, pool};",
            &["ip_set", "pool"],
        ),
        (
            "reconcile/vm/pass",
            "crate::reconcile::image::named(x)",
            &["image"],
        ),
        ("reconcile/vm/pass", "use super::plan::Step;", &["vm"]),
        (
            "reconcile/vm/pass/act",
            "use super::super::{plan, pass};",
            &["vm", "vm"],
        ),
        ("reconcile/vm", "let a = b::super_c;", &[]),
    ];
    for (file, code, expected) in cases {
        assert_eq!(
            named_modules(&module(file), code),
            expected,
            "{file}: {code}"
        );
    }
}
