//! Authentication and TLS against pve-sim: API tokens, tickets with CSRF
//! and renewal, single-flight login, fingerprint pinning, CA bundles,
//! insecure mode. The simulator's request counters are the referee.

use std::time::Duration;

use pve_client::{Client, Credentials, Error, Fingerprint, Secret};
use pve_sim::SimConfig;

use crate::harness;
use crate::harness::{Harness, NODE, cloned_vm};

#[tokio::test]
async fn token_auth_reads_and_writes_without_a_ticket() {
    let h = Harness::start().await;
    let client = h.client();
    let v = client.version().await.unwrap();
    assert!(!v.version.is_empty(), "version {v:?}");
    cloned_vm(&client, 200).await; // a task-starting write
    assert_eq!(
        h.count("POST", "/access/ticket").await,
        0,
        "tokens never log in"
    );
    let users: Vec<_> = h
        .requests()
        .await
        .into_iter()
        .filter_map(|r| r["user"].as_str().map(str::to_owned))
        .collect();
    assert!(!users.is_empty());
    assert!(users.iter().all(|u| u == "root@pam!sim"), "{users:?}");
}

#[tokio::test]
async fn wrong_token_is_unauthorized_and_never_leaks_the_secret() {
    let h = Harness::start().await;
    let client = h.client_with(|c| {
        c.credentials = Credentials::token_from_str("root@pam!sim=wrong-secret-value").unwrap();
    });
    let err = client.version().await.unwrap_err();
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");
    for text in [err.to_string(), format!("{err:?}"), format!("{client:?}")] {
        assert!(
            !text.contains("wrong-secret-value"),
            "secret leaked: {text}"
        );
    }
    // 401 is not retried.
    assert_eq!(h.count("GET", "/version").await, 1);
}

