//! `--state` fixtures and `GET /_sim/state`: a declared cluster starts as
//! written, and its export starts an identical simulator (round trip).

use pve_sim::state::file::StateFile;
use reqwest::Method;

use crate::common::start_with;

const FIXTURE: &str = r#"
nodes:
  - name: pve
    memory: 32G
    cpus: 8
  - name: pve2
    memory: 16G
storages:
  - id: local
    type: dir
    path: /var/lib/vz
    content: [iso, vztmpl, import, snippets]
    size: 100G
  - id: local-lvm
    type: lvmthin
    vg: pve
    content: [images, rootdir]
    size: 200G
  - id: nfs
    type: dir
    path: /mnt/pve/nfs
    content: [images, iso]
    size: 1T
    shared: true
volumes:
  - volid: local:iso/seed.iso
    size: 368K
guests:
  - vmid: 9000
    config: {name: tpl, template: 1, memory: 2048, scsi0: "local-lvm:base-9000-disk-0,size=4G"}
  - vmid: 100
    node: pve2
    running: true
    pool: web
    config: {name: web-1, memory: 4096, cores: 2, scsi0: "local-lvm:vm-100-disk-0,size=8G", net0: "virtio=BC:24:11:00:00:01,bridge=vmbr0"}
pools:
  - id: web
    comment: web tier
options:
  next-id: lower=1000
users:
  - user: ci@pve
    password: letmein1
tokens:
  - id: ci@pve!prov
    secret: s3cret
acl:
  - subject: ci@pve
    path: /vms
    roles: [PVEVMAdmin]
"#;

#[tokio::test]
async fn state_file_starts_the_declared_cluster_and_round_trips() {
    let state = StateFile::parse(FIXTURE).unwrap();
    let sim = start_with(|c| c.state = Some(state)).await;
    let nodes = sim
        .get_q("/cluster/resources", &[("type", "node")])
        .await
        .data();
    let pve2 = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "pve2")
        .unwrap();
    assert_eq!(pve2["maxmem"], 16u64 << 30);
    let status = sim.get("/nodes/pve2/qemu/100/status/current").await.data();
    assert_eq!(status["status"], "running");
    assert_eq!(sim.get("/cluster/nextid").await.data(), "1000");
    let iso = sim
        .get_q("/nodes/pve/storage/local/content", &[("content", "iso")])
        .await
        .data();
    assert_eq!(iso[0]["volid"], "local:iso/seed.iso");
    let disks = sim
        .get_q("/nodes/pve2/storage/local-lvm/content", &[("vmid", "100")])
        .await
        .data();
    assert_eq!(disks[0]["size"], 8u64 << 30);
    assert_eq!(
        sim.get("/pools/web").await.data()["members"][0]["vmid"],
        100
    );
    // The token from the file works, with its ACL.
    let ci = |path: &str| {
        sim.client
            .get(sim.url(path))
            .header("Authorization", "PVEAPIToken=ci@pve!prov=s3cret")
    };
    assert_eq!(
        sim.send(ci("/nodes/pve2/qemu/100/config")).await.status,
        200
    );
    assert_eq!(
        sim.send(ci("/nodes/pve/storage")).await.data(),
        serde_json::json!([])
    );

    // A disk moves to the shared storage.
    sim.post_ok(
        "/nodes/pve2/qemu/100/move_disk",
        &[("disk", "scsi0"), ("storage", "nfs"), ("delete", "1")],
    )
    .await;
    let c = sim.get("/nodes/pve2/qemu/100/config").await.data();
    assert!(
        c["scsi0"]
            .as_str()
            .unwrap()
            .starts_with("nfs:100/vm-100-disk-0.qcow2"),
        "{c}"
    );
    let shared = sim
        .get_q("/nodes/pve/storage/nfs/content", &[("vmid", "100")])
        .await;
    assert_eq!(shared.status, 200);

    let exported = sim.control(Method::GET, "/state?secrets=1", None).await;
    let file: StateFile = serde_json::from_value(exported.clone()).unwrap();
    let again = start_with(|c| c.state = Some(file)).await;
    let re_exported = again.control(Method::GET, "/state?secrets=1", None).await;
    assert_eq!(exported, re_exported);
    // Without `secrets=1` no password or token secret leaves the simulator.
    let public = sim.control(Method::GET, "/state", None).await;
    assert!(!public.to_string().contains("s3cret") && !public.to_string().contains("letmein1"));
    let yaml = sim
        .send(
            sim.client
                .get(sim.control_url("/state?format=yaml&secrets=1")),
        )
        .await;
    let from_yaml = StateFile::parse(&yaml.body).unwrap();
    assert_eq!(serde_json::to_value(&from_yaml).unwrap(), exported);
}
