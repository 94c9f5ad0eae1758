//! Config reads and updates: PUT (sync) vs POST (task), digest, delete,
//! pending changes on a running VM, masking.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn put_is_sync_post_is_a_task() {
    let sim = start().await;
    sim.create_plain("100", &[("cores", "1")]).await;
    let put = sim
        .put(
            "/nodes/pve/qemu/100/config",
            &[("cores", "2"), ("description", "line one\nline two")],
        )
        .await;
    assert_eq!(put.json(), json!({"data": null}));
    let config = sim.config("100").await;
    assert_eq!(config["cores"], 2);
    assert_eq!(config["description"], "line one\nline two");

    let upid = sim
        .post(
            "/nodes/pve/qemu/100/config",
            &[("cores", "4"), ("cipassword", "hunter2")],
        )
        .await
        .upid();
    assert!(upid.contains(":qmconfig:100:"));
    sim.task_ok(&upid).await;
    let log = sim.task_log(&upid).await;
    assert_eq!(log[0], "update VM 100: -cipassword <hidden> -cores 4");
    let config = sim.config("100").await;
    assert_eq!(config["cores"], 4);
    assert_eq!(config["cipassword"], "**********");

    let quick = sim
        .post(
            "/nodes/pve/qemu/100/config",
            &[("cores", "3"), ("background_delay", "30")],
        )
        .await;
    assert_eq!(
        quick.json(),
        json!({"data": null}),
        "background_delay returns null when the task ends in time"
    );
    assert_eq!(sim.config("100").await["cores"], 3);
}

#[tokio::test]
async fn digest_guards_concurrent_changes() {
    let sim = start().await;
    sim.create_plain("101", &[]).await;
    let digest = sim.config("101").await["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        sim.put(
            "/nodes/pve/qemu/101/config",
            &[("name", "a"), ("digest", &digest)]
        )
        .await
        .status,
        200
    );
    let stale = sim
        .put(
            "/nodes/pve/qemu/101/config",
            &[("name", "b"), ("digest", &digest)],
        )
        .await;
    assert_eq!(
        (stale.status, stale.reason.as_str()),
        (500, "checksum mismatch (file change by other user?)")
    );
    assert_ne!(sim.config("101").await["digest"], digest.as_str());
}

#[tokio::test]
async fn delete_and_its_rules() {
    let sim = start().await;
    sim.create_plain(
        "102",
        &[
            ("scsi0", "local-lvm:2"),
            ("ide2", "local-lvm:cloudinit"),
            ("ciuser", "u"),
        ],
    )
    .await;
    let none = sim.put("/nodes/pve/qemu/102/config", &[]).await;
    assert_eq!(
        (none.status, none.reason.as_str()),
        (500, "no options specified")
    );
    let both = sim
        .put(
            "/nodes/pve/qemu/102/config",
            &[("ciuser", "x"), ("delete", "ciuser")],
        )
        .await;
    assert_eq!(
        both.errors()["delete"],
        "you can't use '-ciuser' and -delete ciuser' at the same time"
    );
    let unknown = sim
        .put("/nodes/pve/qemu/102/config", &[("delete", "nosuchthing")])
        .await;
    assert_eq!(unknown.errors()["delete"], "unknown option 'nosuchthing'");

    assert_eq!(
        sim.put(
            "/nodes/pve/qemu/102/config",
            &[("delete", "scsi0,ide2,ciuser")]
        )
        .await
        .status,
        200
    );
    let config = sim.config("102").await;
    assert!(
        config.get("scsi0").is_none()
            && config.get("ide2").is_none()
            && config.get("ciuser").is_none()
    );
    assert_eq!(
        config["unused0"], "local-lvm:vm-102-disk-0",
        "a detached disk becomes unused"
    );
    assert_eq!(
        config["boot"], "order=net0",
        "deleted devices leave the boot order"
    );
    let content = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "102")])
        .await
        .data();
    assert_eq!(
        content.as_array().unwrap().len(),
        1,
        "the cloud-init volume is destroyed, the disk kept"
    );

    let upid = sim
        .post_ok("/nodes/pve/qemu/102/config", &[("delete", "unused0,tags")])
        .await;
    assert!(
        sim.task_log(&upid)
            .await
            .contains(&"cannot delete 'tags' - not set in current configuration!".to_owned())
    );
    let content = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "102")])
        .await
        .data();
    assert_eq!(content, json!([]), "deleting unusedN frees the volume");
}

