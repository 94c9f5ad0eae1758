//! download-url: an async `download` task that never touches the network.

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::common::*;

const URL: &str = "https://cloud-images.example/noble/noble-server-cloudimg-amd64.img";

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Downloads `url` into `local:import/<file>` with its checksum and waits
/// for the task to succeed.
async fn downloaded(sim: &Sim, url: &str, file: &str, (sum, algorithm): (&str, &str)) {
    let upid = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", url),
                ("content", "import"),
                ("filename", file),
                ("checksum", sum),
                ("checksum-algorithm", algorithm),
            ],
        )
        .await
        .upid();
    sim.task_ok(&upid).await;
}

/// `POST /nodes/pve/qemu` of VM `vmid` importing `volume` as scsi0.
async fn import(sim: &Sim, vmid: &str, volume: &str) -> Resp {
    let scsi0 = format!("local-lvm:0,import-from={volume}");
    sim.post(
        "/nodes/pve/qemu",
        &[("vmid", vmid), ("scsi0", scsi0.as_str())],
    )
    .await
}

#[tokio::test]
async fn download_import_image_with_checksum_then_import_it() {
    let sim = start().await;
    let sum = sha256_hex(URL);
    let params = [
        ("url", URL),
        ("content", "import"),
        ("filename", "noble.qcow2"),
        ("checksum", sum.as_str()),
        ("checksum-algorithm", "sha256"),
    ];
    let upid = sim
        .post("/nodes/pve/storage/local/download-url", &params)
        .await
        .upid();
    assert!(
        upid.contains(":download:noble.qcow2:root@pam!sim:"),
        "{upid}"
    );
    sim.task_ok(&upid).await;
    let log = sim.task_log(&upid).await;
    assert_eq!(
        log[0],
        format!("downloading {URL} to /var/lib/vz/import/noble.qcow2")
    );
    assert!(
        log.contains(&"calculating checksum...OK, checksum verified".to_owned()),
        "{log:?}"
    );
    assert!(log.contains(&format!(
        "download of '{URL}' to '/var/lib/vz/import/noble.qcow2' finished"
    )));

    let content = sim
        .get_q("/nodes/pve/storage/local/content", &[("content", "import")])
        .await
        .data();
    let vol = content
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["volid"] == "local:import/noble.qcow2")
        .cloned()
        .unwrap();
    assert_eq!(
        (vol["format"].as_str(), vol["size"].as_u64()),
        (Some("qcow2"), Some(600 << 20))
    );

    // Same name again: refused without a checksum, accepted when it matches.
    let again = sim
        .post("/nodes/pve/storage/local/download-url", &params[..3])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&again).await["exitstatus"],
        "refusing to override existing file '/var/lib/vz/import/noble.qcow2'"
    );
    let same = sim
        .post("/nodes/pve/storage/local/download-url", &params)
        .await
        .upid();
    sim.task_ok(&same).await;
    assert!(sim.task_log(&same).await.contains(&"calculating checksum of existing file...OK, got correct file already, no need to download".to_owned()));

    let vm = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "150"),
                ("scsi0", "local-lvm:0,import-from=local:import/noble.qcow2"),
            ],
        )
        .await
        .upid();
    sim.task_ok(&vm).await;
    assert_eq!(
        sim.config("150").await["scsi0"],
        "local-lvm:vm-150-disk-0,size=3584M"
    );
}

