//! The client: one per ProviderConfig, cheap to clone. Requests go through
//! the pipeline in `transport.rs`; typed calls live with their domain
//! (`vm`, `storage`, `task`, ...).

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use url::Url;

use crate::auth::Auth;
use crate::config::{ClientConfig, RetryPolicy, TaskOptions};
use crate::error::{Error, Result};
use crate::form::Params;
use crate::hook::{RequestHook, WriteGate};
use crate::limit::Limiter;
use crate::observer::ObserverState;
use crate::request::{ApiPath, ApiRequest, upid_from_envelope};
use crate::retry::CallKind;
use crate::tls;
use crate::upid::Upid;

/// A Proxmox VE API client. Clones share connections, limits, the ticket
/// and the task observer.
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    base: Url,
    auth: Auth,
    limiter: Limiter,
    retry: RetryPolicy,
    tasks: TaskOptions,
    observer: ObserverState,
    hook: Option<RequestHook>,
    write_gate: Option<WriteGate>,
    /// Who the credentials authenticate as (`user@realm`, or
    /// `user@realm!tokenid` for a token): the user Proxmox writes into
    /// the UPIDs of the tasks this client starts.
    user: String,
}

/// `crossplane-provider-proxmox/<version>`, and ` (<agent>)` when given.
fn user_agent(agent: Option<&str>) -> String {
    let product = concat!("crossplane-provider-proxmox/", env!("CARGO_PKG_VERSION"));
    match agent {
        Some(agent) => format!("{product} ({agent})"),
        None => product.to_owned(),
    }
}

impl Client {
    /// Builds a client. Fails only on an unusable configuration (bad CA
    /// bundle, bad credentials encoding); nothing is sent yet.
    pub fn new(config: ClientConfig) -> Result<Self> {
        let tls = tls::client_config(&config.tls)?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .http1_only()
            .timeout(config.limits.request_timeout)
            .connect_timeout(config.limits.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .user_agent(user_agent(config.agent.as_deref()))
            .build()
            .map_err(|e| Error::config(format!("cannot build HTTP client: {e}")))?;
        let auth = Auth::new(&config.credentials, config.auth.ticket_refresh_after)?;
        let user = match &config.credentials {
            crate::config::Credentials::Token { token_id, .. } => token_id.clone(),
            crate::config::Credentials::Password { username, .. } => username.clone(),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base: config.api_base(),
                auth,
                limiter: Limiter::new(&config.limits),
                retry: config.retry.clone(),
                tasks: config.tasks.clone(),
                observer: ObserverState::default(),
                hook: config.request_hook.clone(),
                write_gate: config.write_gate.clone(),
                user,
            }),
        })
    }

    /// The user the tasks this client starts carry in their UPID
    /// (`Upid::user`): how a task of its own is told from another's.
    pub fn user(&self) -> &str {
        &self.inner.user
    }

    pub(crate) fn task_options(&self) -> &TaskOptions {
        &self.inner.tasks
    }

    pub(crate) fn observer_state(&self) -> &ObserverState {
        &self.inner.observer
    }

    /// GET `path` and decode `data`.
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        path: ApiPath,
        params: Params,
    ) -> Result<T> {
        let req = ApiRequest::get(path, params);
        let endpoint = req.endpoint();
        self.call(&req).await?.data(&endpoint)
    }

    /// A synchronous write; decodes `data` (usually `null`).
    pub(crate) async fn write<T: DeserializeOwned>(
        &self,
        method: Method,
        path: ApiPath,
        params: Params,
    ) -> Result<T> {
        let req = ApiRequest::new(method, path, params, CallKind::Write);
        let endpoint = req.endpoint();
        self.call(&req).await?.data(&endpoint)
    }

    /// A synchronous write whose answer carries nothing (`null`).
    pub(crate) async fn write_null(
        &self,
        method: Method,
        path: ApiPath,
        params: Params,
    ) -> Result<()> {
        let _: serde_json::Value = self.write(method, path, params).await?;
        Ok(())
    }

    /// A write that starts a task; returns its UPID. An answer without a
    /// well-formed UPID is an error, never a silent success.
    pub(crate) async fn start_task(
        &self,
        method: Method,
        path: ApiPath,
        params: Params,
    ) -> Result<Upid> {
        let node = req_node(&path);
        let req = ApiRequest::new(method, path, params, CallKind::StartsTask);
        let result = self.call(&req).await;
        let upid = result.and_then(|envelope| upid_from_envelope(&req.endpoint(), &envelope.body));
        // Whatever the answer, a task may now run on the node: the next
        // list of its running tasks must be fetched after this moment.
        if let Some(node) = node {
            self.observer_state().dispatched(&node, upid.as_ref().ok());
        }
        upid
    }

    /// A `multipart/form-data` upload that starts a task; returns its UPID.
    pub(crate) async fn start_upload(
        &self,
        path: ApiPath,
        params: Params,
        upload: crate::request::Upload,
    ) -> Result<Upid> {
        let node = req_node(&path);
        let mut req = ApiRequest::new(Method::POST, path, params, CallKind::StartsTask);
        req.upload = Some(upload);
        let result = self.call(&req).await;
        let upid = result.and_then(|envelope| upid_from_envelope(&req.endpoint(), &envelope.body));
        if let Some(node) = node {
            self.observer_state().dispatched(&node, upid.as_ref().ok());
        }
        upid
    }

    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    pub(crate) fn auth(&self) -> &Auth {
        &self.inner.auth
    }

    pub(crate) fn limiter(&self) -> &Limiter {
        &self.inner.limiter
    }

    pub(crate) fn retry_policy(&self) -> &RetryPolicy {
        &self.inner.retry
    }

    pub(crate) fn base(&self) -> &Url {
        &self.inner.base
    }

    pub(crate) fn write_gate(&self) -> Option<&WriteGate> {
        self.inner.write_gate.as_ref()
    }

    pub(crate) fn hook(&self) -> Option<&RequestHook> {
        self.inner.hook.as_ref()
    }
}

/// The node a `/nodes/{node}/...` path addresses.
fn req_node(path: &ApiPath) -> Option<String> {
    let rest = path.rendered.strip_prefix("/nodes/")?;
    let node = rest.split('/').next()?;
    (!node.is_empty()).then(|| node.to_owned())
}
