//! Restarting kube-apiserver in place: the same address and credentials
//! work again, every object survives (etcd is kept), and the new process
//! is as attached as the first (it goes when the handle is dropped).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use testenv::{ControlPlane, Options, ProcessId};

fn wait_gone(process: ProcessId, context: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while process.is_alive() {
        assert!(
            Instant::now() < deadline,
            "{context}: {process:?} still runs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn a_restarted_apiserver_serves_the_same_objects_at_the_same_address() {
    let plane = ControlPlane::start(Options::attached()).await.unwrap();
    let [old_apiserver, etcd] = plane.pids()[..] else {
        panic!("two processes: {:?}", plane.pids())
    };
    let old_apiserver = ProcessId::of(old_apiserver).unwrap();
    let etcd = ProcessId::of(etcd).unwrap();
    let config = plane.kube_config().await.unwrap();
    let configmaps: Api<ConfigMap> =
        Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    let mut kept = ConfigMap::default();
    kept.metadata.name = Some("kept".into());
    kept.data = Some([("written".to_owned(), "before".to_owned())].into());
    configmaps
        .create(&PostParams::default(), &kept)
        .await
        .unwrap();

    plane.restart_apiserver().await.unwrap();

    wait_gone(old_apiserver, "the old apiserver after the restart");
    let new_apiserver = ProcessId::of(plane.pids()[0]).unwrap();
    assert_ne!(new_apiserver, old_apiserver, "a new process serves");
    assert!(etcd.is_alive(), "etcd was left running");
    // The client built before the restart reads the object written before it.
    let read = configmaps.get("kept").await.unwrap();
    assert_eq!(read.data, kept.data);
    assert!(
        plane.dir().join("kube-apiserver-restart-1.log").exists(),
        "the new process logs to a file of its own"
    );

    drop(plane);
    wait_gone(new_apiserver, "the restarted apiserver after drop");
    wait_gone(etcd, "etcd after drop");
}