#[tokio::test]
async fn checksum_mismatch_and_failing_urls() {
    let sim = start().await;
    let wrong = ["0"; 64].concat();
    let bad = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", URL),
                ("content", "iso"),
                ("filename", "x.iso"),
                ("checksum", &wrong),
                ("checksum-algorithm", "sha256"),
            ],
        )
        .await
        .upid();
    let exit = sim.wait_task(&bad).await["exitstatus"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        exit,
        format!(
            "checksum mismatch: got '{}' != expect '{wrong}'",
            sha256_hex(URL)
        )
    );

    let unresolvable = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", "https://mirror.invalid/x.qcow2"),
                ("content", "import"),
                ("filename", "x.qcow2"),
            ],
        )
        .await
        .upid();
    let status = sim.wait_task(&unresolvable).await;
    assert!(
        status["exitstatus"]
            .as_str()
            .unwrap()
            .starts_with("download failed:"),
        "{status}"
    );

    sim.control(
        reqwest::Method::POST,
        "/urls",
        Some(json!({"url": "https://images.example/gone.qcow2", "error": "ERROR 404: Not Found."})),
    )
    .await;
    let gone = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", "https://images.example/gone.qcow2"),
                ("content", "import"),
                ("filename", "gone.qcow2"),
            ],
        )
        .await
        .upid();
    assert!(
        sim.wait_task(&gone).await["exitstatus"]
            .as_str()
            .unwrap()
            .starts_with("download failed:")
    );
    assert!(
        sim.task_log(&gone)
            .await
            .contains(&"wget: ERROR 404: Not Found.".to_owned())
    );

    sim.control(
        reqwest::Method::POST,
        "/urls",
        Some(json!({"url": "https://images.example/known.qcow2", "size": 1048576, "virtual_size": 2147483648u64, "checksums": {"md5": "ABCDEF"}})),
    )
    .await;
    downloaded(
        &sim,
        "https://images.example/known.qcow2",
        "known.qcow2",
        ("abcdef", "md5"),
    )
    .await;
    let vm = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "151"),
                ("scsi0", "local-lvm:0,import-from=local:import/known.qcow2"),
            ],
        )
        .await
        .upid();
    sim.task_ok(&vm).await;
    assert_eq!(
        sim.config("151").await["scsi0"],
        "local-lvm:vm-151-disk-0,size=2G"
    );
}

#[tokio::test]
async fn download_parameter_rules() {
    let sim = start().await;
    let img = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", URL),
                ("content", "import"),
                ("filename", "noble.img"),
            ],
        )
        .await;
    assert_eq!(
        img.errors(),
        json!({"filename": "invalid filename or wrong extension"})
    );
    let iso = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", URL),
                ("content", "iso"),
                ("filename", "noble.qcow2"),
            ],
        )
        .await;
    assert_eq!(iso.errors(), json!({"filename": "wrong file extension"}));
    let lvm = sim
        .post(
            "/nodes/pve/storage/local-lvm/download-url",
            &[("url", URL), ("content", "iso"), ("filename", "a.iso")],
        )
        .await;
    assert_eq!(
        (lvm.status, lvm.reason.as_str()),
        (
            500,
            "can't upload to storage type 'lvmthin', not a file based storage!"
        )
    );
    let ftp = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", "ftp://x/a.iso"),
                ("content", "iso"),
                ("filename", "a.iso"),
            ],
        )
        .await;
    assert_eq!(
        ftp.errors()["url"],
        "value does not match the regex pattern"
    );
    let half = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", URL),
                ("content", "iso"),
                ("filename", "a.iso"),
                ("checksum", "ab"),
            ],
        )
        .await;
    assert_eq!(
        half.errors()["checksum-algorithm"],
        "missing property - 'checksum' requires this property"
    );
    let normalized = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", URL),
                ("content", "iso"),
                ("filename", "../my image.iso"),
            ],
        )
        .await
        .upid();
    sim.task_ok(&normalized).await;
    let isos = sim
        .get_q("/nodes/pve/storage/local/content", &[("content", "iso")])
        .await
        .data();
    assert_eq!(isos[0]["volid"], "local:iso/my_image.iso");
}

/// The parameter errors of a container template download, `Null` when it
/// was accepted (a task started).
async fn vztmpl(sim: &Sim, filename: &str) -> serde_json::Value {
    let url = "https://images.example/rootfs";
    let resp = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[("url", url), ("content", "vztmpl"), ("filename", filename)],
        )
        .await;
    match resp.status {
        200 => serde_json::Value::Null,
        _ => resp.errors(),
    }
}

