//! Every error class, produced by pve-sim (real handler errors, and fault
//! injection for the proxy-hop failures a healthy simulator never has).

use pve_client::vm::{ConfigUpdate, CreateVm, VmParams};
use pve_client::{Credentials, Error, RetryPolicy};
use pve_sim::SimConfig;
use serde_json::json;

use crate::harness::{Harness, NODE, TEMPLATE, cloned_vm, http_fault, start_import};

#[tokio::test]
async fn proxy_hop_failures_are_transient() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = RetryPolicy::none());
    for status in [595u16, 596, 597, 599, 502, 503] {
        h.fault(http_fault("GET", "/version", status, Some(1)))
            .await;
        let err = client.version().await.unwrap_err();
        match &err {
            Error::Transient {
                status: Some(s),
                message,
                may_have_run,
            } => {
                assert_eq!(*s, status);
                assert!(!message.is_empty());
                // Only 595 proves the request never reached the handler.
                assert_eq!(*may_have_run, status != 595, "{status}");
            }
            other => panic!("{status}: expected Transient, got {other:?}"),
        }
        assert!(err.is_retryable());
    }
    // The reason phrase carries the message when there is no JSON body.
    h.fault(http_fault("GET", "/version", 595, Some(1))).await;
    let err = client.version().await.unwrap_err();
    assert!(err.to_string().contains("Connection refused"), "{err}");
}

#[tokio::test]
async fn connection_reset_is_transient() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = RetryPolicy::none());
    h.fault(json!({"method": "GET", "path": "/version", "fault": "reset", "count": 1}))
        .await;
    let err = client.version().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Transient {
                status: None,
                may_have_run: true,
                ..
            }
        ),
        "{err:?}"
    );
    // The next request works.
    client.version().await.unwrap();
}

#[tokio::test]
async fn locked_vm_and_flock_timeout_are_locked() {
    // The create (and its lock) is held running: it outlives the checks.
    let h = Harness::start().await;
    h.hold_tasks("import", "qmcreate").await;
    let client = h.client_with(|c| c.retry = RetryPolicy::none());
    let upid = start_import(&client, 300).await;
    let update = ConfigUpdate {
        set: VmParams {
            cores: Some(2),
            ..VmParams::default()
        },
        ..ConfigUpdate::default()
    };
    let err = client
        .update_vm_config_sync(NODE, 300, &update)
        .await
        .unwrap_err();
    match &err {
        Error::Locked { what, message } => {
            assert_eq!(what, "create");
            assert!(message.contains("VM is locked (create)"), "{message}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(client.observe_task(&upid).await.is_ok());

    // The flock: an injected lock timeout on a sync config update.
    let h2 = Harness::start().await;
    let client2 = h2.client_with(|c| c.retry = RetryPolicy::none());
    cloned_vm(&client2, 301).await;
    h2.fault(json!({"method": "PUT", "path": "/nodes/{node}/qemu/{vmid}/config", "fault": "lock-timeout", "count": 1}))
        .await;
    let err = client2
        .update_vm_config_sync(NODE, 301, &update)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Locked { what, message } if what == "flock" && message.contains("got timeout")),
        "{err:?}"
    );
}

#[tokio::test]
async fn permission_errors_name_path_and_privilege() {
    let h = Harness::start_with(SimConfig {
        time_scale: 0.01,
        api_tokens: vec!["audit@pve!ro=ro-secret".parse().unwrap()],
        grants: vec!["audit@pve:/:PVEAuditor".parse().unwrap()],
        ..SimConfig::default()
    })
    .await;
    let client = h.client_with(|c| {
        c.credentials = Credentials::token_from_str("audit@pve!ro=ro-secret").unwrap();
    });
    // Reading works for an auditor ...
    client.vm_config(NODE, TEMPLATE).await.unwrap();
    // ... cloning (VM.Clone on the source) does not; PVE names path and
    // privilege.
    let err = client
        .clone_vm(
            NODE,
            TEMPLATE,
            &pve_client::vm::CloneVm {
                newid: 310,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    match &err {
        Error::Forbidden {
            path, privilege, ..
        } => {
            assert_eq!(path.as_deref(), Some(&*format!("/vms/{TEMPLATE}")));
            assert_eq!(privilege.as_deref(), Some("VM.Clone"));
        }
        other => panic!("expected Forbidden, got {other:?}"),
    }
    assert!(!err.is_retryable());
    // Creating is refused with qemu-server's bare message: still Forbidden.
    let err = client
        .create_vm(
            NODE,
            &CreateVm {
                vmid: 310,
                ..CreateVm::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Forbidden { path: None, privilege: None, message } if message == "Permission check failed"),
        "{err:?}"
    );
}

#[tokio::test]
async fn invalid_parameters_carry_the_per_parameter_map() {
    let h = Harness::start().await;
    let client = h.client();
    // Values the types allow but PVE's schema refuses.
    let params = VmParams {
        name: Some("not a DNS name".into()),
        cores: Some(0),
        ..VmParams::default()
    };
    let err = client
        .create_vm(
            NODE,
            &CreateVm {
                vmid: 320,
                params,
                ..CreateVm::default()
            },
        )
        .await
        .unwrap_err();
    match &err {
        Error::Invalid { errors, message } => {
            assert_eq!(message, "Parameter verification failed.");
            assert!(errors["name"].contains("DNS name"), "{errors:?}");
            assert!(errors["cores"].contains("minimum value of 1"), "{errors:?}");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    // Parameter errors are never retried.
    assert_eq!(h.count("POST", "/nodes/{node}/qemu").await, 1);
}

#[tokio::test]
async fn missing_vm_is_not_found_and_taken_vmid_already_exists() {
    let h = Harness::start().await;
    let client = h.client();
    let err = client.vm_status(NODE, 4242).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = client.vm_config(NODE, 4242).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");

    let err = client
        .create_vm(
            NODE,
            &CreateVm {
                vmid: TEMPLATE,
                ..CreateVm::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err:?}");

    let next = client.next_vmid().await.unwrap();
    assert!(next >= 100 && next != TEMPLATE, "{next}");
}

#[tokio::test]
async fn a_failed_task_reports_exit_status_and_log_tail() {
    let h = Harness::start().await;
    let client = h.client();
    cloned_vm(&client, 330).await;
    h.fault(json!({"fault": "task-fail", "task_type": "qmstart", "message": "injected start failure", "count": 1}))
        .await;
    let upid = client.start_vm(NODE, 330).await.unwrap();
    let err = client.wait_task(&upid).await.unwrap_err();
    match &err {
        Error::TaskFailed {
            upid: failed,
            exit_status,
            log_tail,
        } => {
            assert_eq!(failed, &upid);
            assert_eq!(exit_status, "injected start failure");
            assert_eq!(
                log_tail.last().map(String::as_str),
                Some("TASK ERROR: injected start failure")
            );
        }
        other => panic!("expected TaskFailed, got {other:?}"),
    }
}
