//! The container endpoints and the OCI pull against pve-sim: every call of
//! the `lxc` module, its form as the simulator (which checks it against
//! the PVE schema) accepts it, and what comes back.

use std::collections::BTreeMap;

use pve_client::lxc::{
    ContainerNet, ContainerUpdate, ContainerVolume, CreateContainer, Features, OciPull,
};
use pve_client::vm::DeleteOptions;
use pve_client::{ErrorClass, Secret};

use crate::harness::{Harness, NODE};

#[tokio::test]
async fn a_container_from_a_pulled_oci_image_lives_and_goes() {
    let h = Harness::start().await;
    let client = h.client();
    let pull = OciPull {
        reference: "docker.io/library/alpine:3.20".into(),
        filename: "alpine:3.20".into(),
    };
    let upid = client.pull_oci_image(NODE, "local", &pull).await.unwrap();
    assert_eq!(upid.task_type(), "ociregistrypull");
    client.wait_task(&upid).await.unwrap();
    let volume = pull.volume("local");
    let templates = client
        .storage_content(NODE, "local", Some("vztmpl"))
        .await
        .unwrap();
    assert!(templates.iter().any(|c| c.volid == volume), "{templates:?}");
    let again = client
        .pull_oci_image(NODE, "local", &pull)
        .await
        .unwrap_err();
    assert!(
        again.to_string().contains("refusing to override"),
        "{again}"
    );

    let create = CreateContainer {
        vmid: 230,
        ostemplate: volume,
        rootfs: Some(ContainerVolume {
            storage: "local-lvm".into(),
            size_gib: 2,
            path: None,
        }),
        cores: Some(1),
        memory: Some(256),
        swap: Some(128),
        unprivileged: true,
        features: Features {
            nesting: true,
            ..Features::default()
        },
        nets: BTreeMap::from([(
            0,
            ContainerNet {
                name: "eth0".into(),
                bridge: Some("vmbr0".into()),
                ip: Some("dhcp".into()),
                ..ContainerNet::default()
            },
        )]),
        password: Some(Secret::new("hunter22")),
        description: Some("notes".into()),
        ..CreateContainer::default()
    };
    // The create is held while the test looks at its lock: at the
    // simulator's time scale it could otherwise end before the look.
    h.hold_tasks("ct-create", "vzcreate").await;
    let upid = client.create_container(NODE, &create).await.unwrap();
    assert_eq!(upid.task_type(), "vzcreate");
    // Locked from the moment the call returns.
    let locked = client.container_config(NODE, 230).await.unwrap();
    assert_eq!(locked.lock(), Some("create"));
    h.release("ct-create").await;
    client.wait_task(&upid).await.unwrap();
    let config = client.container_config(NODE, 230).await.unwrap();
    assert_eq!(config.lock(), None);
    assert_eq!(config.get("features"), Some("nesting=1"));
    assert_eq!(config.get("swap"), Some("128"));
    assert!(config.get("password").is_none());
    let net = config.get("net0").unwrap();
    assert!(create.nets[&0].matches(net), "{net}");

    // A synchronous update on the digest read; a stale digest is refused.
    let update = ContainerUpdate {
        set: BTreeMap::from([("memory".to_owned(), "512".to_owned())]),
        delete: vec!["features".into()],
        digest: config.digest.clone(),
    };
    client
        .update_container_config(NODE, 230, &update)
        .await
        .unwrap();
    let stale = client
        .update_container_config(NODE, 230, &update)
        .await
        .unwrap_err();
    assert!(
        stale.to_string().contains("digest") || stale.to_string().contains("modified"),
        "{stale}"
    );
    let config = client.container_config(NODE, 230).await.unwrap();
    assert_eq!(config.get("memory"), Some("512"));
    assert!(config.get("features").is_none());

    let upid = client.start_container(NODE, 230).await.unwrap();
    assert_eq!(upid.task_type(), "vzstart");
    client.wait_task(&upid).await.unwrap();
    assert!(
        client
            .container_status(NODE, 230)
            .await
            .unwrap()
            .is_running()
    );
    let upid = client
        .shutdown_container(NODE, 230, Some(5), true)
        .await
        .unwrap();
    assert_eq!(upid.task_type(), "vzshutdown");
    client.wait_task(&upid).await.unwrap();
    assert!(
        !client
            .container_status(NODE, 230)
            .await
            .unwrap()
            .is_running()
    );
    let upid = client.start_container(NODE, 230).await.unwrap();
    client.wait_task(&upid).await.unwrap();
    let upid = client.stop_container(NODE, 230).await.unwrap();
    assert_eq!(upid.task_type(), "vzstop");
    client.wait_task(&upid).await.unwrap();

    let upid = client
        .delete_container(
            NODE,
            230,
            DeleteOptions {
                purge: true,
                destroy_unreferenced_disks: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(upid.task_type(), "vzdestroy");
    client.wait_task(&upid).await.unwrap();
    let gone = client.container_config(NODE, 230).await.unwrap_err();
    assert_eq!(gone.class(), ErrorClass::NotFound, "{gone}");
    let sent = h.requests().await;
    let destroy = sent
        .iter()
        .find(|r| r["method"] == "DELETE")
        .expect("the delete");
    assert_eq!(destroy["params"]["purge"], "1");
    assert_eq!(destroy["params"]["destroy-unreferenced-disks"], "1");
}