/// pve-storage's `$VZTMPL_EXT_RE_1`: compressed tarballs in any case, and
/// a plain `.tar` since 9.0.15 (PVE 9), not on PVE 8.
#[tokio::test]
async fn container_template_file_names_follow_pve_storage() {
    let nine = start().await;
    for ok in [
        "rootfs.tar.zst",
        "rootfs.TAR.XZ",
        "rootfs.tar.bz2",
        "rootfs.tar",
    ] {
        assert_eq!(vztmpl(&nine, ok).await, serde_json::Value::Null, "{ok}");
    }
    for bad in ["rootfs.tgz", "rootfs.tar.lz4", "rootfs.qcow2"] {
        assert_eq!(
            vztmpl(&nine, bad).await,
            json!({"filename": "wrong file extension"}),
            "{bad}"
        );
    }
    let eight = start_with(|c| c.pve_version = 8).await;
    assert_eq!(
        vztmpl(&eight, "rootfs.tar").await,
        json!({"filename": "wrong file extension"})
    );
    assert_eq!(
        vztmpl(&eight, "rootfs.tar.gz").await,
        serde_json::Value::Null
    );
}

/// Deleting a downloaded file (`imgdel`) while a create imports it: PVE
/// unlinks the file and the running `qemu-img convert` keeps reading what
/// it opened, so the import finishes; the next import from it fails.
#[tokio::test]
async fn a_running_import_survives_the_deletion_of_its_source() {
    let sim = start().await;
    let sum = sha256_hex(URL);
    downloaded(&sim, URL, "noble.qcow2", (&sum, "sha256")).await;
    // The import is held at its first step, its source open, until the
    // delete is over.
    sim.hold_at_first_wait("import", "qmcreate").await;
    let create = import(&sim, "150", "local:import/noble.qcow2").await.upid();
    sim.log_line(&create, "transferred ").await;
    let delete = sim
        .delete(
            &format!(
                "/nodes/pve/storage/local/content/{}",
                urlencode("local:import/noble.qcow2")
            ),
            &[],
        )
        .await
        .upid();
    sim.task_ok(&delete).await;
    let status = sim
        .get(&format!("/nodes/pve/tasks/{}/status", urlencode(&create)))
        .await
        .data();
    assert_eq!(
        status["status"], "running",
        "the delete ended while the import ran: {status}"
    );
    sim.release("import").await;
    sim.task_ok(&create).await;
    assert_eq!(
        sim.config("150").await["scsi0"],
        "local-lvm:vm-150-disk-0,size=3584M"
    );
    let again = import(&sim, "151", "local:import/noble.qcow2").await;
    let refused = match again.status {
        200 => sim.wait_task(&again.upid()).await["exitstatus"].to_string(),
        _ => again.reason.clone(),
    };
    assert!(refused.contains("noble.qcow2"), "{refused}");
}

/// A shared storage (NFS, CephFS) is one storage: a file downloaded
/// through one node is listed and imported on every node.
#[tokio::test]
async fn a_file_downloaded_to_a_shared_storage_is_on_every_node() {
    let state = pve_sim::state::file::StateFile::parse(
        "nodes: [{name: pve}, {name: pve2}]
storages:
  - {id: local, type: dir, content: [iso, vztmpl, import, snippets], size: 100G}
  - {id: local-lvm, type: lvmthin, content: [images, rootdir], size: 400G}
  - {id: nfs, type: dir, path: /mnt/pve/nfs, content: [import], size: 1T, shared: true}
",
    )
    .unwrap();
    let sim = start_with(|c| c.state = Some(state)).await;
    let sum = sha256_hex(URL);
    let upid = sim
        .post(
            "/nodes/pve/storage/nfs/download-url",
            &[
                ("url", URL),
                ("content", "import"),
                ("filename", "noble.qcow2"),
                ("checksum", sum.as_str()),
                ("checksum-algorithm", "sha256"),
            ],
        )
        .await
        .upid();
    sim.task_ok(&upid).await;
    let listed = sim
        .get_q("/nodes/pve2/storage/nfs/content", &[("content", "import")])
        .await
        .data();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["volid"] == "nfs:import/noble.qcow2"),
        "{listed}"
    );
    let scsi0 = "local-lvm:0,import-from=nfs:import/noble.qcow2";
    let create = sim
        .post("/nodes/pve2/qemu", &[("vmid", "150"), ("scsi0", scsi0)])
        .await
        .upid();
    sim.task_ok(&create).await;
}

