//! Applying YAML manifests with server-side apply, and installing CRDs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use kube::{Api, ResourceExt};

use super::cluster::client;
use super::wait::poll;

/// The field manager of everything the harness applies.
pub const FIELD_MANAGER: &str = "test-harness";

/// Every YAML document in `path` (a file, or each `*.yaml`/`*.yml` file of a
/// directory in name order), with the file it came from.
pub fn read_manifests(path: &Path) -> Vec<(PathBuf, DynamicObject)> {
    let files = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("reading directory {}: {e}", path.display()))
            .map(|entry| entry.expect("directory entry").path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "yml")
            })
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_owned()]
    };
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        objects.extend(
            parse_manifests(&text, &file.display().to_string())
                .into_iter()
                .map(|o| (file.clone(), o)),
        );
    }
    assert!(
        !objects.is_empty(),
        "no YAML documents in {}",
        path.display()
    );
    objects
}

/// The documents of a multi-document YAML string (`origin` names it in errors).
pub fn parse_manifests(yaml: &str, origin: &str) -> Vec<DynamicObject> {
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml)
        .unwrap_or_else(|e| panic!("parsing YAML in {origin}: {e}"));
    documents
        .into_iter()
        .filter(|doc| !doc.is_null())
        .enumerate()
        .map(|(i, doc)| {
            serde_json::from_value(doc).unwrap_or_else(|e| {
                panic!(
                    "document {} of {origin} is not a Kubernetes object: {e}",
                    i + 1
                )
            })
        })
        .collect()
}

/// Server-side applies every object (forcing ownership, so reruns and
/// concurrent identical applies converge). Namespaced objects without a
/// namespace go to `namespace`. Returns the objects as the server stored them.
pub async fn apply_objects(
    objects: &[DynamicObject],
    namespace: Option<&str>,
) -> Vec<DynamicObject> {
    apply_objects_on(&client(), objects, namespace).await
}

/// [`apply_objects`] on the cluster of `client` (a control plane a test
/// started for itself).
pub async fn apply_objects_on(
    client: &kube::Client,
    objects: &[DynamicObject],
    namespace: Option<&str>,
) -> Vec<DynamicObject> {
    let mut applied = Vec::new();
    for object in objects {
        let types = object
            .types
            .as_ref()
            .unwrap_or_else(|| panic!("object {} has no apiVersion/kind", object.name_any()));
        let gvk = GroupVersionKind::try_from(types)
            .unwrap_or_else(|e| panic!("object {}: {e}", object.name_any()));
        let (resource, capabilities) = discovery::pinned_kind(client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("the server does not serve {gvk:?}: {e}"));
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => {
                let ns = object
                    .namespace()
                    .or_else(|| namespace.map(str::to_owned))
                    .unwrap_or_else(|| {
                        panic!(
                            "{} {} is namespaced but has no namespace",
                            gvk.kind,
                            object.name_any()
                        )
                    });
                Api::namespaced_with(client.clone(), &ns, &resource)
            }
        };
        let name = object.name_any();
        let stored = api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(object),
            )
            .await
            .unwrap_or_else(|e| panic!("applying {} {name}: {e}", gvk.kind));
        applied.push(stored);
    }
    applied
}

/// [`read_manifests`] + [`apply_objects`].
pub async fn apply_path(path: impl AsRef<Path>, namespace: Option<&str>) -> Vec<DynamicObject> {
    let objects: Vec<DynamicObject> = read_manifests(path.as_ref())
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    apply_objects(&objects, namespace).await
}

/// Applies every manifest in `dir` (the repository's `crds/`, or a test
/// fixture) and waits until each CustomResourceDefinition among them is
/// `Established` and every served version answers a list request.
///
/// Safe to call from many tests of one binary: each directory is applied
/// once per process (concurrent first calls both apply, which converges).
pub async fn install_crds(dir: impl AsRef<Path>) -> Vec<CustomResourceDefinition> {
    static INSTALLED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let dir = dir.as_ref();
    let key = dir
        .canonicalize()
        .unwrap_or_else(|e| panic!("CRD directory {}: {e}", dir.display()));
    let objects: Vec<DynamicObject> = read_manifests(&key).into_iter().map(|(_, o)| o).collect();
    let already = INSTALLED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_default()
        .contains(&key);
    if !already {
        apply_objects(&objects, None).await;
    }
    let mut crds = Vec::new();
    for object in &objects {
        if object
            .types
            .as_ref()
            .is_some_and(|t| t.kind == "CustomResourceDefinition")
        {
            crds.push(wait_until_served(&object.name_any()).await);
        }
    }
    INSTALLED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_default()
        .insert(key);
    crds
}

/// Waits until the CRD `name` is established and all its served versions
/// can be listed (discovery lags behind `Established` a little).
pub async fn wait_until_served(name: &str) -> CustomResourceDefinition {
    wait_until_served_on(&client(), name).await
}

/// [`wait_until_served`] on the cluster of `client`.
pub async fn wait_until_served_on(client: &kube::Client, name: &str) -> CustomResourceDefinition {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    poll(
        &format!("CRD {name} to be established and served"),
        Duration::from_secs(60),
        || async {
            let crd = crds.get(name).await.map_err(|e| format!("GET: {e}"))?;
            let conditions = crd
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            let established = conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if !established {
                return Err(format!("conditions: {conditions:?}"));
            }
            for version in crd.spec.versions.iter().filter(|v| v.served) {
                let gvk =
                    GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
                let (resource, _) = discovery::pinned_kind(client, &gvk)
                    .await
                    .map_err(|e| format!("discovery of {}: {e}", version.name))?;
                Api::<DynamicObject>::all_with(client.clone(), &resource)
                    .list(&ListParams::default().limit(1))
                    .await
                    .map_err(|e| {
                        format!("listing {}/{}: {e}", crd.spec.names.plural, version.name)
                    })?;
            }
            Ok(crd)
        },
    )
    .await
}
