//! Copy/import progress from task log lines.

use std::sync::LazyLock;

use regex::Regex;

use crate::task::TaskLogLine;

/// Progress of a copy/import: `transferred X of Y (pp.pp%)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    pub percent: f64,
    pub transferred_bytes: u64,
    pub total_bytes: u64,
}

static PROGRESS_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"transferred\s+([0-9.]+)\s*([KMGTPE]?i?B)\s+of\s+([0-9.]+)\s*([KMGTPE]?i?B)\s+\(([0-9.]+)%\)",
    )
    .expect("the progress regex is a valid constant")
});

/// A live migration's memory phase: `migration active, transferred 1.2 GiB
/// of 4.0 GiB VM-state, 100.0 MiB/s` (qemu-server's `QemuMigrate`; no
/// percentage, and dirtied pages can make the transferred part exceed the
/// total).
static VM_STATE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"transferred\s+([0-9.]+)\s*([KMGTPE]?i?B)\s+of\s+([0-9.]+)\s*([KMGTPE]?i?B)\s+VM-state",
    )
    .expect("the VM-state regex is a valid constant")
});

/// Parses a `transferred 1.1 GiB of 2.2 GiB (50.00%)` line (PVE's
/// `render_bytes` units: B, KiB, MiB, GiB, TiB, PiB), or a live
/// migration's `transferred 1.1 GiB of 2.2 GiB VM-state` (percent computed,
/// at most 100).
pub fn parse_progress(line: &str) -> Option<Progress> {
    let Some(caps) = PROGRESS_RE.captures(line) else {
        return parse_vm_state(line);
    };
    let num = |i: usize| caps.get(i)?.as_str().parse::<f64>().ok();
    let unit = |i: usize| unit_factor(caps.get(i)?.as_str());
    let percent = num(5)?;
    if !(0.0..=100.0).contains(&percent) {
        return None;
    }
    Some(Progress {
        percent,
        transferred_bytes: to_bytes(num(1)?, unit(2)?),
        total_bytes: to_bytes(num(3)?, unit(4)?),
    })
}

fn parse_vm_state(line: &str) -> Option<Progress> {
    let caps = VM_STATE_RE.captures(line)?;
    let num = |i: usize| caps.get(i)?.as_str().parse::<f64>().ok();
    let unit = |i: usize| unit_factor(caps.get(i)?.as_str());
    let transferred_bytes = to_bytes(num(1)?, unit(2)?);
    let total_bytes = to_bytes(num(3)?, unit(4)?);
    if total_bytes == 0 {
        return None;
    }
    let percent = (transferred_bytes as f64 * 100.0 / total_bytes as f64).min(100.0);
    Some(Progress {
        percent,
        transferred_bytes,
        total_bytes,
    })
}

fn unit_factor(unit: &str) -> Option<f64> {
    let pow = match unit.chars().next()? {
        'B' => 0,
        'K' => 1,
        'M' => 2,
        'G' => 3,
        'T' => 4,
        'P' => 5,
        'E' => 6,
        _ => return None,
    };
    Some(1024f64.powi(pow))
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn to_bytes(value: f64, factor: f64) -> u64 {
    // Rendered values have two decimals: the result is approximate anyway.
    (value * factor).round().max(0.0) as u64
}

/// The last progress line in a log slice.
pub fn last_progress(lines: &[TaskLogLine]) -> Option<Progress> {
    lines.iter().rev().find_map(|l| parse_progress(&l.t))
}

#[cfg(test)]
mod prop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_table() {
        let p = parse_progress("transferred 1.1 GiB of 2.2 GiB (50.00%)").unwrap();
        assert!((p.percent - 50.0).abs() < 1e-9);
        assert_eq!(p.total_bytes, (2.2 * 1024f64.powi(3)).round() as u64);
        let zero = parse_progress("transferred 0.0 B of 2.2 GiB (0.00%)").unwrap();
        assert_eq!(zero.transferred_bytes, 0);
        let done = parse_progress("transferred 2.2 GiB of 2.2 GiB (100.00%)").unwrap();
        assert!((done.percent - 100.0).abs() < 1e-9);
        let mib = parse_progress("transferred 512.0 MiB of 1.0 GiB (50.00%)").unwrap();
        assert_eq!(mib.transferred_bytes, 512 * 1024 * 1024);
        for not in [
            "scsi0: successfully created disk 'local-lvm:vm-100-disk-0,size=2252M'",
            "transferred lots of stuff",
            "transferred 1 XB of 2 GiB (10.00%)",
            "transferred 1 GiB of 2 GiB (150.00%)",
        ] {
            assert!(parse_progress(not).is_none(), "{not}");
        }
        let live = parse_progress(
            "2026-12-01 10:00:01 migration active, transferred 512.0 MiB of 2.0 GiB VM-state, 100.0 MiB/s",
        )
        .unwrap();
        assert!((live.percent - 25.0).abs() < 1e-9);
        let dirty =
            parse_progress("migration active, transferred 3.0 GiB of 2.0 GiB VM-state, 1.0 MiB/s")
                .unwrap();
        assert!((dirty.percent - 100.0).abs() < 1e-9, "capped");
        assert!(
            parse_progress("migration active, transferred 1.0 GiB of 0.0 B VM-state").is_none()
        );
        let lines = vec![
            TaskLogLine {
                n: 1,
                t: "transferred 0.0 B of 1.0 GiB (0.00%)".into(),
            },
            TaskLogLine {
                n: 2,
                t: "transferred 0.5 GiB of 1.0 GiB (50.00%)".into(),
            },
            TaskLogLine {
                n: 3,
                t: "other".into(),
            },
        ];
        assert!((last_progress(&lines).unwrap().percent - 50.0).abs() < 1e-9);
    }
}
