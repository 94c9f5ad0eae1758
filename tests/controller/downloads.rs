//! Issue 31's internal URLs (SSRF): each became a `download-url` or
//! `oci-registry-pull` by the provider's token. Now the provider config's
//! `downloadPolicy` (default: public https hosts and registries only)
//! refuses them before anything is sent, naming the field and the rule;
//! an explicit allowance lets a host through. No URL here is fetched: the
//! simulator never fetches, and the refused ones are never sent.

use kube::Api;
use provider_proxmox::api::ProxmoxImage;
use serde_json::{Value, json};

use crate::reconcile::containers::{container, ct_condition, debian};
use crate::reconcile::{DEADLINE, Env, manifests};
use crate::support;

const DOWNLOAD: &str = "/nodes/{node}/storage/{storage}/download-url";
const PULL: &str = "/nodes/{node}/storage/{storage}/oci-registry-pull";

fn image(name: &str, source: Value, content: &str) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": name},
        "spec": {
            "forProvider": {"source": source, "content": content, "storage": "local"},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

fn url(url: &str) -> Value {
    json!({"url": url, "checksum": "a".repeat(64), "checksumAlgorithm": "sha256"})
}

/// Waits until ProxmoxImage `name`'s Synced condition has `reason` and a
/// message holding `part`.
async fn wait_image_synced(env: &Env, name: &str, reason: &str, part: &str) {
    let api: Api<ProxmoxImage> = Api::namespaced(support::client(), env.ns.name());
    support::poll(&format!("ProxmoxImage {name}: {reason}"), DEADLINE, || {
        let api = api.clone();
        async move {
            let image = api.get(name).await.map_err(|e| format!("GET: {e}"))?;
            let synced = image
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Synced"));
            match synced {
                Some(c)
                    if c.reason == reason
                        && c.message.as_deref().is_some_and(|m| m.contains(part)) =>
                {
                    Ok(())
                }
                other => Err(format!("Synced {other:?}")),
            }
        }
    })
    .await;
}

/// Waits until ProxmoxImage `name` is Ready.
async fn wait_image_ready(env: &Env, name: &str) {
    let api: Api<ProxmoxImage> = Api::namespaced(support::client(), env.ns.name());
    support::poll(&format!("ProxmoxImage {name}: Ready"), DEADLINE, || {
        let api = api.clone();
        async move {
            let image = api.get(name).await.map_err(|e| format!("GET: {e}"))?;
            let ready = image
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
            match ready {
                Some(c) if format!("{:?}", c.status) == "True" => Ok(()),
                other => Err(format!("Ready {other:?}")),
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_urls_and_registries_are_refused_before_anything_is_sent() {
    let env = Env::start("ssrf").await;
    let rows = [
        (
            "metadata",
            url("https://169.254.169.254/latest/meta-data/iam/security-credentials/x.qcow2"),
            "import",
            "spec.forProvider.source.url names host 169.254.169.254: the address 169.254.169.254 is link-local",
        ),
        (
            "node-api",
            url("https://127.0.0.1:8006/api2/json/access/users.qcow2"),
            "import",
            "is a loopback address",
        ),
        (
            "metrics",
            url("https://localhost:9100/metrics.qcow2"),
            "import",
            "localhost (the node itself)",
        ),
        (
            "docker",
            url("https://10.0.0.1:2375/containers/json.qcow2"),
            "import",
            "private (RFC 1918)",
        ),
        (
            "plain-http",
            url("http://images.example/noble.qcow2"),
            "import",
            "downloadPolicy.allowHttp is not true",
        ),
        (
            "registry",
            json!({"oci": "127.0.0.1:5000/team-a/alpine:3.21"}),
            "vztmpl",
            "spec.forProvider.source.oci names host 127.0.0.1",
        ),
    ];
    for (name, source, content, _) in &rows {
        env.apply(&image(name, source.clone(), content)).await;
    }
    env.apply(&container(
        "ct-registry",
        debian(json!({"template": {"oci": {"reference": "10.0.0.1:5000/alpine:3.21", "storage": "local"}}})),
    ))
    .await;
    let disk = json!([{"slot": "scsi0", "storage": "local-lvm", "size": "8Gi",
        "image": url("https://169.254.169.254/latest/user-data.qcow2")}]);
    env.apply(&manifests::vm(
        "vm-metadata",
        json!({"node": "pve", "memory": "512Mi", "disks": disk}),
    ))
    .await;

    for (name, _, _, part) in &rows {
        wait_image_synced(&env, name, "NotAllowed", part).await;
    }
    env.wait_container("ct-registry", "NotAllowed", |ct| {
        match ct_condition(ct, "Synced") {
            Some(c)
                if c.reason == "NotAllowed"
                    && c.message.as_deref().is_some_and(|m| {
                        m.contains("spec.forProvider.template.oci.reference names host 10.0.0.1")
                    }) =>
            {
                Ok(())
            }
            other => Err(format!("Synced {other:?}")),
        }
    })
    .await;
    let vm = env.wait_synced_reason("vm-metadata", "NotAllowed").await;
    let message = vm.message.unwrap_or_default();
    assert!(
        message.contains("spec.forProvider.disks[0].image.url names host 169.254.169.254"),
        "{message}"
    );
    assert_eq!(env.sim.count("POST", DOWNLOAD).await, 0, "no download-url");
    assert_eq!(env.sim.count("POST", PULL).await, 0, "no oci-registry-pull");
}

/// A host the default refuses is downloaded from once the provider
/// config's `downloadPolicy.allowedHosts` names it (a CIDR here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_internal_host_is_downloaded_from() {
    let env = Env::start("ssrf-allowed").await;
    let source = url("https://127.0.0.1:8443/mirror/noble.qcow2");
    env.apply(&image("mirror", source.clone(), "import")).await;
    wait_image_synced(&env, "mirror", "NotAllowed", "is a loopback address").await;
    assert_eq!(env.sim.count("POST", DOWNLOAD).await, 0);
    env.apply(&manifests::provider_config(
        &env.sim,
        &json!({"downloadPolicy": {"allowedHosts": ["127.0.0.0/8"]}}),
    ))
    .await;
    let checksum = sim_sha256("https://127.0.0.1:8443/mirror/noble.qcow2");
    let mut fixed = source;
    fixed["checksum"] = json!(checksum);
    env.apply(&image("mirror", fixed, "import")).await;
    wait_image_ready(&env, "mirror").await;
    assert!(env.sim.count("POST", DOWNLOAD).await >= 1, "downloaded");
}

const METADATA: &str = "/nodes/{node}/query-url-metadata";

/// The sim's checksum of a URL's content (unregistered, or registered
/// without checksums).
fn sim_sha256(url: &str) -> String {
    support::sha256_hex(url)
}

/// Issue 31: a 200 GiB download into a 100 GiB storage was sent. Now the
/// size Proxmox reports for the URL (`query-url-metadata`) is checked
/// against the storage's free space first: a file that does not fit is
/// `InsufficientStorage` with both sizes and nothing sent; one whose size
/// the server does not tell goes on as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_larger_than_the_free_space_is_not_sent() {
    let env = Env::start("room").await;
    let huge_url = "https://images.example/huge.qcow2";
    let chunked_url = "https://images.example/chunked.qcow2";
    let huge = 1u64 << 50;
    for (url, size, no_length) in [(huge_url, huge, false), (chunked_url, 1 << 20, true)] {
        env.sim.handle.register_url(pve_sim::UrlEntry {
            url: url.to_owned(),
            size: Some(size),
            virtual_size: None,
            checksums: Default::default(),
            error: None,
            corrupt: false,
            no_length,
        });
    }
    let source =
        |u: &str| json!({"url": u, "checksum": sim_sha256(u), "checksumAlgorithm": "sha256"});
    // The other image's download is held running while the huge one is
    // looked at: a running download of another file on the node once made
    // the pass skip the size check and the plan send the huge one.
    env.sim
        .fault(json!({"fault": "task-held", "task_type": "download", "hold": "other"}))
        .await;
    env.apply(&image("chunked", source(chunked_url), "import"))
        .await;
    wait_image_synced(&env, "chunked", "DownloadingImage", "downloading").await;
    env.apply(&image("huge", source(huge_url), "import")).await;
    wait_image_synced(
        &env,
        "huge",
        "InsufficientStorage",
        &format!("spec.forProvider.source.url: Proxmox reports {huge} bytes for the file and storage local on node pve has"),
    )
    .await;
    env.sim.release("other").await;
    wait_image_ready(&env, "chunked").await;
    let downloads = env.sim.requests_to("POST", DOWNLOAD).await;
    let queries = env.sim.requests_to("GET", METADATA).await;
    assert!(
        downloads.iter().all(|r| r["params"]["url"] != huge_url),
        "nothing of the huge file sent: {downloads:?}\nthe size queries: {queries:?}"
    );
    assert_eq!(downloads.len(), 1, "the chunked one, once: {downloads:?}");
    // Asked only in passes that would dispatch the huge one.
    let queries = env.sim.requests_to("GET", METADATA).await;
    assert!(
        queries.iter().any(|q| q["params"]["url"] == huge_url),
        "{queries:?}"
    );
}

/// The same check for a VM's own `disks[].image` download (issue 31: only
/// a ProxmoxImage had it): a file Proxmox reports larger than the storage's
/// free space is `InsufficientStorage` naming the disk's field and both
/// sizes, and neither the download nor the VM is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vms_disk_image_larger_than_the_free_space_is_not_downloaded() {
    let env = Env::start("vmroom").await;
    let huge_url = "https://images.example/vm-huge.qcow2";
    let huge = 1u64 << 50;
    env.sim.handle.register_url(pve_sim::UrlEntry {
        url: huge_url.to_owned(),
        size: Some(huge),
        virtual_size: None,
        checksums: Default::default(),
        error: None,
        corrupt: false,
        no_length: false,
    });
    let disk = json!([{"slot": "scsi0", "storage": "local-lvm", "size": "8Gi",
        "image": {"url": huge_url, "checksum": sim_sha256(huge_url), "checksumAlgorithm": "sha256"}}]);
    env.apply(&manifests::vm(
        "vm-huge",
        json!({"node": "pve", "memory": "512Mi", "disks": disk}),
    ))
    .await;
    let synced = env
        .wait_synced_reason("vm-huge", "InsufficientStorage")
        .await;
    let message = synced.message.unwrap_or_default();
    assert!(
        message.contains(&format!(
            "spec.forProvider.disks[0].image.url: Proxmox reports {huge} bytes for the file and storage local on node pve has"
        )),
        "{message}"
    );
    assert_eq!(
        env.sim.count("POST", DOWNLOAD).await,
        0,
        "nothing downloaded"
    );
    assert_eq!(
        env.sim.count("POST", "/nodes/{node}/qemu").await,
        0,
        "no VM created"
    );
    let queries = env.sim.requests_to("GET", METADATA).await;
    assert!(
        queries.iter().any(|q| q["params"]["url"] == huge_url),
        "the size asked: {queries:?}"
    );
}

/// The DNS lookups of download hosts this controller made so far.
fn lookups(env: &Env) -> u64 {
    let text = env.controller.as_ref().unwrap().metrics.encode();
    text.lines()
        .find_map(|l| l.strip_prefix("proxmox_provider_download_host_lookups_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no lookup counter in {text}"))
}

/// Issue 31: every pass of an image looked its download host up in DNS.
/// Now only a pass that would send the download does: the one that sent
/// it did, the passes of the Ready image after it (one per resync, each
/// listing the storage) do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_image_at_rest_does_no_dns_lookup() {
    let env = Env::start("restdns").await;
    let u = "https://images.example/rest.qcow2";
    let source = json!({"url": u, "checksum": sim_sha256(u), "checksumAlgorithm": "sha256"});
    env.apply(&image("rest", source, "import")).await;
    wait_image_ready(&env, "rest").await;
    let sent = lookups(&env);
    assert!(
        sent >= 1,
        "the pass that sent the download looked its host up"
    );
    let content = "/nodes/{node}/storage/{storage}/content";
    let listed = env.sim.count("GET", content).await;
    support::poll("two more passes of the Ready image", DEADLINE, || async {
        let now = env.sim.count("GET", content).await;
        (now >= listed + 2)
            .then_some(())
            .ok_or_else(|| format!("{} listings since", now - listed))
    })
    .await;
    assert_eq!(lookups(&env), sent, "no lookup while at rest");
}
