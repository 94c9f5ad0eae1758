//! Containers: list, create from a template under `lock: create`, config,
//! status, power and destroy, sharing the VMID space with VMs.

use serde_json::json;

use crate::common::start;

const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

#[tokio::test]
async fn container_lifecycle() {
    let sim = start().await;
    assert_eq!(sim.get("/nodes/pve/lxc").await.data(), json!([]));
    let upid = sim
        .post(
            "/nodes/pve/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("hostname", "ct1"),
                ("storage", "local-lvm"),
                ("rootfs", "local-lvm:8"),
                ("net0", "name=eth0,bridge=vmbr0,ip=dhcp"),
                ("password", "secret123"),
                ("unprivileged", "1"),
                ("features", "nesting=1"),
                ("cores", "2"),
            ],
        )
        .await
        .upid();
    assert!(upid.contains(":vzcreate:200:"), "{upid}");
    let locked = sim.get("/nodes/pve/lxc/200/config").await.data();
    assert_eq!(locked["lock"], "create");
    sim.task_ok(&upid).await;
    let c = sim.get("/nodes/pve/lxc/200/config").await.data();
    assert_eq!(c["hostname"], "ct1");
    assert_eq!(c["rootfs"], "local-lvm:vm-200-disk-0,size=8G");
    assert_eq!(c["memory"], 512);
    assert_eq!(c["ostype"], "debian");
    assert_eq!(c["unprivileged"], 1);
    assert!(
        c["net0"].as_str().unwrap().contains("hwaddr=BC:24:11:"),
        "{c}"
    );
    assert!(c.get("password").is_none());
    // The VMID is taken for VMs too; the qemu API does not see the container.
    let clash = sim.post("/nodes/pve/qemu", &[("vmid", "200")]).await;
    assert_eq!(clash.status, 500);
    let as_vm = sim.get("/nodes/pve/qemu/200/config").await;
    assert_eq!(
        as_vm.reason,
        "Configuration file 'nodes/pve/qemu-server/200.conf' does not exist"
    );
    let missing = sim.get("/nodes/pve/lxc/201/config").await;
    assert_eq!(
        missing.reason,
        "Configuration file 'nodes/pve/lxc/201.conf' does not exist"
    );

    sim.put(
        "/nodes/pve/lxc/200/config",
        &[("memory", "1024"), ("delete", "features")],
    )
    .await
    .data();
    let c = sim.get("/nodes/pve/lxc/200/config").await.data();
    assert_eq!(c["memory"], 1024);
    assert!(c.get("features").is_none());

    sim.post_ok("/nodes/pve/lxc/200/status/start", &[]).await;
    let status = sim.get("/nodes/pve/lxc/200/status/current").await.data();
    assert_eq!(status["status"], "running");
    assert_eq!(status["type"], "lxc");
    assert_eq!(status["maxmem"], 1024u64 << 20);
    let list = sim.get("/nodes/pve/lxc").await.data();
    assert_eq!(list[0]["vmid"], 200);
    let ifaces = sim.get("/nodes/pve/lxc/200/interfaces").await.data();
    assert_eq!(ifaces[1]["name"], "eth0");
    let res = sim
        .get_q("/cluster/resources", &[("type", "vm")])
        .await
        .data();
    assert!(
        res.as_array().unwrap().iter().any(|r| r["id"] == "lxc/200"),
        "{res}"
    );

    let running = sim.delete("/nodes/pve/lxc/200", &[]).await;
    assert_eq!(
        running.reason,
        "unable to destroy CT 200 - container is running"
    );
    sim.post_ok("/nodes/pve/lxc/200/status/shutdown", &[]).await;
    let upid = sim.delete("/nodes/pve/lxc/200", &[]).await.upid();
    sim.task_ok(&upid).await;
    assert_eq!(sim.get("/nodes/pve/lxc").await.data(), json!([]));
    let vols = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "200")])
        .await
        .data();
    assert_eq!(vols, json!([]));
}

#[tokio::test]
async fn container_create_checks() {
    let sim = start().await;
    let no_rootdir = sim
        .post(
            "/nodes/pve/lxc",
            &[("vmid", "200"), ("ostemplate", TEMPLATE)],
        )
        .await;
    assert_eq!(
        no_rootdir.reason,
        "storage 'local' does not support container directories"
    );
    let no_template = sim
        .post(
            "/nodes/pve/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", "local:vztmpl/nope.tar.zst"),
                ("storage", "local-lvm"),
            ],
        )
        .await;
    assert_eq!(
        no_template.reason,
        "volume 'local:vztmpl/nope.tar.zst' does not exist"
    );
    let taken = sim
        .post(
            "/nodes/pve/lxc",
            &[
                ("vmid", "9000"),
                ("ostemplate", TEMPLATE),
                ("storage", "local-lvm"),
            ],
        )
        .await;
    assert_eq!(taken.reason, "VM 9000 already exists on node 'pve'");
}

