//! LVM-thin pools as LVM keeps them: a volume takes pool space only as data
//! is written to it, the pool may promise more than it holds, a write that
//! does not fit fails, and a full pool refuses new volumes.

use pve_sim::state::file::StateFile;
use serde_json::Value;

use crate::common::{Sim, start_with};

const IMAGE: &str = "local:import/cloud.qcow2";
const MIB: u64 = 1 << 20;

/// One node whose thin pool holds `pool_mib`, 300 MiB of it already used,
/// and a 600 MiB qcow2 image (3.5 GiB virtual) to import.
async fn sim_with_pool(pool_mib: u64) -> Sim {
    let state = StateFile::parse(&format!(
        r#"
nodes: [{{name: pve}}]
storages:
  - {{id: local, type: dir, path: /var/lib/vz, content: [import, iso], size: 100G}}
  - {{id: local-lvm, type: lvmthin, vg: pve, content: [images, rootdir], size: {pool_mib}M}}
volumes:
  - {{volid: "{IMAGE}", size: 600M, virtual_size: 3584M}}
  - {{volid: "local-lvm:vm-999-disk-0", size: 300M, vmid: 999}}
"#
    ))
    .unwrap();
    start_with(|c| c.state = Some(state)).await
}

async fn pool_used(sim: &Sim) -> u64 {
    let status = sim.get("/nodes/pve/storage/local-lvm/status").await.data();
    status["used"].as_u64().unwrap()
}

async fn create(sim: &Sim, vmid: &str, disk: &str) -> Value {
    let upid = sim
        .post(
            "/nodes/pve/qemu",
            &[("vmid", vmid), ("memory", "512"), ("scsi0", disk)],
        )
        .await
        .upid();
    sim.wait_task(&upid).await
}

#[tokio::test]
async fn thin_volumes_take_only_the_data_written_to_them() {
    let sim = sim_with_pool(1400).await;
    let import = format!("local-lvm:0,import-from={IMAGE}");
    assert_eq!(create(&sim, "100", &import).await["exitstatus"], "OK");
    assert_eq!(
        pool_used(&sim).await,
        900 * MIB,
        "300 MiB + the image's data"
    );

    // Growing a thin volume writes nothing; the listing tells size from use.
    let resize = sim
        .put(
            "/nodes/pve/qemu/100/resize",
            &[("disk", "scsi0"), ("size", "20G")],
        )
        .await
        .upid();
    sim.task_ok(&resize).await;
    let content = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "100")])
        .await
        .data();
    assert_eq!(content[0]["size"], 20u64 << 30);
    assert_eq!(content[0]["used"], 600 * MIB);
    assert_eq!(pool_used(&sim).await, 900 * MIB);

    // A 50 GiB blank disk on a 1.4 GiB pool: over-provisioned, as LVM allows.
    assert_eq!(
        create(&sim, "101", "local-lvm:50").await["exitstatus"],
        "OK"
    );
    assert_eq!(pool_used(&sim).await, 900 * MIB);

    // The next import's data does not fit in the 500 MiB left: the copy
    // fails, and its volume is removed with the failed VM.
    let failed = create(&sim, "102", &import).await;
    let status = failed["exitstatus"].as_str().unwrap();
    assert!(status.contains("No space left on device"), "{status}");
    assert_eq!(pool_used(&sim).await, 900 * MIB);
    assert_eq!(sim.get("/nodes/pve/qemu/102/config").await.status, 500);
}

#[tokio::test]
async fn a_full_thin_pool_refuses_new_volumes() {
    let sim = sim_with_pool(900).await;
    let import = format!("local-lvm:0,import-from={IMAGE}");
    assert_eq!(create(&sim, "100", &import).await["exitstatus"], "OK");
    assert_eq!(pool_used(&sim).await, 900 * MIB, "exactly full");

    let refused = create(&sim, "101", "local-lvm:1").await;
    assert_eq!(
        refused["exitstatus"],
        "unable to create VM 101 - lvcreate 'pve/vm-101-disk-0' error:   \
         Cannot create new thin volume, free space in thin pool pve/data reached threshold."
    );
}
