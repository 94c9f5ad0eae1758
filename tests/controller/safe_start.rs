//! Crossplane's safe-start: Crossplane installs a provider's CRDs only as
//! operators activate its kinds, so the provider runs with some of them
//! missing and must start each kind's controller when its CRD comes.
//!
//! On a control plane of its own (the shared one has every CRD): first only
//! the provider configs' and ProxmoxPool's CRDs. The provider starts, is
//! ready, writes its config's status (which counts the users of every
//! kind, the missing ones included) and makes a pool Ready. Then the other
//! CRDs are installed, and a ProxmoxVM applied afterwards becomes Ready
//! with no restart.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use provider_proxmox::api::kinds::{self, Kind};
use provider_proxmox::api::{ProviderConfig, ProxmoxPool, ProxmoxVM};
use provider_proxmox::reconcile::Settings;
use serde_json::{Value, json};

use crate::reconcile::{Controller, DEADLINE, Sim, manifests};
use crate::support;

const NS: &str = "safe-start";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_starts_when_its_crd_is_served() {
    provider_proxmox::install_crypto_provider();
    let plane = testenv::ControlPlane::start(testenv::Options::attached())
        .await
        .expect("a control plane of this test's own");
    let kube = kube::Client::try_from(plane.kube_config().await.expect("its kubeconfig"))
        .expect("a client");
    let (first, later): (Vec<Kind>, Vec<Kind>) = kinds::all()
        .into_iter()
        .partition(|k| !k.managed || k.kind == "ProxmoxPool");
    install(&kube, &first).await;
    Api::<Namespace>::all(kube.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await
        .unwrap();
    let sim = Sim::start(0.01).await;
    apply(&kube, &manifests::credentials()).await;
    apply(&kube, &manifests::provider_config(&sim, &json!({}))).await;

    let settings = Settings {
        namespace: Some(NS.to_owned()),
        identity: format!("test-{NS}"),
        metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
        ..Settings::default()
    };
    let controller = Controller::start(kube.clone(), settings).await;
    let addr = controller.addr.expect("a bound address");

    // Without the ProxmoxVM CRD (whose cache `/readyz` follows) and five
    // other kinds'.
    support::poll("/readyz to answer 200", DEADLINE, || async {
        let r = reqwest::get(format!("http://{addr}/readyz"))
            .await
            .map_err(|e| e.to_string())?;
        match r.status().as_u16() {
            200 => Ok(()),
            code => Err(format!("{code}")),
        }
    })
    .await;
    // The config pass counts the users of every kind before it writes.
    wait_ready::<ProviderConfig>(&kube, "pve").await;
    let pool = json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxPool",
        "metadata": {"name": "first"},
        "spec": {
            "forProvider": {"poolId": "safe-start", "comment": "before the other CRDs"},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    });
    apply(&kube, &pool).await;
    wait_ready::<ProxmoxPool>(&kube, "first").await;

    install(&kube, &later).await;
    apply(
        &kube,
        &manifests::vm("later", manifests::imported(json!({}))),
    )
    .await;
    wait_ready::<ProxmoxVM>(&kube, "later").await;
    assert_eq!(
        sim.count("POST", "/nodes/{node}/qemu").await,
        1,
        "the VM was created on Proxmox, once"
    );

    controller.stop().await;
    drop(plane);
}

/// Creates the CRDs of `kinds` and waits until each is served.
async fn install(kube: &kube::Client, kinds: &[Kind]) {
    let crds = Api::<CustomResourceDefinition>::all(kube.clone());
    for kind in kinds {
        crds.create(&PostParams::default(), &kind.crd())
            .await
            .unwrap_or_else(|e| panic!("creating the CRD of {}: {e}", kind.kind));
    }
    for kind in kinds {
        support::wait_until_served_on(kube, &kind.crd_name()).await;
    }
}

/// Server-side applies `object` into the test's namespace.
async fn apply(kube: &kube::Client, object: &Value) {
    let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    support::apply_objects_on(kube, &[object], Some(NS)).await;
}

/// Waits until the `K` `name` is Ready=True.
async fn wait_ready<K>(kube: &kube::Client, name: &str)
where
    K: kube::Resource<DynamicType = ()>,
{
    let api: Api<DynamicObject> =
        Api::namespaced_with(kube.clone(), NS, &ApiResource::erase::<K>(&()));
    support::poll(
        &format!("{} {name} to be Ready", K::kind(&())),
        DEADLINE,
        || async {
            let object = api.get(name).await.map_err(|e| e.to_string())?;
            let conditions = object.data["status"]["conditions"].clone();
            let ready = conditions
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            ready
                .then_some(())
                .ok_or(format!("conditions: {conditions}"))
        },
    )
    .await;
}
