//! The fleet variant's own part of a run's Markdown section: its ideal, the
//! targets of a fleet (a quarter of the ordinary run's import-bound ideal,
//! one download per storage, nothing deleted while used) and the image's
//! times. Its ordinary figures are a column of the run's table.

use std::fmt::Write as _;

use crate::fleet::Fleet;
use crate::markdown::join;

fn secs(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1}"))
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}×"))
}

/// `### fleet: ...` under the run's heading.
pub fn section(md: &mut String, fleet: &Fleet) {
    let i = &fleet.ideal;
    let _ = writeln!(
        md,
        "\n### fleet: one ProxmoxImage, a template per node, linked clones\n\n\
         Limits of the fleet's config: {} requests per second, {} clones at once per node.\n",
        fleet.limits.requests_per_second, fleet.limits.max_concurrent_clones_per_node
    );
    let _ = writeln!(md, "| figure | value | target |\n|---|---|---|");
    let rows = [
        (
            "wall time, apply → all Ready (s)".to_owned(),
            secs(fleet.wall_seconds),
            String::new(),
        ),
        (
            "fleet ideal (s): slowest node's download + import + conversion + clone rounds + tail / writes through the budget".to_owned(),
            format!(
                "{:.1} ({:.1} + {:.1} + … {:.1} per clone → {:.1} / {:.1})",
                i.ideal, i.download, i.import, i.clone, i.critical_path, i.writes
            ),
            String::new(),
        ),
        (
            "wall ÷ fleet ideal".to_owned(),
            ratio(fleet.over_ideal()),
            String::new(),
        ),
        (
            format!(
                "wall ÷ the ordinary run's import-bound ideal ({:.1} s)",
                fleet.import_ideal
            ),
            ratio(fleet.over_import_ideal()),
            "≤ 0.25×".to_owned(),
        ),
        (
            "downloads per node/file".to_owned(),
            join(&fleet.downloads),
            "1 each".to_owned(),
        ),
        (
            "tasks: imports / template conversions / clones".to_owned(),
            format!("{} / {} / {}", fleet.imports, fleet.templates, fleet.clones),
            "1 import per node".to_owned(),
        ),
        (
            "most clones at once per node".to_owned(),
            join(&fleet.max_clones_per_node),
            format!("≤ {}", fleet.limits.max_concurrent_clones_per_node),
        ),
        (
            "image Ready after apply (s)".to_owned(),
            secs(fleet.image.ready_at.map(|t| t - fleet.image.applied)),
            String::new(),
        ),
        (
            "image gone after its delete (s; after its VMs, templates and files)".to_owned(),
            secs(
                fleet
                    .image
                    .gone_at
                    .zip(fleet.image.delete_at)
                    .map(|(g, d)| g - d),
            ),
            String::new(),
        ),
        (
            "deleted while in use".to_owned(),
            if fleet.early_deletes.is_empty() {
                "none".to_owned()
            } else {
                fleet.early_deletes.join("; ")
            },
            "none".to_owned(),
        ),
    ];
    for (label, value, target) in rows {
        let _ = writeln!(md, "| {label} | {value} | {target} |");
    }
}
