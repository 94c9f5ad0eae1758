//! `POST .../storage/{storage}/upload` with a multipart body, as the GUI,
//! proxmoxer and go-proxmox send it: the file appears in the storage's
//! content once the `imgcopy` task verified its checksum.

use sha2::Digest;

use crate::common::Sim;
use crate::common::start;

const BOUNDARY: &str = "----pvesimtestboundary";

fn multipart(fields: &[(&str, &str)], file: (&str, &[u8])) -> Vec<u8> {
    let mut body = Vec::new();
    for (k, v) in fields {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"{}\"\r\nContent-Type: application/octet-stream\r\n\r\n",
            file.0
        )
        .as_bytes(),
    );
    body.extend_from_slice(file.1);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

async fn upload(sim: &Sim, storage: &str, body: Vec<u8>) -> crate::common::Resp {
    sim.send(
        sim.req(
            reqwest::Method::POST,
            &format!("/nodes/pve/storage/{storage}/upload"),
        )
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body),
    )
    .await
}

#[tokio::test]
async fn uploaded_isos_appear_in_storage_content() {
    let sim = start().await;
    // Larger than a read buffer, with bytes that look like a boundary start.
    let data: Vec<u8> = (0..300_000u32)
        .map(|i| (i % 251) as u8)
        .chain(*b"\r\n--")
        .collect();
    let sha = format!("{:x}", sha2::Sha256::digest(&data));
    let body = multipart(
        &[
            ("content", "iso"),
            ("checksum-algorithm", "sha256"),
            ("checksum", &sha),
        ],
        ("cloud-init seed.iso", &data),
    );
    let upid = upload(&sim, "local", body).await.upid();
    assert!(upid.contains(":imgcopy::"), "{upid}");
    sim.task_ok(&upid).await;
    let log = sim.task_log(&upid).await;
    assert!(
        log.contains(&"calculating checksum...OK, checksum verified".to_owned()),
        "{log:?}"
    );
    assert!(
        log.contains(&format!("file size is: {}", data.len())),
        "{log:?}"
    );
    let content = sim
        .get_q("/nodes/pve/storage/local/content", &[("content", "iso")])
        .await
        .data();
    assert_eq!(content[0]["volid"], "local:iso/cloud-init_seed.iso");
    assert_eq!(content[0]["size"], data.len());

    let bad = multipart(
        &[
            ("content", "iso"),
            ("checksum-algorithm", "md5"),
            ("checksum", "00"),
        ],
        ("x.iso", b"abc"),
    );
    let upid = upload(&sim, "local", bad).await.upid();
    let status = sim.wait_task(&upid).await;
    assert_eq!(
        status["exitstatus"],
        "checksum mismatch: got '900150983cd24fb0d6963f7d28e17f72' != expect '00'"
    );

    let wrong_ext = upload(
        &sim,
        "local",
        multipart(&[("content", "iso")], ("x.txt", b"abc")),
    )
    .await;
    assert_eq!(wrong_ext.errors()["filename"], "wrong file extension");
    let block = upload(
        &sim,
        "local-lvm",
        multipart(&[("content", "iso")], ("x.iso", b"abc")),
    )
    .await;
    assert_eq!(block.status, 500);
    let truncated = upload(&sim, "local", b"--nope\r\n".to_vec()).await;
    assert_eq!(truncated.status, 400);
}

/// A running VM swaps a CD-ROM's medium at once (qemu-server changes the
/// medium live); a new CD-ROM drive on an IDE slot waits for the next start.
#[tokio::test]
async fn a_running_vm_swaps_a_cdrom_medium_at_once() {
    let sim = start().await;
    for name in ["a.iso", "b.iso"] {
        let body = multipart(&[("content", "iso")], (name, b"seed"));
        let upid = upload(&sim, "local", body).await.upid();
        sim.task_ok(&upid).await;
    }
    sim.create_plain("103", &[("ide2", "local:iso/a.iso,media=cdrom")])
        .await;
    sim.power("103", "start").await;
    sim.post_ok(
        "/nodes/pve/qemu/103/config",
        &[
            ("ide2", "local:iso/b.iso,media=cdrom"),
            ("ide3", "local:iso/a.iso,media=cdrom"),
        ],
    )
    .await;
    let current = sim
        .get_q("/nodes/pve/qemu/103/config", &[("current", "1")])
        .await
        .data();
    let ide2 = current["ide2"].as_str().unwrap();
    assert!(ide2.starts_with("local:iso/b.iso,media=cdrom"), "{ide2}");
    assert!(current.get("ide3").is_none(), "{current}");
    let pending = sim.config("103").await;
    let ide3 = pending["ide3"].as_str().unwrap();
    assert!(ide3.starts_with("local:iso/a.iso,media=cdrom"), "{ide3}");
}
