//! The admin kubeconfig: self-contained (certificates embedded), so it keeps
//! working when copied, and readable by kubectl and kube-rs alike.

use std::path::Path;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};

use crate::error::Error;
use crate::pki::{Pki, write_file};

/// Name of the cluster, user and context in the written kubeconfig.
pub const NAME: &str = "testenv";

/// Builds the admin kubeconfig for `server` (e.g. `https://127.0.0.1:6443`).
pub fn admin(server: &str, pki: &Pki) -> Kubeconfig {
    let cluster = Cluster {
        server: Some(server.into()),
        certificate_authority_data: Some(STANDARD.encode(&pki.ca_cert)),
        ..Cluster::default()
    };
    let auth_info = AuthInfo {
        client_certificate_data: Some(STANDARD.encode(&pki.admin_cert)),
        client_key_data: Some(STANDARD.encode(pki.admin_key.expose()).into()),
        ..AuthInfo::default()
    };
    single(cluster, NAME, auth_info)
}

/// A kubeconfig with one cluster, one user and one context (the cluster and
/// context named [`NAME`]), the user authenticating as `auth_info` says.
pub fn single(cluster: Cluster, user: &str, auth_info: AuthInfo) -> Kubeconfig {
    Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: NAME.into(),
            cluster: Some(cluster),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: user.into(),
            auth_info: Some(auth_info),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: NAME.into(),
            context: Some(Context {
                cluster: NAME.into(),
                user: Some(user.into()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(NAME.into()),
        ..Kubeconfig::default()
    }
}

/// Writes `kubeconfig` as YAML with mode 0600 (it holds credentials).
pub fn write(path: &Path, kubeconfig: &Kubeconfig) -> Result<(), Error> {
    let yaml = serde_saphyr::to_string(kubeconfig).map_err(|e| Error::Kubeconfig {
        path: path.to_owned(),
        message: format!("serializing: {e}"),
    })?;
    write_file(path, &yaml, 0o600)
}

/// A kube-rs client configuration from a kubeconfig file.
pub async fn load(path: &Path) -> Result<kube::Config, Error> {
    let err = |message: String| Error::Kubeconfig {
        path: path.to_owned(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| err(format!("reading: {e}")))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| err(format!("loading: {e}")))
}