/// The storage's `avail` (`GET /nodes/pve/storage/local/status`).
async fn avail(sim: &Sim) -> u64 {
    sim.get("/nodes/pve/storage/local/status").await.data()["avail"]
        .as_u64()
        .unwrap()
}

#[tokio::test]
async fn url_metadata_tells_the_size_a_download_then_takes() {
    let sim = start().await;
    let known = "https://images.example/known.qcow2?x=1";
    sim.control(
        reqwest::Method::POST,
        "/urls",
        Some(json!({"url": known, "size": 1048576})),
    )
    .await;
    let meta = sim
        .get_q("/nodes/pve/query-url-metadata", &[("url", known)])
        .await
        .data();
    assert_eq!(
        meta,
        json!({"filename": "known.qcow2", "size": 1048576, "mimetype": "application/octet-stream"})
    );
    // No Content-Length: no size (the download still writes the file).
    let chunked = "https://images.example/chunked.qcow2";
    sim.control(
        reqwest::Method::POST,
        "/urls",
        Some(json!({"url": chunked, "size": 2048, "no_length": true})),
    )
    .await;
    let meta = sim
        .get_q("/nodes/pve/query-url-metadata", &[("url", chunked)])
        .await
        .data();
    assert!(meta.get("size").is_none(), "{meta}");
    // An unregistered URL: the rule's size.
    let meta = sim
        .get_q("/nodes/pve/query-url-metadata", &[("url", URL)])
        .await
        .data();
    assert_eq!(meta["size"], 600u64 << 20);
    // A host that does not resolve: PVE's error, no data.
    let bad = sim
        .get_q(
            "/nodes/pve/query-url-metadata",
            &[("url", "https://mirror.invalid/x.qcow2")],
        )
        .await;
    assert_eq!(bad.status, 500, "{}", bad.body);

    // What a download writes is what `avail` loses.
    let before = avail(&sim).await;
    let upid = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", known),
                ("content", "import"),
                ("filename", "known.qcow2"),
            ],
        )
        .await
        .upid();
    sim.task_ok(&upid).await;
    assert_eq!(avail(&sim).await, before - 1048576);
}

#[tokio::test]
async fn a_download_larger_than_the_free_space_fails_as_wget_does() {
    let sim = start().await;
    let free = avail(&sim).await;
    let huge = "https://images.example/huge.qcow2";
    sim.control(
        reqwest::Method::POST,
        "/urls",
        Some(json!({"url": huge, "size": free + 1})),
    )
    .await;
    let upid = sim
        .post(
            "/nodes/pve/storage/local/download-url",
            &[
                ("url", huge),
                ("content", "import"),
                ("filename", "huge.qcow2"),
            ],
        )
        .await
        .upid();
    let status = sim.wait_task(&upid).await;
    assert!(
        status["exitstatus"]
            .as_str()
            .unwrap()
            .starts_with("download failed:"),
        "{status}"
    );
    assert!(
        sim.task_log(&upid)
            .await
            .iter()
            .any(|l| l.contains("No space left on device")),
    );
    assert_eq!(avail(&sim).await, free);
}
