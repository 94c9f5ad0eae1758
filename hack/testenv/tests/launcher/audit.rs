//! The optional audit log: exactly one line per request of the audited
//! users, with who asked, the verb and the resource; nothing for others.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use testenv::{ADMIN_USER, AuditPolicy, ControlPlane, Options};

#[tokio::test]
async fn the_audit_log_has_one_line_per_request_of_the_audited_user() {
    let plane = ControlPlane::start(
        Options::attached().with_audit(AuditPolicy::requests_of(&[ADMIN_USER])),
    )
    .await
    .unwrap();
    let log = plane
        .audit_log()
        .expect("an audit log was asked for")
        .to_owned();
    let client = kube::Client::try_from(plane.kube_config().await.unwrap()).unwrap();
    let namespaces = kube::Api::<Namespace>::all(client);
    // Start-up requests (the readiness check) are logged too; count from here.
    let before = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count();
    for _ in 0..3 {
        namespaces.get("default").await.unwrap();
    }
    namespaces.list(&Default::default()).await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(10);
    let events: Vec<serde_json::Value> = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        let events: Vec<serde_json::Value> = text
            .lines()
            .skip(before)
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        if events.len() >= 4 || Instant::now() > deadline {
            break events;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let summary: Vec<(String, String, String, String)> = events
        .iter()
        .map(|e| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&e["user"]["username"]),
                text(&e["verb"]),
                text(&e["objectRef"]["resource"]),
                text(&e["stage"]),
            )
        })
        .collect();
    let get = (
        ADMIN_USER.to_owned(),
        "get".to_owned(),
        "namespaces".to_owned(),
        "RequestReceived".to_owned(),
    );
    let list = (
        ADMIN_USER.to_owned(),
        "list".to_owned(),
        "namespaces".to_owned(),
        "RequestReceived".to_owned(),
    );
    assert_eq!(
        summary,
        vec![get.clone(), get.clone(), get, list],
        "the apiserver's own requests are not logged and every request is one line"
    );
}
