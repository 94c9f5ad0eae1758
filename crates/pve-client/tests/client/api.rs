//! The typed endpoints against pve-sim: cluster, nodes, storage content,
//! download-url, query-url-metadata, clone, config (async/sync, digest, pending), power, agent.

use std::time::Duration;

use pve_client::vm::{CloneVm, ConfigUpdate, VmParams};
use pve_client::{
    AgentNetwork, AgentNotReady, Checksum, DownloadContent, DownloadUrl, Error, ResourceType,
};
use sha2::{Digest, Sha256};

use crate::harness::{Harness, IMAGE, NODE, TEMPLATE, cloned_vm, eventually, has_import};

#[tokio::test]
async fn cluster_nodes_and_storage() {
    // A stats lag (pvestatd's broadcast) far longer than the test.
    let h = Harness::start_with_durations(|d| d.resources_lag = Duration::from_secs(100_000)).await;
    let client = h.client();
    let nodes = client.nodes().await.unwrap();
    assert!(nodes.iter().any(|n| n.node == NODE), "{nodes:?}");
    let node = nodes.iter().find(|n| n.node == NODE).unwrap();
    assert!(node.maxmem.unwrap_or(0) > 0, "{node:?}");

    // The seeded template existed before the simulator started: its stats
    // are there at once. A new VM is `status: unknown` without details until
    // the next broadcast.
    let vms = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .unwrap();
    let template = vms
        .iter()
        .find(|r| r.vmid == Some(u64::from(TEMPLATE)))
        .unwrap();
    assert_eq!(template.status.as_deref(), Some("stopped"), "{template:?}");
    assert!(template.template, "{template:?}");
    assert_eq!(template.node.as_deref(), Some(NODE));
    assert_eq!(template.id, format!("qemu/{TEMPLATE}"));
    cloned_vm(&client, 140).await;
    let vms = client
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .unwrap();
    let fresh = vms.iter().find(|r| r.vmid == Some(140)).unwrap();
    assert_eq!(fresh.status.as_deref(), Some("unknown"), "{fresh:?}");

    let content = client
        .storage_content(NODE, "local", Some("import"))
        .await
        .unwrap();
    assert!(content.iter().any(|c| c.volid == IMAGE), "{content:?}");
    assert!(has_import(&client, IMAGE).await);
    assert!(!has_import(&client, "local:import/nope.qcow2").await);
}