#[tokio::test]
async fn running_vm_keeps_changes_pending() {
    let sim = start().await;
    sim.create_plain("103", &[("memory", "1024"), ("cores", "1")])
        .await;
    sim.power("103", "start").await;

    sim.post_ok(
        "/nodes/pve/qemu/103/config",
        &[
            ("memory", "2048"),
            ("cores", "2"),
            ("name", "renamed"),
            ("cipassword", "pw"),
        ],
    )
    .await;
    let current = sim
        .get_q("/nodes/pve/qemu/103/config", &[("current", "1")])
        .await
        .data();
    assert_eq!(
        (current["memory"].as_str(), current["cores"].as_i64()),
        (Some("1024"), Some(1))
    );
    assert_eq!(
        current["name"], "renamed",
        "fast-plug options apply at once"
    );
    let with_pending = sim.config("103").await;
    assert_eq!(
        (
            with_pending["memory"].as_str(),
            with_pending["cores"].as_i64()
        ),
        (Some("2048"), Some(2))
    );

    assert_eq!(
        item_of(&sim, "103", "memory").await,
        json!({"key": "memory", "value": "1024", "pending": "2048"})
    );
    assert_eq!(
        item_of(&sim, "103", "cores").await,
        json!({"key": "cores", "value": 1, "pending": 2})
    );
    assert_eq!(
        item_of(&sim, "103", "cipassword").await,
        json!({"key": "cipassword", "value": "**********"}),
        "cipassword is written directly"
    );
    // The digest is listed like any other key, equal to the config's.
    assert_eq!(
        item_of(&sim, "103", "digest").await["value"],
        sim.config("103").await["digest"]
    );

    // A delete of a non-hotpluggable option is pending too.
    sim.post_ok("/nodes/pve/qemu/103/config", &[("delete", "cores")])
        .await;
    assert_eq!(item_of(&sim, "103", "cores").await["delete"], 1);

    // Revert drops a pending change.
    assert_eq!(
        sim.put("/nodes/pve/qemu/103/config", &[("revert", "memory")])
            .await
            .status,
        200
    );
    assert!(
        item_of(&sim, "103", "memory")
            .await
            .get("pending")
            .is_none()
    );

    // Pending changes apply at the next start.
    sim.power("103", "stop").await;
    sim.power("103", "start").await;
    let config = sim
        .get_q("/nodes/pve/qemu/103/config", &[("current", "1")])
        .await
        .data();
    assert!(config.get("cores").is_none());
    assert_eq!(config["memory"], "1024");
}

/// The `GET .../pending` entry of `key` (`{}` when there is none).
pub async fn item_of(sim: &Sim, vmid: &str, key: &str) -> serde_json::Value {
    let pending = sim
        .get(&format!("/nodes/pve/qemu/{vmid}/pending"))
        .await
        .data();
    pending
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["key"] == key)
        .cloned()
        .unwrap_or(json!({}))
}

#[tokio::test]
async fn nic_without_mac_gets_a_new_one() {
    let sim = start().await;
    sim.create_plain("104", &[]).await;
    let before = sim.config("104").await["net0"].as_str().unwrap().to_owned();
    let mac = before.split(['=', ',']).nth(1).unwrap().to_owned();
    assert_eq!(
        sim.put(
            "/nodes/pve/qemu/104/config",
            &[("net0", &format!("virtio={mac},bridge=vmbr0,firewall=1"))]
        )
        .await
        .status,
        200
    );
    assert_eq!(
        sim.config("104").await["net0"],
        format!("virtio={mac},bridge=vmbr0,firewall=1")
    );
    assert_eq!(
        sim.put(
            "/nodes/pve/qemu/104/config",
            &[("net0", "virtio,bridge=vmbr0")]
        )
        .await
        .status,
        200
    );
    let after = sim.config("104").await["net0"].as_str().unwrap().to_owned();
    assert_ne!(
        after.split(['=', ',']).nth(1).unwrap(),
        mac,
        "PVE's parse_net assigns a fresh MAC"
    );
}

#[tokio::test]
async fn slow_sync_import_times_out_at_the_proxy_but_completes() {
    // 3.5 GiB at 60 MiB/s is about 60 simulated seconds: longer than pveproxy's 30 s.
    let sim = start_with(|c| c.durations.import_bytes_per_sec = 60 << 20).await;
    sim.create_plain("105", &[]).await;
    let disk = format!("local-lvm:0,import-from={UBUNTU}");
    let resp = sim
        .put("/nodes/pve/qemu/105/config", &[("scsi1", &disk)])
        .await;
    assert_eq!(
        (resp.status, resp.reason.as_str(), resp.body.as_str()),
        (596, "Connection timed out", "")
    );
    let scsi1 = sim
        .eventually("the import to finish after the proxy gave up", || async {
            sim.config("105")
                .await
                .get("scsi1")
                .and_then(|v| v.as_str().map(str::to_owned))
        })
        .await;
    assert_eq!(scsi1, "local-lvm:vm-105-disk-0,size=3584M");
    let fast = sim
        .put("/nodes/pve/qemu/105/config", &[("scsi2", "local-lvm:1")])
        .await;
    assert_eq!(
        fast.json(),
        json!({"data": null}),
        "short work answers normally"
    );
}
