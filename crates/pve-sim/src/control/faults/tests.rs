//! Rule matching, ordering, sequences and seeded probabilities.

use super::*;

#[test]
fn count_limits_and_matching() {
    let mut f = Faults::new(1, &FaultRates::default());
    let rule: FaultRule = serde_json::from_str(
        r#"{"method":"GET","path":"/version","fault":"http-error","status":596,"count":1}"#,
    )
    .unwrap();
    f.add(rule).unwrap();
    assert!(f.on_request("POST", "/version").error.is_none());
    assert_eq!(
        f.on_request("GET", "/version")
            .error
            .map(|e| e.status_code()),
        Some(596)
    );
    assert!(f.on_request("GET", "/version").error.is_none());
    assert!(f.list().is_empty());
}

#[test]
fn task_faults_match_type() {
    let mut f = Faults::new(1, &FaultRates::default());
    f.add(
        serde_json::from_str(r#"{"fault":"task-fail","task_type":"qmstart","message":"boom"}"#)
            .unwrap(),
    )
    .unwrap();
    assert!(f.on_task("qmstop", "POST /x").fail.is_none());
    assert_eq!(
        f.on_task("qmstart", "POST /x").fail.as_deref(),
        Some("boom")
    );
}

fn rule(v: serde_json::Value) -> FaultRule {
    serde_json::from_value(v).unwrap()
}

/// The status each request gets (200 handled, 0 reset, -1 null data).
fn outcomes(f: &mut Faults, n: usize) -> Vec<i32> {
    (0..n)
        .map(|_| {
            let out = f.on_request("GET", "/version");
            match out.error {
                Some(e) => i32::from(e.status_code()),
                None if out.null_data => -1,
                None => 200,
            }
        })
        .collect()
}

#[test]
fn a_sequence_fires_one_step_per_request_then_is_used_up() {
    let mut f = Faults::new(1, &FaultRates::default());
    f.add(rule(
        serde_json::json!({"path": "/version", "fault": "sequence", "steps": [
        {"fault": "http-error", "status": 503}, {"fault": "reset"},
        {"fault": "pass"}, {"fault": "null-data"}]}),
    ))
    .unwrap();
    assert_eq!(f.list()[0].rule.count, Some(1), "one run by default");
    assert_eq!(outcomes(&mut f, 5), [503, 0, 200, -1, 200]);
    assert!(f.list().is_empty());

    f.add(rule(
        serde_json::json!({"fault": "sequence", "count": 2, "steps": [
        {"fault": "http-error", "status": 596}, {"fault": "pass"}]}),
    ))
    .unwrap();
    assert_eq!(outcomes(&mut f, 5), [596, 200, 596, 200, 200]);
}

#[test]
fn only_the_first_deciding_rule_fires_and_later_ones_keep_their_counts() {
    let mut f = Faults::new(1, &FaultRates::default());
    for v in [
        serde_json::json!({"fault": "latency", "ms": 1, "count": 2}),
        serde_json::json!({"fault": "http-error", "status": 503, "count": 1}),
        serde_json::json!({"fault": "reset", "count": 1}),
    ] {
        f.add(rule(v)).unwrap();
    }
    let first = f.on_request("GET", "/version");
    assert!(first.latency.is_some(), "latency adds to the outcome");
    assert_eq!(first.error.map(|e| e.status_code()), Some(503));
    assert_eq!(
        f.list().last().unwrap().fired,
        0,
        "the reset waits its turn"
    );
    assert_eq!(outcomes(&mut f, 2), [0, 200]);
}

#[test]
fn archive_faults_fire_on_passes_only() {
    let mut f = Faults::new(1, &FaultRates::default());
    assert!(
        f.add(rule(
            serde_json::json!({"fault": "archive-error", "path": "/version"})
        ))
        .is_err()
    );
    f.add(rule(
        serde_json::json!({"fault": "archive-error", "count": 1}),
    ))
    .unwrap();
    assert_eq!(outcomes(&mut f, 1), [200]);
    assert!(f.on_task("qmstart", "POST /x").fail.is_none());
    assert!(f.on_archive());
    assert!(!f.on_archive());
}

#[test]
fn probabilities_are_seeded() {
    let run = || {
        let mut f = Faults::new(
            42,
            &FaultRates {
                http_596: 0.5,
                ..FaultRates::default()
            },
        );
        (0..32)
            .map(|_| f.on_request("GET", "/version").error.is_some())
            .collect::<Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    assert!(a.contains(&true) && a.contains(&false));
}
