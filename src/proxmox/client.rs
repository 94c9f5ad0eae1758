//! The client: one per ProviderConfig, cheap to clone, and the single place
//! where requests are authenticated, limited, traced, classified and retried.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, COOKIE, HeaderValue};
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tracing::Instrument;
use url::Url;

use crate::proxmox::auth::{self, Auth, LoginWith};
use crate::proxmox::config::{ClientConfig, RetryPolicy, TaskOptions};
use crate::proxmox::error::{Error, Result, classify};
use crate::proxmox::form::Params;
use crate::proxmox::limit::Limiter;
use crate::proxmox::observer::ObserverState;
use crate::proxmox::retry::{self, CallKind};
use crate::proxmox::secret::{Secret, redact};
use crate::proxmox::tls;
use crate::proxmox::upid::Upid;

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
}

/// Characters escaped in a path segment: everything that would end or
/// restructure the segment, and `%` so a UPID's `%3A` survives.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\')
    .add(b'^')
    .add(b'|')
    .add(b'[')
    .add(b']');

/// An API path: the template for logs and metrics, the rendered path for
/// the wire.
#[derive(Clone, Debug)]
pub(crate) struct ApiPath {
    pub(crate) template: Cow<'static, str>,
    pub(crate) rendered: String,
}

impl ApiPath {
    /// Fills `{...}` placeholders in order, percent-encoding each value.
    pub(crate) fn new(template: &'static str, args: &[&str]) -> Self {
        let mut rendered = String::with_capacity(template.len() + 32);
        let mut args = args.iter();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            rendered.push_str(&rest[..open]);
            let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
            let arg = args.next().copied().unwrap_or_default();
            rendered.extend(utf8_percent_encode(arg, SEGMENT));
            rest = &rest[close..];
        }
        rendered.push_str(rest);
        Self {
            template: Cow::Borrowed(template),
            rendered,
        }
    }

    /// A path given literally (no placeholders): it is its own template.
    pub(crate) fn literal(path: &str) -> Self {
        Self {
            template: Cow::Owned(path.to_owned()),
            rendered: path.to_owned(),
        }
    }
}

/// One API request, before authentication.
#[derive(Debug)]
pub(crate) struct ApiRequest {
    pub(crate) method: Method,
    pub(crate) path: ApiPath,
    pub(crate) params: Params,
    pub(crate) kind: CallKind,
}

impl ApiRequest {
    pub(crate) fn get(path: ApiPath, params: Params) -> Self {
        Self {
            method: Method::GET,
            path,
            params,
            kind: CallKind::Read,
        }
    }

    pub(crate) fn new(method: Method, path: ApiPath, params: Params, kind: CallKind) -> Self {
        Self {
            method,
            path,
            params,
            kind,
        }
    }

    fn endpoint(&self) -> String {
        format!("{} {}", self.method, self.path.template)
    }
}

/// A decoded success body: `data` plus the whole object for the rare
/// endpoints with extra keys (`total` on the task log).
#[derive(Debug)]
pub(crate) struct Envelope {
    pub(crate) body: serde_json::Value,
}