#[tokio::test]
async fn ticket_auth_sends_csrf_on_writes() {
    let h = Harness::start().await;
    let client = Client::new(h.ticket_config()).unwrap();
    client.version().await.unwrap();
    // POST (task start) and PUT (sync) both need the CSRF token with a
    // ticket; the sim answers 401 without it.
    cloned_vm(&client, 201).await;
    let update = pve_client::vm::ConfigUpdate {
        set: pve_client::vm::VmParams {
            description: Some("csrf ok".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    client
        .update_vm_config_sync(NODE, 201, &update)
        .await
        .unwrap();
    assert_eq!(h.count("POST", "/access/ticket").await, 1);
    let stats = h.stats().await;
    assert_eq!(stats["status"]["401"].as_u64().unwrap_or(0), 0, "{stats}");
    let cfg = client.vm_config(NODE, 201).await.unwrap();
    assert_eq!(cfg.description.as_deref(), Some("csrf ok"));
    // The password never reaches the request log.
    let log = serde_json::to_string(&h.requests().await).unwrap();
    assert!(!log.contains(harness::PASSWORD), "password in the sim log");
}

#[tokio::test]
async fn concurrent_callers_share_one_login() {
    let h = Harness::start().await;
    let client = Client::new(h.ticket_config()).unwrap();
    harness::concurrent_versions(&client, 25).await;
    assert_eq!(h.count("POST", "/access/ticket").await, 1);
    assert_eq!(h.count("GET", "/version").await, 25);
}

#[tokio::test]
async fn tickets_are_renewed_before_they_expire() {
    // The client renews a ticket once it is 1 s old; the sim's tickets live
    // 120 s, so every renewal happens long before the ticket expires however
    // slowly a busy machine runs the requests (expiry itself is the next
    // test's). Each request made at least 1 s after the last login logs in
    // again, so the count of logins is exact.
    let refresh_after = Duration::from_secs(1);
    let h = Harness::start_with(SimConfig {
        time_scale: 0.01,
        ticket_lifetime: Duration::from_secs(120),
        ..SimConfig::default()
    })
    .await;
    let mut config = h.ticket_config();
    config.auth.ticket_refresh_after = refresh_after;
    let client = Client::new(config).unwrap();
    for logins in 1..=3 {
        client.version().await.unwrap();
        assert_eq!(h.count("POST", "/access/ticket").await, logins);
        tokio::time::sleep(refresh_after + Duration::from_millis(100)).await;
    }
    // Renewal kept every request authenticated.
    assert_eq!(h.count_status("GET", "/version", 401).await, 0);
    assert_eq!(h.count("GET", "/version").await, 3);
}

#[tokio::test]
async fn an_expired_ticket_is_replaced_after_one_401() {
    // The client would keep its ticket for an hour; the server expires it
    // after 1 s. The 401 triggers one fresh login and one resend.
    let h = Harness::start_with(SimConfig {
        time_scale: 0.01,
        ticket_lifetime: Duration::from_secs(1),
        ..SimConfig::default()
    })
    .await;
    let client = Client::new(h.ticket_config()).unwrap();
    client.version().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    client.version().await.unwrap();
    assert_eq!(h.count_status("GET", "/version", 401).await, 1);
    assert_eq!(h.count("POST", "/access/ticket").await, 2);
}

#[tokio::test]
async fn wrong_password_is_unauthorized_and_redacted() {
    let h = Harness::start().await;
    let mut config = h.ticket_config();
    config.credentials = Credentials::Password {
        username: "root@pam".into(),
        password: Secret::new("not-the-password-123"),
    };
    let client = Client::new(config).unwrap();
    let err = client.version().await.unwrap_err();
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");
    assert!(!format!("{err} {err:?} {client:?}").contains("not-the-password-123"));
    assert_eq!(
        h.count("GET", "/version").await,
        0,
        "no request without a ticket"
    );
}

#[tokio::test]
async fn pinned_fingerprint_is_accepted() {
    let h = Harness::start().await;
    // The sim's leaf is signed by a CA nobody trusts: only the pin lets
    // this through.
    h.client().version().await.unwrap();
}

#[tokio::test]
async fn pin_mismatch_is_refused_showing_the_presented_fingerprint() {
    let h = Harness::start().await;
    let wrong: Fingerprint = "00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF"
        .parse()
        .unwrap();
    let client = h.client_with(|c| c.tls.pinned_fingerprints = vec![wrong]);
    let err = client.version().await.unwrap_err();
    let Error::Tls { message } = &err else {
        panic!("expected a TLS error, got {err:?}")
    };
    assert!(message.contains(h.sim.fingerprint()), "{message}");
    assert!(message.contains(&wrong.to_string()), "{message}");
    // Not retried: the handshake failed, no request reached the server.
    assert_eq!(h.total().await, 0);
}

#[tokio::test]
async fn ca_bundle_is_accepted_and_a_wrong_ca_refused() {
    let h = Harness::start().await;
    let good = h.client_with(|c| {
        c.tls.pinned_fingerprints.clear();
        c.tls.ca_pem = Some(h.sim.ca_pem().to_owned());
    });
    good.version().await.unwrap();

    // Another simulator's CA did not sign this server's certificate.
    let other = Harness::start().await;
    let bad = h.client_with(|c| {
        c.tls.pinned_fingerprints.clear();
        c.tls.ca_pem = Some(other.sim.ca_pem().to_owned());
    });
    let err = bad.version().await.unwrap_err();
    assert!(matches!(err, Error::Tls { .. }), "{err:?}");

    // Verification is on by default: system roots do not know the sim CA.
    let default = h.client_with(|c| c.tls.pinned_fingerprints.clear());
    assert!(matches!(default.version().await, Err(Error::Tls { .. })));
}

#[tokio::test]
async fn insecure_mode_accepts_any_certificate_when_asked() {
    let h = Harness::start().await;
    let client = h.client_with(|c| {
        c.tls.pinned_fingerprints.clear();
        c.tls.insecure_skip_verify = true;
    });
    client.version().await.unwrap();
}
