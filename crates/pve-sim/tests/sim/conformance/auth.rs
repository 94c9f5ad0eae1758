//! Authentication: API tokens, tickets with CSRF tokens, permissions.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::common::*;

#[tokio::test]
async fn missing_or_bad_credentials_give_empty_401s() {
    let sim = start().await;
    let none = sim.send(sim.client.get(sim.url("/version"))).await;
    assert_eq!(
        (none.status, none.reason.as_str(), none.body.as_str()),
        (401, "No ticket", "")
    );

    let bad = sim
        .send(
            sim.client
                .get(sim.url("/version"))
                .header("Authorization", "PVEAPIToken=root@pam!sim=wrong"),
        )
        .await;
    assert_eq!(
        (bad.status, bad.reason.as_str(), bad.body.as_str()),
        (401, "Authentication failed!", "")
    );

    let unknown = sim
        .send(
            sim.client
                .get(sim.url("/version"))
                .header("Authorization", "PVEAPIToken=x@pve!y=z"),
        )
        .await;
    assert_eq!(unknown.status, 401);
}

#[tokio::test]
async fn token_header_variants_are_accepted() {
    let sim = start_with(|c| c.api_tokens.push("ci@pve!prov=a=b".parse().unwrap())).await;
    let space = sim
        .send(
            sim.client
                .get(sim.url("/version"))
                .header("Authorization", "PVEAPIToken root@pam!sim=pve-sim-secret"),
        )
        .await;
    assert_eq!(space.status, 200, "a space separator works like '='");
    let escaped = sim
        .send(
            sim.client
                .get(sim.url("/version"))
                .header("Authorization", "PVEAPIToken=root%40pam!sim=pve-sim-secret"),
        )
        .await;
    assert_eq!(escaped.status, 200, "the value is URI-unescaped");
    // PVE splits the header at the last '=': a secret containing '=' never matches.
    let eq = sim
        .send(
            sim.client
                .get(sim.url("/version"))
                .header("Authorization", "PVEAPIToken=ci@pve!prov=a=b"),
        )
        .await;
    assert_eq!(
        eq.status, 401,
        "the header names token 'prov=a', which does not exist"
    );
}

async fn login(sim: &Sim, user: &str, password: &str) -> crate::common::Resp {
    sim.send(
        sim.client
            .post(sim.url("/access/ticket"))
            .form(&form(&[("username", user), ("password", password)])),
    )
    .await
}

#[tokio::test]
async fn tickets_need_csrf_for_writes_and_renew() {
    let sim = start().await;
    let failed = login(&sim, "root@pam", "nope").await;
    assert_eq!(
        (failed.status, failed.reason.as_str()),
        (401, "authentication failure")
    );
    assert_eq!(
        failed.json(),
        serde_json::json!({"data": null, "message": "authentication failure\n"})
    );

    let data = login(&sim, "root@pam", "pve-sim").await.data();
    let ticket = data["ticket"].as_str().unwrap().to_owned();
    let csrf = data["CSRFPreventionToken"].as_str().unwrap().to_owned();
    assert_eq!(data["username"], "root@pam");
    assert!(ticket.starts_with("PVE:root@pam:"), "{ticket}");
    assert_eq!(data["cap"]["vms"]["VM.Allocate"], 1);
    let cookie = format!("PVEAuthCookie={}", urlencode(&ticket));

    let get = sim
        .send(
            sim.client
                .get(sim.url("/cluster/nextid"))
                .header("Cookie", &cookie),
        )
        .await;
    assert_eq!(get.status, 200, "GET with a ticket needs no CSRF token");

    let vm = [("vmid", "150"), ("name", "t")];
    let no_csrf = sim
        .send(
            sim.client
                .post(sim.url("/nodes/pve/qemu"))
                .header("Cookie", &cookie)
                .form(&form(&vm)),
        )
        .await;
    assert_eq!(
        (
            no_csrf.status,
            no_csrf.reason.as_str(),
            no_csrf.body.as_str()
        ),
        (401, "Permission denied - invalid csrf token", "")
    );

    let with = sim
        .send(
            sim.client
                .post(sim.url("/nodes/pve/qemu"))
                .header("Cookie", &cookie)
                .header("CSRFPreventionToken", &csrf)
                .form(&form(&vm)),
        )
        .await;
    let upid = with.upid();
    assert!(
        upid.ends_with(":qmcreate:150:root@pam:"),
        "a ticket task carries the plain user: {upid}"
    );

    // The ticket also works in the Authorization header.
    let auth_hdr = sim
        .send(
            sim.client
                .get(sim.url("/version"))
                .header("Authorization", format!("PVEAuthCookie={ticket}")),
        )
        .await;
    assert_eq!(auth_hdr.status, 200);

    // Renewal: the old ticket as password gives a new ticket.
    let renewed = login(&sim, "root@pam", &ticket).await.data();
    assert!(
        renewed["ticket"]
            .as_str()
            .unwrap()
            .starts_with("PVE:root@pam:")
    );
    let realm = sim
        .send(sim.client.post(sim.url("/access/ticket")).form(&form(&[
            ("username", "root"),
            ("realm", "pam"),
            ("password", "pve-sim"),
        ])))
        .await;
    assert_eq!(realm.data()["username"], "root@pam");
}