impl Envelope {
    pub(crate) fn data<T: DeserializeOwned>(&self, endpoint: &str) -> Result<T> {
        let data = self
            .body
            .get("data")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        serde_json::from_value(data)
            .map_err(|e| Error::protocol(format!("unexpected answer from {endpoint}: {e}")))
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
            .user_agent(concat!(
                "crossplane-provider-proxmox/",
                env!("CARGO_PKG_VERSION")
            ))
            .build()
            .map_err(|e| Error::config(format!("cannot build HTTP client: {e}")))?;
        let auth = Auth::new(&config.credentials, config.auth.ticket_refresh_after)?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base: config.api_base(),
                auth,
                limiter: Limiter::new(&config.limits),
                retry: config.retry.clone(),
                tasks: config.tasks.clone(),
                observer: ObserverState::default(),
            }),
        })
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

    /// A write that starts a task; returns its UPID. An answer without a
    /// well-formed UPID is an error, never a silent success.
    pub(crate) async fn start_task(
        &self,
        method: Method,
        path: ApiPath,
        params: Params,
    ) -> Result<Upid> {
        let req = ApiRequest::new(method, path, params, CallKind::StartsTask);
        let envelope = self.call(&req).await?;
        upid_from_envelope(&req.endpoint(), &envelope.body)
    }

    /// Calls any endpoint under `/api2/json` and returns `data` as JSON:
    /// the escape hatch for endpoints without a typed method. `path` is
    /// used as given (escape its segments yourself); `kind` decides what
    /// may be retried (see [`crate::proxmox::retry`]).
    pub async fn request_json(
        &self,
        method: Method,
        path: &str,
        params: Params,
        kind: CallKind,
    ) -> Result<serde_json::Value> {
        let req = ApiRequest::new(method, ApiPath::literal(path), params, kind);
        let endpoint = req.endpoint();
        self.call(&req).await?.data(&endpoint)
    }

    /// Sends a request with authentication, limits, retries and tracing.
    pub(crate) async fn call(&self, req: &ApiRequest) -> Result<Envelope> {
        let mut attempt = 1;
        let mut relogged = false;
        loop {
            let (result, ticket_generation) = self.send_once(req).await;
            let err = match result {
                Ok(envelope) => return Ok(envelope),
                Err(err) => err,
            };
            // A rejected ticket (expired, server restarted): log in afresh
            // once. Authentication fails before any handler runs, so even a
            // task-starting request is safe to resend.
            if let (Error::Unauthorized { .. }, Some(generation), false) =
                (&err, ticket_generation, relogged)
                && let Auth::Ticket(cache) = &self.inner.auth
            {
                tracing::debug!(endpoint = %req.endpoint(), "ticket rejected; logging in again");
                cache.invalidate(generation).await;
                relogged = true;
                continue;
            }
            if !retry::should_retry(&self.inner.retry, req.kind, &err, attempt) {
                return Err(err);
            }
            let delay = retry::jittered_delay(&self.inner.retry, attempt);
            tracing::warn!(
                endpoint = %req.endpoint(),
                attempt,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                error = %err,
                "retrying Proxmox request"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// One attempt. Also returns the ticket generation used, so a 401 can
    /// invalidate exactly that ticket.
    async fn send_once(&self, req: &ApiRequest) -> (Result<Envelope>, Option<u64>) {
        let mut generation = None;
        let result = async {
            let mut builder = self.inner.http.request(req.method.clone(), self.url(req)?);
            match &self.inner.auth {
                Auth::Token { header, .. } => {
                    builder = builder.header(reqwest::header::AUTHORIZATION, header.clone());
                }
                Auth::Ticket(cache) => {
                    let ticket = cache
                        .get(|with| {
                            let password = match with {
                                LoginWith::Password(p) | LoginWith::OldTicket(p) => p.clone(),
                            };
                            self.login(cache.username(), password)
                        })
                        .await?;
                    generation = Some(ticket.generation);
                    builder = builder.header(COOKIE, auth::cookie_header(&ticket)?);
                    if req.method != Method::GET {
                        builder =
                            builder.header("CSRFPreventionToken", auth::csrf_header(&ticket)?);
                    }
                }
            }
            if has_body(&req.method) {
                builder = builder
                    .header(
                        CONTENT_TYPE,
                        HeaderValue::from_static("application/x-www-form-urlencoded"),
                    )
                    .body(req.params.to_form());
            }
            let secrets = self.secrets(req).await;
            self.execute(builder, req, &secrets).await
        }
        .await;
        (result, generation)
    }

    fn url(&self, req: &ApiRequest) -> Result<Url> {
        let rendered = req.path.rendered.trim_start_matches('/');
        let mut url = self
            .inner
            .base
            .join(rendered)
            .map_err(|e| Error::config(format!("bad API path {}: {e}", req.path.template)))?;
        if !has_body(&req.method) && !req.params.is_empty() {
            url.query_pairs_mut().extend_pairs(req.params.pairs());
        }
        Ok(url)
    }

    async fn secrets(&self, req: &ApiRequest) -> Vec<Secret> {
        let mut secrets: Vec<Secret> = req.params.secrets().to_vec();
        match &self.inner.auth {
            Auth::Token { secret, .. } => secrets.push(secret.clone()),
            Auth::Ticket(cache) => secrets.extend(cache.secrets().await),
        }
        secrets
    }

    /// Sends a built request under the limiter and classifies the answer.
    async fn execute(
        &self,
        builder: reqwest::RequestBuilder,
        req: &ApiRequest,
        secrets: &[Secret],
    ) -> Result<Envelope> {
        let span = tracing::debug_span!(
            "pve_request",
            method = %req.method,
            path = %req.path.template,
            status = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        let _slot = self.inner.limiter.acquire().instrument(span.clone()).await;
        let started = Instant::now();
        let outcome = async {
            let response = builder.send().await.map_err(transport_error)?;
            let status = response.status().as_u16();
            let reason = response
                .extensions()
                .get::<hyper::ext::ReasonPhrase>()
                .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
            let body = response.bytes().await.map_err(transport_error)?;
            Ok::<_, Error>((status, reason, body))
        }
        .instrument(span.clone())
        .await;
        let elapsed = started.elapsed();
        let _enter = span.enter();
        span.record(
            "duration_ms",
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        );
        let (status, reason, body) = match outcome {
            Ok(parts) => parts,
            Err(err) => {
                let err = redact_error(err, secrets);
                tracing::debug!(error = %err, "request failed");
                return Err(err);
            }
        };
        span.record("status", status);
        tracing::debug!("proxmox answered");
        if (200..300).contains(&status) {
            let body: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
                Error::protocol(format!("{} answered non-JSON ({e})", req.endpoint()))
            })?;
            return Ok(Envelope { body });
        }
        let refs: Vec<&Secret> = secrets.iter().collect();
        let reason = reason.map(|r| redact(&r, &refs));
        let body = redact(&String::from_utf8_lossy(&body), &refs);
        Err(classify(status, reason.as_deref(), body.as_bytes()))
    }

    /// `POST /access/ticket`, outside the retry loop of the caller (it has
    /// its own), returning `(ticket, csrf)`.
    async fn login(&self, username: &str, password: Secret) -> Result<(Secret, Secret)> {
        let params = Params::new()
            .text("username", username)
            .secret("password", &password);
        let req = ApiRequest::new(
            Method::POST,
            ApiPath::new("/access/ticket", &[]),
            params,
            CallKind::Write,
        );
        let secrets = vec![password.clone()];
        let mut attempt = 1;
        loop {
            let url = self.url(&req)?;
            let builder = self
                .inner
                .http
                .post(url)
                .header(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/x-www-form-urlencoded"),
                )
                .body(req.params.to_form());
            match self.execute(builder, &req, &secrets).await {
                Ok(envelope) => {
                    let data: LoginData = envelope.data("POST /access/ticket")?;
                    if data.need_tfa.unwrap_or(0) != 0 {
                        return Err(Error::Unauthorized {
                            message: "the user needs a second factor (TFA); use an API token"
                                .into(),
                        });
                    }
                    return Ok((Secret::new(data.ticket), Secret::new(data.csrf)));
                }
                Err(err) if retry::should_retry(&self.inner.retry, req.kind, &err, attempt) => {
                    tokio::time::sleep(retry::jittered_delay(&self.inner.retry, attempt)).await;
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }
}

#[derive(serde::Deserialize)]
struct LoginData {
    ticket: String,
    #[serde(rename = "CSRFPreventionToken")]
    csrf: String,
    #[serde(rename = "NeedTFA")]
    need_tfa: Option<u8>,
}

fn has_body(method: &Method) -> bool {
    method == Method::POST || method == Method::PUT
}

/// `{"data":"UPID:..."}` → the UPID; anything else is an error naming the
/// endpoint (an old server, a proxy page, or a sync answer).
pub(crate) fn upid_from_envelope(endpoint: &str, body: &serde_json::Value) -> Result<Upid> {
    match body.get("data") {
        Some(serde_json::Value::String(s)) => Upid::parse(s)
            .map_err(|e| Error::protocol(format!("{endpoint} returned a malformed task id: {e}"))),
        _ => {
            let mut text = body.to_string();
            text.truncate(200);
            Err(Error::MissingUpid {
                endpoint: endpoint.to_owned(),
                body: text,
            })
        }
    }
}

/// Maps a reqwest failure to our taxonomy, surfacing TLS problems.
fn transport_error(err: reqwest::Error) -> Error {
    if let Some(message) = tls::describe_tls_error(&err) {
        return Error::Tls { message };
    }
    let message = error_chain(&err);
    Error::Transient {
        status: None,
        // A failed connect never reached the server; anything later might
        // have (the request may be written before the reset or timeout).
        may_have_run: !err.is_connect(),
        message,
    }
}

fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut current = err.source();
    while let Some(e) = current {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
}

fn redact_error(err: Error, secrets: &[Secret]) -> Error {
    let refs: Vec<&Secret> = secrets.iter().collect();
    match err {
        Error::Transient {
            status,
            message,
            may_have_run,
        } => Error::Transient {
            status,
            message: redact(&message, &refs),
            may_have_run,
        },
        Error::Tls { message } => Error::Tls {
            message: redact(&message, &refs),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn path_rendering_escapes_segments() {
        let p = ApiPath::new("/nodes/{node}/qemu/{vmid}/config", &["pve", "100"]);
        assert_eq!(p.rendered, "/nodes/pve/qemu/100/config");
        assert_eq!(p.template, "/nodes/{node}/qemu/{vmid}/config");
        let upid = "UPID:pve:000934AF:0D015579:68BF3A41:download:a%3Ab.iso:ci@pve!prov:";
        let p = ApiPath::new("/nodes/{node}/tasks/{upid}/status", &["pve", upid]);
        assert_eq!(
            p.rendered,
            "/nodes/pve/tasks/UPID:pve:000934AF:0D015579:68BF3A41:download:a%253Ab.iso:ci@pve!prov:/status"
        );
        let p = ApiPath::new("/x/{a}", &["a/b c"]);
        assert_eq!(p.rendered, "/x/a%2Fb%20c");
    }

    #[test]
    fn upid_envelopes() {
        let ok = json!({"data":"UPID:pve:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam:"});
        assert_eq!(
            upid_from_envelope("POST /x", &ok).unwrap().task_type(),
            "qmcreate"
        );
        for missing in [json!({"data": null}), json!({}), json!({"data": {"a": 1}})] {
            let err = upid_from_envelope("POST /x", &missing).unwrap_err();
            assert!(
                matches!(err, Error::MissingUpid { ref endpoint, .. } if endpoint == "POST /x"),
                "{err:?}"
            );
        }
        let bad = json!({"data":"UPID:broken"});
        assert!(matches!(
            upid_from_envelope("POST /x", &bad),
            Err(Error::Protocol { .. })
        ));
    }
}
