//! `customCloudInit`: the seed's files from Secrets and ConfigMaps, and the
//! seed ISOs of the VM on its storage.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use pve_client::Client;

use super::Failure;
use crate::api::vm::{CloudInitSource, CustomCloudInit};
use crate::reconcile::error::is_not_found;
use crate::reconcile::vm::nocloud::SeedFiles;
use crate::reconcile::vm::plan::{SeedView, seed_prefix};

/// What to read.
pub(super) struct SeedRead<'a> {
    pub namespace: &'a str,
    pub spec: &'a CustomCloudInit,
    pub vmid: u32,
    /// Where the VM is (or was last seen).
    pub node: &'a str,
    pub deleting: bool,
    /// The VM runs: its QEMU process ID is read too.
    pub running: bool,
}

/// Reads the seed of a VM as the spec describes it: its data (unless
/// deleting), which of its ISOs are on the node's storage, and the QEMU
/// process of a running VM.
pub(super) async fn seed_view(
    kube: &kube::Client,
    client: &Client,
    read: SeedRead<'_>,
) -> Result<SeedView, Failure> {
    let SeedRead {
        namespace,
        spec,
        vmid,
        node,
        deleting,
        running,
    } = read;
    let data = if deleting {
        Err("not read while deleting".to_owned())
    } else {
        files(kube, namespace, spec).await?
    };
    let prefix = format!("{}:iso/{}", spec.storage, seed_prefix(vmid));
    let volumes = client
        .storage_content(node, &spec.storage, Some("iso"))
        .await?
        .into_iter()
        .map(|c| c.volid)
        .filter(|v| v.starts_with(&prefix))
        .collect();
    let pid = if running {
        client.vm_status(node, vmid).await?.pid
    } else {
        None
    };
    Ok(SeedView {
        node: node.to_owned(),
        data,
        volumes,
        pid,
        shared: false,
    })
}

/// The files, or why they cannot be read (a missing Secret, ConfigMap or
/// key). Values are used as they are: no trimming, since YAML and scripts
/// care about every byte.
async fn files(
    kube: &kube::Client,
    namespace: &str,
    spec: &CustomCloudInit,
) -> Result<Result<SeedFiles, String>, Failure> {
    let mut files = SeedFiles::default();
    for (name, source) in spec.sources() {
        match read(kube, namespace, source).await? {
            Ok(content) => files.insert(name, content),
            Err(why) => return Ok(Err(format!("{name}: {why}"))),
        }
    }
    Ok(Ok(files))
}

async fn read(
    kube: &kube::Client,
    namespace: &str,
    source: &CloudInitSource,
) -> Result<Result<Vec<u8>, String>, Failure> {
    // (kind, name, key, None: no such object | Some(None): no such key)
    let (what, name, key, value) = if let Some(r) = &source.secret_key_ref {
        let secret: Option<Secret> = get(kube, namespace, &r.name).await?;
        let value = secret.map(|s| s.data.and_then(|mut d| d.remove(&r.key)).map(|v| v.0));
        ("Secret", &r.name, &r.key, value)
    } else if let Some(r) = &source.config_map_key_ref {
        let map: Option<ConfigMap> = get(kube, namespace, &r.name).await?;
        let value = map.map(|m| {
            let binary = m
                .binary_data
                .and_then(|mut d| d.remove(&r.key))
                .map(|b| b.0);
            m.data
                .and_then(|mut d| d.remove(&r.key))
                .map(String::into_bytes)
                .or(binary)
        });
        ("ConfigMap", &r.name, &r.key, value)
    } else {
        return Ok(Err("names neither a Secret nor a ConfigMap".into()));
    };
    Ok(match value {
        None => Err(format!("{what} {namespace}/{name} does not exist")),
        Some(None) => Err(format!("{what} {namespace}/{name} has no key {key:?}")),
        Some(Some(bytes)) => Ok(bytes),
    })
}

/// An object of the namespace, `None` when it does not exist.
async fn get<K>(kube: &kube::Client, namespace: &str, name: &str) -> Result<Option<K>, Failure>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    match Api::<K>::namespaced(kube.clone(), namespace)
        .get(name)
        .await
    {
        Ok(object) => Ok(Some(object)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(Failure::Kube(e.into())),
    }
}
