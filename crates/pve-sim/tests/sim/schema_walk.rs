//! Walks every path and method of the real PVE API schema against a running
//! simulator: each must be modelled, answered generically (as PVE answers
//! for an unconfigured feature), or refused with `pve-sim: not simulated`
//! under a prefix that docs/pve-sim.md lists. A bare 501 (PVE's "not
//! implemented" for paths it does not have) fails the walk.

use std::collections::BTreeSet;

use crate::common::start;
use crate::schema_source::index;

/// The path prefixes docs/pve-sim.md lists as not simulated (backticked
/// paths in its "Not simulated" section).
fn documented_prefixes() -> Vec<String> {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/pve-sim.md"),
    )
    .expect("docs/pve-sim.md");
    let section = docs
        .split("### Not simulated")
        .nth(1)
        .expect("docs/pve-sim.md has a '### Not simulated' section");
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|t| t.split_whitespace().last())
        .filter(|t| t.starts_with('/'))
        .map(str::to_owned)
        .collect()
}

/// A concrete path for a template: the seeded node, template VM (or the
/// walk's container) and storage.
fn concrete(template: &str) -> String {
    let vmid = if template.contains("/lxc/") {
        "9001"
    } else {
        "9000"
    };
    template
        .split('/')
        .map(|seg| match seg {
            "{node}" => "pve",
            "{vmid}" => vmid,
            "{storage}" => "local",
            s if s.starts_with('{') => "x",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_schema_path_is_modelled_generic_or_documented() {
    let schema = index();
    let sim = start().await;
    let modelled: BTreeSet<(String, String)> = pve_sim::endpoints()
        .iter()
        .map(|e| (e.path.to_owned(), e.method.to_owned()))
        .collect();
    let prefixes = documented_prefixes();
    let (mut n_modelled, mut n_generic, mut n_refused) = (0, 0, 0);
    let mut refused_list = Vec::new();
    let mut problems = Vec::new();
    sim.post_ok(
        "/nodes/pve/lxc",
        &[
            ("vmid", "9001"),
            (
                "ostemplate",
                "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
            ),
            ("storage", "local-lvm"),
        ],
    )
    .await;
    // Deletes last, so that the guests in the paths exist for the rest.
    let mut calls: Vec<&(String, String)> = schema.keys().collect();
    calls.sort_by_key(|(path, method)| (method == "DELETE", path.clone()));
    for (path, method) in calls {
        let method_ = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let resp = sim.send(sim.req(method_, &concrete(path))).await;
        let refused = resp.status == 501 && resp.reason.starts_with("pve-sim: not simulated");
        if modelled.contains(&(path.clone(), method.clone())) {
            n_modelled += 1;
        } else if refused {
            n_refused += 1;
            refused_list.push(format!("{method} {path}"));
            if method == "GET" {
                problems.push(format!("{method} {path}: a read is refused"));
            }
            if !prefixes.iter().any(|p| path.starts_with(p.as_str())) {
                problems.push(format!(
                    "{method} {path}: refused but not in docs/pve-sim.md"
                ));
            }
            continue;
        } else {
            n_generic += 1;
        }
        if resp.status == 501 {
            problems.push(format!("{method} {path}: bare 501 {}", resp.reason));
        }
    }
    println!(
        "schema walk: {} methods: {n_modelled} modelled, {n_generic} generic, {n_refused} not simulated",
        schema.len()
    );
    assert!(schema.len() > 600, "schema has {} methods", schema.len());
    println!("not simulated:\n  {}", refused_list.join("\n  "));
    assert!(n_modelled > 100, "modelled {n_modelled}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