#[tokio::test]
async fn a_mount_point_asking_for_a_new_volume_gets_one() {
    let sim = start().await;
    let upid = sim
        .post(
            "/nodes/pve/lxc",
            &[
                ("vmid", "210"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:4"),
                ("mp0", "local-lvm:2,mp=/data"),
            ],
        )
        .await
        .upid();
    sim.task_ok(&upid).await;
    let c = sim.get("/nodes/pve/lxc/210/config").await.data();
    assert_eq!(c["mp0"], "local-lvm:vm-210-disk-1,mp=/data,size=2G", "{c}");
    let vols = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "210")])
        .await
        .data();
    assert_eq!(vols.as_array().unwrap().len(), 2, "{vols}");
    // Destroying the container frees both volumes.
    let upid = sim
        .delete(
            "/nodes/pve/lxc/210",
            &[("purge", "1"), ("destroy-unreferenced-disks", "1")],
        )
        .await
        .upid();
    sim.task_ok(&upid).await;
    let vols = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "210")])
        .await
        .data();
    assert_eq!(vols, json!([]));
}

#[tokio::test]
async fn an_oci_pull_writes_a_template_once_and_a_container_starts_from_it() {
    let sim = start().await;
    let pull = [("reference", "docker.io/library/alpine:3.20")];
    let upid = sim
        .post("/nodes/pve/storage/local/oci-registry-pull", &pull)
        .await
        .upid();
    assert!(upid.contains(":ociregistrypull:alpine_3.20.tar:"), "{upid}");
    sim.task_ok(&upid).await;
    let log = sim.task_log(&upid).await;
    assert!(
        log.iter()
            .any(|l| l.contains("skopeo copy docker://docker.io/library/alpine:3.20")),
        "{log:?}"
    );
    let content = sim
        .get_q("/nodes/pve/storage/local/content", &[("content", "vztmpl")])
        .await
        .data();
    assert!(
        content
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["volid"] == "local:vztmpl/alpine_3.20.tar"),
        "{content}"
    );
    // Never overwritten: refused before a task starts.
    let again = sim
        .post("/nodes/pve/storage/local/oci-registry-pull", &pull)
        .await;
    assert_eq!(again.status, 500);
    assert_eq!(
        again.reason,
        "refusing to override existing file 'alpine_3.20.tar'"
    );
    // A file name of one's own is normalised.
    let named = sim
        .post(
            "/nodes/pve/storage/local/oci-registry-pull",
            &[
                ("reference", "docker.io/library/alpine:3.20"),
                ("filename", "my alpine"),
            ],
        )
        .await
        .upid();
    assert!(named.contains(":ociregistrypull:my_alpine.tar:"), "{named}");
    // The reference needs a tag; storage without vztmpl is refused.
    let untagged = sim
        .post(
            "/nodes/pve/storage/local/oci-registry-pull",
            &[("reference", "docker.io/library/alpine")],
        )
        .await;
    assert_eq!(untagged.status, 400, "{:?}", untagged.reason);
    let wrong = sim
        .post("/nodes/pve/storage/local-lvm/oci-registry-pull", &pull)
        .await;
    assert_eq!(wrong.status, 500);

    let upid = sim
        .post(
            "/nodes/pve/lxc",
            &[
                ("vmid", "220"),
                ("ostemplate", "local:vztmpl/alpine_3.20.tar"),
                ("rootfs", "local-lvm:2"),
            ],
        )
        .await
        .upid();
    sim.task_ok(&upid).await;
    let c = sim.get("/nodes/pve/lxc/220/config").await.data();
    assert_eq!(c["ostype"], "alpine", "{c}");
}

#[tokio::test]
async fn pve_8_has_no_oci_pull() {
    let sim = crate::common::start_with(|c| c.pve_version = 8).await;
    let pull = sim
        .post(
            "/nodes/pve/storage/local/oci-registry-pull",
            &[("reference", "docker.io/library/alpine:3.20")],
        )
        .await;
    assert_ne!(pull.status, 200, "{:?}", pull.reason);
    assert!(!pull.reason.contains("not simulated"), "{:?}", pull.reason);
}