#[tokio::test]
async fn download_url_places_an_importable_image() {
    let h = Harness::start().await;
    let client = h.client();
    // The sim's content of an unregistered URL hashes to sha256(url).
    let url = "https://images.example/jammy-server-cloudimg-amd64.img".to_owned();
    let sum: String = Sha256::digest(url.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let req = DownloadUrl {
        url: url.clone(),
        content: DownloadContent::Import,
        filename: "jammy.qcow2".into(),
        checksum: Some(Checksum {
            value: sum,
            algorithm: "sha256".into(),
        }),
        verify_certificates: None,
    };
    let upid = client.download_url(NODE, "local", &req).await.unwrap();
    assert_eq!(upid.task_type(), "download");
    client.wait_task(&upid).await.unwrap();
    assert!(has_import(&client, &req.volid("local")).await);

    // A wrong checksum fails the task, with the reason in the log tail.
    let bad = DownloadUrl {
        filename: "jammy2.qcow2".into(),
        checksum: Some(Checksum {
            value: "00".repeat(32),
            algorithm: "sha256".into(),
        }),
        ..req.clone()
    };
    let upid = client.download_url(NODE, "local", &bad).await.unwrap();
    let err = client.wait_task(&upid).await.unwrap_err();
    assert!(matches!(err, Error::TaskFailed { .. }), "{err:?}");
    assert!(!has_import(&client, &bad.volid("local")).await);

    // `.img` is not an import format: refused synchronously.
    let img = DownloadUrl {
        filename: "jammy.img".into(),
        checksum: None,
        ..req
    };
    let err = client.download_url(NODE, "local", &img).await.unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
}

#[tokio::test]
async fn full_clone_to_a_target_storage() {
    let h = Harness::start().await;
    let client = h.client();
    let clone = CloneVm {
        newid: 900,
        name: Some("full".into()),
        full: Some(true),
        storage: Some("local-lvm".into()),
        description: Some("made by the client tests".into()),
        ..CloneVm::default()
    };
    let upid = client.clone_vm(NODE, TEMPLATE, &clone).await.unwrap();
    client.wait_task(&upid).await.unwrap();
    let cfg = client.vm_config(NODE, 900).await.unwrap();
    assert_eq!(cfg.name.as_deref(), Some("full"));
    assert_eq!(cfg.description.as_deref(), Some("made by the client tests"));
    let (key, disk) = cfg.boot_disk().unwrap();
    assert_eq!(key, "scsi0");
    assert_eq!(disk.storage(), Some("local-lvm"));
    assert!(disk.file.to_string().contains("900"), "{disk:?}");
    assert!(!cfg.template);
}

#[tokio::test]
async fn config_updates_digest_and_pending() {
    let h = Harness::start().await;
    let client = h.client();
    cloned_vm(&client, 901).await;
    let before = client.vm_config(NODE, 901).await.unwrap();
    let digest = before.digest.clone().unwrap();

    // Async update (POST): returns a qmconfig task.
    let update = ConfigUpdate {
        set: VmParams {
            memory: Some(4096),
            cores: Some(4),
            ..VmParams::default()
        },
        delete: vec!["serial0".into()],
        digest: Some(digest.clone()),
    };
    let upid = client.update_vm_config(NODE, 901, &update).await.unwrap();
    assert_eq!(upid.task_type(), "qmconfig");
    client.wait_task(&upid).await.unwrap();
    let after = client.vm_config(NODE, 901).await.unwrap();
    assert_eq!((after.memory, after.cores), (Some(4096), Some(4)));
    assert!(!after.raw.contains_key("serial0"));
    assert_ne!(after.digest.as_deref(), Some(digest.as_str()));

    // The old digest is now stale: a typed conflict, not retried.
    let stale = ConfigUpdate {
        set: VmParams {
            cores: Some(2),
            ..VmParams::default()
        },
        digest: Some(digest),
        ..ConfigUpdate::default()
    };
    let err = client
        .update_vm_config_sync(NODE, 901, &stale)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");

    // On a running VM, memory changes stay pending until a restart.
    let start = client.start_vm(NODE, 901).await.unwrap();
    client.wait_task(&start).await.unwrap();
    let grow = ConfigUpdate {
        set: VmParams {
            memory: Some(8192),
            name: Some("renamed".into()),
            ..VmParams::default()
        },
        ..ConfigUpdate::default()
    };
    client
        .update_vm_config_sync(NODE, 901, &grow)
        .await
        .unwrap();
    let pending = client.vm_pending(NODE, 901).await.unwrap();
    let memory = pending.iter().find(|p| p.key == "memory").unwrap();
    assert!(memory.is_pending(), "{memory:?}");
    assert_eq!(memory.pending.as_deref(), Some("8192"));
    assert_eq!(
        client.vm_config(NODE, 901).await.unwrap().memory,
        Some(8192)
    );
    assert_eq!(
        client.vm_config_current(NODE, 901).await.unwrap().memory,
        Some(4096)
    );
    assert_eq!(
        client
            .vm_config_current(NODE, 901)
            .await
            .unwrap()
            .name
            .as_deref(),
        Some("renamed")
    );
}

#[tokio::test]
async fn power_operations_and_the_guest_agent() {
    let h = Harness::start().await;
    let client = h.client();
    cloned_vm(&client, 902).await;

    let stopped = client.agent_network_interfaces(NODE, 902).await.unwrap();
    assert!(
        matches!(
            stopped,
            AgentNetwork::NotReady {
                reason: AgentNotReady::VmNotRunning,
                ..
            }
        ),
        "{stopped:?}"
    );
    let start = client.start_vm(NODE, 902).await.unwrap();
    client.wait_task(&start).await.unwrap();
    let status = client.vm_status(NODE, 902).await.unwrap();
    assert!(status.is_running() && status.agent, "{status:?}");

    let ready = eventually("the guest agent", || async {
        match client.agent_network_interfaces(NODE, 902).await.unwrap() {
            AgentNetwork::Ready(ifaces) => Some(ifaces),
            AgentNetwork::NotReady { reason, .. } => {
                assert_eq!(reason, AgentNotReady::AgentNotRunning);
                None
            }
        }
    })
    .await;
    let net = AgentNetwork::Ready(ready);
    assert!(!net.addresses().is_empty(), "{net:?}");

    let stop = client.stop_vm(NODE, 902).await.unwrap();
    client.wait_task(&stop).await.unwrap();
    assert!(!client.vm_status(NODE, 902).await.unwrap().is_running());

    // An agent that is not configured is not "not running yet".
    let off = ConfigUpdate {
        set: VmParams {
            agent: Some(pve_client::vm::AgentConfig::enabled(false)),
            ..VmParams::default()
        },
        ..ConfigUpdate::default()
    };
    client.update_vm_config_sync(NODE, 902, &off).await.unwrap();
    let answer = client.agent_network_interfaces(NODE, 902).await.unwrap();
    assert!(
        matches!(
            answer,
            AgentNetwork::NotReady {
                reason: AgentNotReady::NotConfigured,
                ..
            }
        ),
        "{answer:?}"
    );
}

/// A multipart upload with its checksum places an ISO; deleting it starts
/// an `imgdel` task that removes it.
#[tokio::test]
async fn upload_iso_and_delete_it() {
    let h = Harness::start().await;
    let client = h.client();
    // Bytes that look like the start of a multipart boundary, and more
    // than one read buffer.
    let iso: Vec<u8> = (0..200_000u32)
        .map(|i| (i % 253) as u8)
        .chain(*b"\r\n--x\r\n")
        .collect();
    let upid = client
        .upload_iso(NODE, "local", "seed.iso", iso.clone())
        .await
        .unwrap();
    assert!(upid.as_str().contains(":imgcopy:"), "{upid:?}");
    client.wait_task(&upid).await.unwrap();
    let content = client
        .storage_content(NODE, "local", Some("iso"))
        .await
        .unwrap();
    let placed = content
        .iter()
        .find(|c| c.volid == "local:iso/seed.iso")
        .unwrap_or_else(|| panic!("{content:?}"));
    assert_eq!(placed.size, Some(iso.len() as u64));

    let upid = client
        .delete_volume(NODE, "local", "local:iso/seed.iso")
        .await
        .unwrap();
    client.wait_task(&upid).await.unwrap();
    let content = client
        .storage_content(NODE, "local", Some("iso"))
        .await
        .unwrap();
    assert!(content.iter().all(|c| c.volid != "local:iso/seed.iso"));
}

#[tokio::test]
async fn query_url_metadata_reads_the_size_a_download_would_write() {
    let h = Harness::start().await;
    let client = h.client();
    let meta = client
        .query_url_metadata(NODE, "https://images.example/noble.qcow2?sig=1", None)
        .await
        .unwrap();
    assert_eq!(meta.size, Some(600 << 20), "{meta:?}");
    assert_eq!(meta.filename.as_deref(), Some("noble.qcow2"));
    let unresolvable = client
        .query_url_metadata(NODE, "https://mirror.invalid/x.qcow2", Some(true))
        .await;
    assert!(unresolvable.is_err(), "{unresolvable:?}");
}
