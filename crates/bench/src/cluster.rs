//! The real local control plane (hack/testenv) with an audit log of the
//! provider's requests, the CRDs, and the provider's own identity: the
//! ServiceAccount and RBAC of `deploy/provider/`, with a token of its own,
//! so that every API server request it makes is one line of the audit log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, Cluster as KubeCluster, KubeConfigOptions};
use kube::{Api, Client};
use testenv::{AuditPolicy, ControlPlane, Options};

/// The provider's namespace, ServiceAccount and user, as deployed.
pub const PROVIDER_NAMESPACE: &str = "crossplane-system";
pub const PROVIDER_ACCOUNT: &str = "crossplane-provider-proxmox";
pub const FIELD_MANAGER: &str = "provider-bench";

pub fn provider_user() -> String {
    format!("system:serviceaccount:{PROVIDER_NAMESPACE}:{PROVIDER_ACCOUNT}")
}

pub struct Cluster {
    plane: ControlPlane,
    pub admin: Client,
    /// A kubeconfig authenticating as the provider's ServiceAccount.
    pub provider_kubeconfig: PathBuf,
}

impl Cluster {
    pub async fn start(dir: &Path) -> anyhow::Result<Self> {
        let user = provider_user();
        let plane =
            ControlPlane::start(Options::attached().with_audit(AuditPolicy::requests_of(&[&user])))
                .await
                .context("starting the control plane")?;
        let admin = Client::try_from(plane.kube_config().await?).context("admin client")?;
        install_crds(&admin).await?;
        for file in ["namespace.yaml", "serviceaccount.yaml", "rbac.yaml"] {
            kubectl_apply(
                &plane,
                &testenv::repo_root().join("deploy/provider").join(file),
            )
            .await?;
        }
        let provider_kubeconfig = dir.join("provider.kubeconfig");
        write_provider_kubeconfig(&plane, &admin, &provider_kubeconfig).await?;
        wait_for_rbac(&provider_kubeconfig).await?;
        Ok(Self {
            plane,
            admin,
            provider_kubeconfig,
        })
    }

    /// The control plane's processes (kube-apiserver and etcd).
    pub fn pids(&self) -> Vec<u32> {
        self.plane.pids()
    }

    /// The apiserver's audit log.
    pub fn audit_log(&self) -> anyhow::Result<&Path> {
        self.plane
            .audit_log()
            .context("the control plane has no audit log")
    }

    /// Another kubeconfig of the provider's ServiceAccount, at `path`, with
    /// a token of its own: the same user and RBAC, but the audit log tells
    /// its requests apart by the token's `jti` (returned, if it has one).
    pub async fn another_provider_kubeconfig(&self, path: &Path) -> anyhow::Result<Option<String>> {
        let token = write_provider_kubeconfig(&self.plane, &self.admin, path).await?;
        Ok(token_jti(&token))
    }

    /// The version line of the kube-apiserver in use.
    pub async fn apiserver_version(&self) -> String {
        match self.admin.apiserver_version().await {
            Ok(info) => info.git_version,
            Err(e) => format!("unknown ({e})"),
        }
    }
}

async fn install_crds(admin: &Client) -> anyhow::Result<()> {
    let crds = Api::<CustomResourceDefinition>::all(admin.clone());
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    for (_, crd) in provider_proxmox::api::crd::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(&name, &apply, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("installing CRD {name}"))?;
        crate::wait::until(
            &format!("CRD {name} Established"),
            Duration::from_secs(60),
            || {
                let crds = crds.clone();
                let name = name.clone();
                async move {
                    let crd = crds.get(&name).await.ok()?;
                    let established = crd
                        .status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True");
                    established.then_some(())
                }
            },
        )
        .await?;
    }
    Ok(())
}

async fn kubectl_apply(plane: &ControlPlane, file: &Path) -> anyhow::Result<()> {
    let output = tokio::process::Command::new(&plane.binaries().kubectl)
        .arg("--kubeconfig")
        .arg(plane.kubeconfig_path())
        .args([
            "apply",
            "--server-side",
            "--field-manager",
            FIELD_MANAGER,
            "-f",
        ])
        .arg(file)
        .output()
        .await
        .context("running kubectl")?;
    if !output.status.success() {
        bail!(
            "kubectl apply -f {}: {}",
            file.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// A one-day token of the provider's ServiceAccount (TokenRequest API), in
/// a kubeconfig of its own; returns the token.
async fn write_provider_kubeconfig(
    plane: &ControlPlane,
    admin: &Client,
    path: &Path,
) -> anyhow::Result<String> {
    let accounts = Api::<ServiceAccount>::namespaced(admin.clone(), PROVIDER_NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(24 * 3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued = accounts
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            PROVIDER_ACCOUNT,
            &PostParams::default(),
            &request,
        )
        .await
        .context("requesting a token for the provider's ServiceAccount")?;
    let token = issued.status.map(|s| s.token).unwrap_or_default();
    if token.is_empty() {
        bail!("the TokenRequest returned no token");
    }
    let cluster = KubeCluster {
        server: Some(plane.server().to_owned()),
        certificate_authority_data: Some(
            base64::engine::general_purpose::STANDARD.encode(plane.ca_cert_pem()),
        ),
        ..KubeCluster::default()
    };
    let auth = AuthInfo {
        token: Some(token.clone().into()),
        ..AuthInfo::default()
    };
    let kubeconfig = testenv::kubeconfig::single(cluster, PROVIDER_ACCOUNT, auth);
    testenv::kubeconfig::write(path, &kubeconfig).context("writing the provider's kubeconfig")?;
    Ok(token)
}

/// The `jti` claim of a JWT (its payload is not verified: the bench only
/// matches it against the audit log's credential id).
fn token_jti(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("jti")?.as_str().map(str::to_owned)
}

/// RBAC decisions come from an informer cache: wait until the provider's
/// identity may list ProxmoxVMs (before any measured phase begins).
async fn wait_for_rbac(kubeconfig: &Path) -> anyhow::Result<()> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let vms = Api::<provider_proxmox::api::ProxmoxVM>::all(client);
    crate::wait::until("the provider's RBAC", Duration::from_secs(60), || {
        let vms = vms.clone();
        async move {
            vms.list_metadata(&Default::default())
                .await
                .ok()
                .map(|_| ())
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokens_jti_is_read_from_its_payload() {
        let encode = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let token = format!(
            "{}.{}.sig",
            encode(r#"{"alg":"RS256"}"#),
            encode(r#"{"sub":"system:serviceaccount:a:b","jti":"9d2e-41"}"#)
        );
        assert_eq!(token_jti(&token).as_deref(), Some("9d2e-41"));
        let without = format!("x.{}.sig", encode(r#"{"sub":"a"}"#));
        assert_eq!(token_jti(&without), None);
        assert_eq!(token_jti("not a token"), None);
    }
}