#[tokio::test]
async fn expired_tickets_are_refused() {
    let sim = start_with(|c| c.ticket_lifetime = Duration::from_secs(1)).await;
    let ticket = login(&sim, "root@pam", "pve-sim").await.data()["ticket"]
        .as_str()
        .unwrap()
        .to_owned();
    // Lifetimes are whole seconds of wall-clock time; after 2+ s the ticket is over age.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let resp = sim
        .send(
            sim.client
                .get(sim.url("/version"))
                .header("Cookie", format!("PVEAuthCookie={ticket}")),
        )
        .await;
    assert_eq!(
        (resp.status, resp.reason.as_str()),
        (401, "Authentication failed!")
    );
}

#[tokio::test]
async fn permissions_give_403_with_path_and_privilege() {
    let sim = start_with(|c| {
        c.api_tokens.push("ci@pve!prov=s1".parse().unwrap());
        c.api_tokens.push("ci@pve!full=s2".parse().unwrap());
        c.api_tokens.push("nobody@pve!tk=s3".parse().unwrap());
        c.grants.push(
            "ci@pve:/:PVEVMAdmin,PVEDatastoreUser,PVESDNUser"
                .parse()
                .unwrap(),
        );
        c.grants
            .push("ci@pve!prov:/vms:PVEAuditor".parse().unwrap());
    })
    .await;
    let as_ = |token: &str, method: Method, path: &str| {
        sim.client
            .request(method, sim.url(path))
            .header("Authorization", format!("PVEAPIToken={token}"))
    };

    let denied = sim
        .send(as_(
            "nobody@pve!tk=s3",
            Method::GET,
            "/nodes/pve/qemu/9000/config",
        ))
        .await;
    assert_eq!(
        (denied.status, denied.reason.as_str()),
        (403, "Permission check failed (/vms/9000, VM.Audit)")
    );
    assert_eq!(
        denied.json(),
        serde_json::json!({"data": null, "message": "Permission check failed (/vms/9000, VM.Audit)\n"})
    );

    // The privilege-separated token gets user ∩ token: it can read but not create.
    let read = sim
        .send(as_(
            "ci@pve!prov=s1",
            Method::GET,
            "/nodes/pve/qemu/9000/config",
        ))
        .await;
    assert_eq!(read.status, 200);
    let create = sim
        .send(
            as_("ci@pve!prov=s1", Method::POST, "/nodes/pve/qemu").form(&form(&[("vmid", "300")])),
        )
        .await;
    assert_eq!(
        (create.status, create.reason.as_str()),
        (403, "Permission check failed"),
        "create checks inside: bare message"
    );
    let destroy = sim
        .send(as_(
            "ci@pve!prov=s1",
            Method::DELETE,
            "/nodes/pve/qemu/9000",
        ))
        .await;
    assert_eq!(
        (destroy.status, destroy.reason.as_str()),
        (403, "Permission check failed (/vms/9000, VM.Allocate)")
    );

    // A token without own ACLs acts with its user's rights, and its UPID names the token.
    let ok = sim
        .send(
            as_("ci@pve!full=s2", Method::POST, "/nodes/pve/qemu")
                .form(&form(&[("vmid", "300"), ("net0", "virtio,bridge=vmbr0")])),
        )
        .await;
    let upid = ok.upid();
    assert!(upid.ends_with(":qmcreate:300:ci@pve!full:"), "{upid}");
    let status = sim
        .send(as_(
            "ci@pve!full=s2",
            Method::GET,
            &format!("/nodes/pve/tasks/{}/status", urlencode(&upid)),
        ))
        .await
        .data();
    assert_eq!(
        (status["user"].as_str(), status["tokenid"].as_str()),
        (Some("ci@pve"), Some("full"))
    );

    // The VM list only shows VMs the caller may audit.
    let list = sim
        .send(as_("nobody@pve!tk=s3", Method::GET, "/nodes/pve/qemu"))
        .await
        .data();
    assert_eq!(list, Value::Array(vec![]));

    // skiplock is for root@pam only.
    let skip = sim
        .send(
            as_(
                "ci@pve!full=s2",
                Method::POST,
                "/nodes/pve/qemu/9000/status/start",
            )
            .form(&form(&[("skiplock", "1")])),
        )
        .await;
    assert_eq!(skip.errors()["skiplock"], "Only root may use this option.");
}

#[tokio::test]
async fn absolute_import_paths_are_root_at_pam_only() {
    let sim = start().await;
    let disk =
        "local-lvm:0,import-from=/var/lib/vz/import/ubuntu-24.04-server-cloudimg-amd64.qcow2";
    // root@pam's API token is not "root@pam".
    let token = sim
        .post("/nodes/pve/qemu", &[("vmid", "120"), ("scsi0", disk)])
        .await;
    assert_eq!(token.status, 500);
    assert!(
        token
            .reason
            .starts_with("Only root can pass arbitrary filesystem paths."),
        "{}",
        token.reason
    );

    let data = login(&sim, "root@pam", "pve-sim").await.data();
    let cookie = format!(
        "PVEAuthCookie={}",
        urlencode(data["ticket"].as_str().unwrap())
    );
    let resp = sim
        .send(
            sim.client
                .post(sim.url("/nodes/pve/qemu"))
                .header("Cookie", cookie)
                .header(
                    "CSRFPreventionToken",
                    data["CSRFPreventionToken"].as_str().unwrap(),
                )
                .form(&form(&[("vmid", "120"), ("scsi0", disk)])),
        )
        .await;
    let upid = resp.upid();
    sim.task_ok(&upid).await;
    assert_eq!(
        sim.config("120").await["scsi0"],
        "local-lvm:vm-120-disk-0,size=3584M"
    );
    let _ = sim.control(Method::GET, "/stats", None).await;
}
