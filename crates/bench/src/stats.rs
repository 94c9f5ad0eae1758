//! Small statistics: percentiles of a sample, values of a sampled series at
//! a time, counts per second.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// p50, p90 and the maximum of a sample (nearest rank), and its size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub max: f64,
}

impl Dist {
    pub fn of(mut values: Vec<f64>) -> Option<Self> {
        values.retain(|v| v.is_finite());
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let i = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
            values[i - 1]
        };
        Some(Self {
            n: values.len(),
            p50: rank(0.5),
            p90: rank(0.9),
            max: values[values.len() - 1],
        })
    }
}

/// The value of a series (time, value; sorted by time) at `t`, linear
/// between the readings around it.
pub fn at(series: &[(f64, f64)], t: f64) -> Option<f64> {
    let after = series.partition_point(|(x, _)| *x < t);
    match (after.checked_sub(1).map(|i| series[i]), series.get(after)) {
        (Some((x0, y0)), Some(&(x1, y1))) if x1 > x0 => Some(y0 + (y1 - y0) * (t - x0) / (x1 - x0)),
        (_, Some(&(_, y))) | (Some((_, y)), None) => Some(y),
        (None, None) => None,
    }
}

/// The most events in one whole second, per key.
pub fn peak_per_second<'a>(events: impl Iterator<Item = (&'a str, f64)>) -> BTreeMap<String, u64> {
    let mut per_second: BTreeMap<(&str, i64), u64> = BTreeMap::new();
    for (key, t) in events {
        *per_second.entry((key, t.floor() as i64)).or_insert(0) += 1;
    }
    let mut peaks: BTreeMap<String, u64> = BTreeMap::new();
    for ((key, _), n) in per_second {
        let peak = peaks.entry(key.to_owned()).or_insert(0);
        *peak = (*peak).max(n);
    }
    peaks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let d = Dist::of((1..=10).map(f64::from).collect()).unwrap();
        assert_eq!((d.n, d.p50, d.p90, d.max), (10, 5.0, 9.0, 10.0));
        assert_eq!(Dist::of(vec![]), None);
        assert_eq!(Dist::of(vec![2.0]).unwrap().p90, 2.0);
    }

    #[test]
    fn series_are_interpolated_and_clamped() {
        let s = [(10.0, 1.0), (20.0, 3.0)];
        assert_eq!(at(&s, 15.0), Some(2.0));
        assert_eq!(at(&s, 5.0), Some(1.0));
        assert_eq!(at(&s, 25.0), Some(3.0));
        assert_eq!(at(&[], 1.0), None);
    }

    #[test]
    fn peaks_are_per_key_and_whole_second() {
        let events = [("a", 1.1), ("a", 1.9), ("a", 2.0), ("b", 1.5)];
        let peaks = peak_per_second(events.into_iter());
        assert_eq!(peaks["a"], 2);
        assert_eq!(peaks["b"], 1);
    }
}
