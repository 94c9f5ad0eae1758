//! Properties of the task-log progress parser: no panic on any line, a
//! percentage always within 0..=100, and every line qemu-server writes
//! (`transferred X of Y (p%)` with pve-common's `render_bytes`) read back
//! to the numbers it was rendered from, within the rendering's rounding.

use proptest::prelude::*;

use super::parse_progress;

/// pve-common `PVE::Format::render_bytes` with its default precision 2.
fn render_bytes(value: u64) -> (String, f64) {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit = 0;
    #[allow(clippy::cast_precision_loss)]
    let mut scaled = value as f64;
    while scaled > 1023.0 && unit < UNITS.len() - 1 {
        scaled /= 1024.0;
        unit += 1;
    }
    let factor = 1024f64.powi(i32::try_from(unit).unwrap_or_default());
    (format!("{scaled:.2} {}", UNITS[unit]), factor)
}

/// Sizes up to 1 PiB: everything `render_bytes` has a unit for.
fn size() -> impl Strategy<Value = u64> {
    prop_oneof![0..1024u64, 0..(1u64 << 30), 0..(1u64 << 50)]
}

proptest! {
    #[test]
    fn prop_any_line_parses_or_not_without_panic(line in any::<String>()) {
        if let Some(p) = parse_progress(&line) {
            prop_assert!((0.0..=100.0).contains(&p.percent), "{:?}", p);
        }
    }

    #[test]
    fn prop_progress_shaped_lines_never_panic(
        a in r"[0-9.]{1,30}", ua in r"[KMGTPEX]?i?B",
        b in r"[0-9.]{1,30}", ub in r"[KMGTPEX]?i?B",
        p in r"[0-9.]{1,12}",
    ) {
        let line = format!("transferred {a} {ua} of {b} {ub} ({p}%)");
        if let Some(got) = parse_progress(&line) {
            prop_assert!((0.0..=100.0).contains(&got.percent), "{:?}", got);
        }
    }

    #[test]
    fn prop_rendered_lines_read_back(
        (total, done) in size().prop_flat_map(|t| (Just(t), 0..=t)),
        prefix in r"[a-z :]{0,12}",
    ) {
        let (done_text, done_unit) = render_bytes(done);
        let (total_text, total_unit) = render_bytes(total);
        #[allow(clippy::cast_precision_loss)]
        let percent = if total == 0 { 100.0 } else { done as f64 * 100.0 / total as f64 };
        let line = format!("{prefix}transferred {done_text} of {total_text} ({percent:.2}%)");
        let got = parse_progress(&line);
        prop_assert!(got.is_some(), "{:?} not read", line);
        let Some(got) = got else { return Ok(()) };
        prop_assert!((got.percent - percent).abs() <= 0.005 + 1e-9, "{:?} from {:?}", got, line);
        // Two decimals of the unit: off by at most half a hundredth of it.
        #[allow(clippy::cast_precision_loss)]
        let close = |got: u64, want: u64, unit: f64| (got as f64 - want as f64).abs() <= unit * 0.005 + 1.0;
        prop_assert!(close(got.transferred_bytes, done, done_unit), "{:?} from {:?}", got, line);
        prop_assert!(close(got.total_bytes, total, total_unit), "{:?} from {:?}", got, line);
    }
}
