//! Backups on demand and restores against pve-sim: the `vzdump` call, the
//! archive in the storage's `backup` content, its protection, and a VM
//! and a container restored from archives.

use pve_client::lxc::{ContainerVolume, CreateContainer};
use pve_client::{BackupMode, Compression, GuestType, Restore, Vzdump, parse_backup_name};

use crate::harness::{Harness, NODE, TEMPLATE};

#[tokio::test]
async fn a_guest_backed_up_is_restored_and_its_archive_deleted() {
    let h = Harness::start().await;
    let client = h.client();
    let dump = Vzdump {
        vmid: TEMPLATE,
        storage: "local".into(),
        mode: BackupMode::Stop,
        compress: Compression::Zstd,
        notes_template: Some("{{guestname}}".into()),
        protected: true,
    };
    let upid = client.vzdump(NODE, &dump).await.unwrap();
    assert_eq!(upid.task_type(), "vzdump");
    client.wait_task(&upid).await.unwrap();
    let list = client.backups(NODE, "local", Some(TEMPLATE)).await.unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    let archive = &list[0];
    assert_eq!(
        parse_backup_name(&archive.volid),
        Some((GuestType::Qemu, TEMPLATE))
    );
    assert_eq!(archive.protected, Some(true));
    assert_eq!(archive.format.as_deref(), Some("vma.zst"));

    let restore = Restore {
        vmid: 150,
        archive: archive.volid.clone(),
        storage: Some("local-lvm".into()),
        unique: true,
        ..Restore::default()
    };
    let upid = client.restore_vm(NODE, &restore).await.unwrap();
    assert_eq!(upid.task_type(), "qmrestore");
    client.wait_task(&upid).await.unwrap();
    assert!(client.vm_config(NODE, 150).await.is_ok());
    let again = client.restore_vm(NODE, &restore).await.unwrap_err();
    assert!(again.to_string().contains("already exists"), "{again}");

    let delete = client
        .delete_volume(NODE, "local", &archive.volid)
        .await
        .unwrap();
    let refused = client.wait_task(&delete).await.unwrap_err();
    assert!(refused.to_string().contains("protected"), "{refused}");
    client
        .set_backup_protected(NODE, &archive.volid, false)
        .await
        .unwrap();
    let delete = client
        .delete_volume(NODE, "local", &archive.volid)
        .await
        .unwrap();
    client.wait_task(&delete).await.unwrap();
    assert!(
        client
            .backups(NODE, "local", None)
            .await
            .unwrap()
            .is_empty()
    );

    let ct = CreateContainer {
        vmid: 240,
        ostemplate: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst".into(),
        rootfs: Some(ContainerVolume {
            storage: "local-lvm".into(),
            size_gib: 2,
            path: None,
        }),
        ..CreateContainer::default()
    };
    client
        .wait_task(&client.create_container(NODE, &ct).await.unwrap())
        .await
        .unwrap();
    let dump = Vzdump {
        vmid: 240,
        storage: "local".into(),
        ..Vzdump::default()
    };
    client
        .wait_task(&client.vzdump(NODE, &dump).await.unwrap())
        .await
        .unwrap();
    let archive = client.backups(NODE, "local", Some(240)).await.unwrap();
    let restore = Restore {
        vmid: 241,
        archive: archive[0].volid.clone(),
        storage: Some("local-lvm".into()),
        hostname: Some("copy".into()),
        description: Some("restored".into()),
        unprivileged: Some(true),
        ..Restore::default()
    };
    let upid = client.restore_container(NODE, &restore).await.unwrap();
    assert_eq!(upid.task_type(), "vzrestore");
    client.wait_task(&upid).await.unwrap();
    let config = client.container_config(NODE, 241).await.unwrap();
    assert_eq!(config.get("hostname"), Some("copy"));
    assert_eq!(config.get("description"), Some("restored"));
    assert_eq!(config.get("unprivileged"), Some("1"));
}

/// A backup job run by the scheduler (pve-sim's control): its `vzdump`
/// task is in the cluster's task list once it ended, and its log's first
/// line names the job.
#[tokio::test]
async fn a_scheduled_run_is_listed_cluster_wide_and_its_log_names_the_job() {
    let h = Harness::start().await;
    let client = h.client();
    let options = pve_client::BackupJobOptions {
        schedule: "daily".into(),
        storage: Some("local".into()),
        vmid: Some(TEMPLATE.to_string()),
        enabled: true,
        ..Default::default()
    };
    client
        .create_backup_job("backup-x", &options)
        .await
        .unwrap();
    let ran = h.run_backup_job("backup-x").await;
    let upid = pve_client::Upid::parse(&ran[0]).unwrap();
    client.wait_task(&upid).await.unwrap();
    let listed = loop {
        let tasks = client.cluster_tasks().await.unwrap();
        if let Some(t) = tasks
            .into_iter()
            .find(|t| t.upid == upid.as_str() && !t.is_running())
        {
            break t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(listed.status.as_deref(), Some("OK"));
    assert_eq!(listed.user.as_deref(), Some("root@pam"));
    let log = client.task_log(&upid, 0, 1).await.unwrap();
    assert_eq!(
        pve_client::vzdump_job_id(&log.lines[0].t),
        Some("backup-x"),
        "{:?}",
        log.lines
    );
}
