//! The request pipeline: authentication, limits, sending, classification,
//! retries and tracing. Every API call goes through [`Client::call`].

use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, COOKIE, HeaderValue};
use tokio::time::Instant;
use tracing::Instrument;

use crate::auth::{self, Auth, LoginWith};
use crate::classify::classify;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::form::Params;
use crate::hook::RequestRecord;
use crate::limit::Priority;
use crate::request::{ApiPath, ApiRequest, Envelope};
use crate::retry::{self, CallKind};
use crate::secret::{Secret, redact};
use crate::tls;

impl Client {
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
                && let Auth::Ticket(cache) = &self.auth()
            {
                tracing::debug!(endpoint = %req.endpoint(), "ticket rejected; logging in again");
                cache.invalidate(generation).await;
                relogged = true;
                continue;
            }
            if !retry::should_retry(self.retry_policy(), req.kind, &err, attempt) {
                return Err(err);
            }
            let delay = retry::jittered_delay(self.retry_policy(), attempt);
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
            let mut builder = self.builder(req)?;
            match &self.auth() {
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
            let secrets = self.secrets(req).await;
            self.execute(builder, req, &secrets).await
        }
        .await;
        (result, generation)
    }

    /// The request without authentication: parameters in the query string
    /// (GET, DELETE) or as a form body (POST, PUT).
    fn builder(&self, req: &ApiRequest) -> Result<reqwest::RequestBuilder> {
        let rendered = req.path.rendered.trim_start_matches('/');
        let mut url = self
            .base()
            .join(rendered)
            .map_err(|e| Error::config(format!("bad API path {}: {e}", req.path.template)))?;
        if let Some(upload) = &req.upload {
            let content_type = HeaderValue::from_str(&crate::request::Upload::content_type())
                .map_err(|e| Error::config(format!("multipart content type: {e}")))?;
            return Ok(self
                .http()
                .request(req.method.clone(), url)
                .header(CONTENT_TYPE, content_type)
                .body(upload.body(&req.params)));
        }
        if has_body(&req.method) {
            return Ok(self
                .http()
                .request(req.method.clone(), url)
                .header(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/x-www-form-urlencoded"),
                )
                .body(req.params.to_form()));
        }
        if !req.params.is_empty() {
            url.query_pairs_mut().extend_pairs(req.params.pairs());
        }
        Ok(self.http().request(req.method.clone(), url))
    }

    async fn secrets(&self, req: &ApiRequest) -> Vec<Secret> {
        let mut secrets: Vec<Secret> = req.params.secrets().to_vec();
        match &self.auth() {
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
        let priority = if req.method == Method::GET {
            Priority::Read
        } else {
            Priority::Write
        };
        let _slot = self
            .limiter()
            .acquire(priority)
            .instrument(span.clone())
            .await;
        // The caller's last word, after any wait for the slot.
        if priority == Priority::Write {
            if self.write_gate().is_some_and(|g| !g.open()) {
                return Err(Error::NotSent {
                    endpoint: req.endpoint(),
                });
            }
            // When the gate let it through, with the concrete path: a write
            // can still reach Proxmox later than this (the process paused
            // before its bytes left), and this line says when it was let go.
            let base = self.base();
            tracing::debug!(
                method = %req.method,
                server = %format_args!(
                    "{}:{}",
                    base.host_str().unwrap_or_default(),
                    base.port_or_known_default().unwrap_or_default()
                ),
                path = %req.path.rendered,
                "sending a write"
            );
        }
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
        if let Some(hook) = self.hook() {
            hook.call(&RequestRecord {
                method: req.method.as_str(),
                path: &req.path.template,
                status: outcome.as_ref().ok().map(|(status, _, _)| *status),
                elapsed,
            });
        }
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
        let reason = reason.map(|r| redact(&r, secrets));
        let body = redact(&String::from_utf8_lossy(&body), secrets);
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
            match self.execute(self.builder(&req)?, &req, &secrets).await {
                Ok(mut envelope) => {
                    let data: LoginData = envelope.data("POST /access/ticket")?;
                    if data.need_tfa.unwrap_or(0) != 0 {
                        return Err(Error::Unauthorized {
                            message: "the user needs a second factor (TFA); use an API token"
                                .into(),
                        });
                    }
                    return Ok((Secret::new(data.ticket), Secret::new(data.csrf)));
                }
                Err(err) if retry::should_retry(self.retry_policy(), req.kind, &err, attempt) => {
                    tokio::time::sleep(retry::jittered_delay(self.retry_policy(), attempt)).await;
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
    match err {
        Error::Transient {
            status,
            message,
            may_have_run,
        } => Error::Transient {
            status,
            message: redact(&message, secrets),
            may_have_run,
        },
        Error::Tls { message } => Error::Tls {
            message: redact(&message, secrets),
        },
        other => other,
    }
}
