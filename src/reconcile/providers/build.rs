//! A Proxmox client configuration from a provider config and its Secrets.

use k8s_openapi::api::core::v1::Secret;

use super::Problem;
use crate::api::{
    ProviderSettings,
    provider_config::{
        ConfigReason, SECRET_KEY_PASSWORD, SECRET_KEY_TOKEN_ID, SECRET_KEY_TOKEN_SECRET,
        SECRET_KEY_USERNAME, Timing,
    },
};
use pve_client::{
    Client, ClientConfig, Credentials, Fingerprint, ObserveMode, RequestHook, RetryPolicy,
    Secret as PveSecret,
};

/// How every client this process builds observes tasks. A process-wide
/// switch only for `make bench`, which compares batched observation with
/// per-task polling (`proxmox-provider run --task-observe-mode`, hidden):
/// users have no reason to pick the costlier mode, so it is no config field.
static OBSERVE_MODE: std::sync::OnceLock<ObserveMode> = std::sync::OnceLock::new();

/// Sets the task observation of all clients built from now on; `false` when
/// it was already set.
pub fn set_task_observe_mode(mode: ObserveMode) -> bool {
    OBSERVE_MODE.set(mode).is_ok()
}

/// Who this process is (its replica identity), named in the `User-Agent`
/// of every Proxmox request so a proxy's or the simulator's request log
/// tells the replicas apart. Set once by `proxmox-provider run`.
static AGENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names `identity` in the `User-Agent` of all clients built from now on;
/// `false` when it was already set.
pub fn set_agent(identity: &str) -> bool {
    AGENT.set(identity.to_owned()).is_ok()
}

/// A Secret's value as text, trimmed (values written from files often end
/// in a newline).
pub(crate) fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    let text = String::from_utf8(bytes.0.clone()).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn credentials(secret: &Secret) -> Result<Credentials, Problem> {
    let name = secret.metadata.name.as_deref().unwrap_or_default();
    let invalid = |what: String| Problem::new(ConfigReason::InvalidCredentials, what);
    match (
        secret_value(secret, SECRET_KEY_TOKEN_ID),
        secret_value(secret, SECRET_KEY_TOKEN_SECRET),
        secret_value(secret, SECRET_KEY_USERNAME),
        secret_value(secret, SECRET_KEY_PASSWORD),
    ) {
        (Some(token_id), Some(token), _, _) => {
            if !token_id.contains('@') || !token_id.contains('!') {
                return Err(invalid(format!(
                    "the credentials Secret {name}: {SECRET_KEY_TOKEN_ID} must look like USER@REALM!TOKENID"
                )));
            }
            // Both travel in an HTTP header, which takes visible ASCII only.
            if !header_safe(&token_id) || !header_safe(&token) {
                return Err(invalid(format!(
                    "the credentials Secret {name}: {SECRET_KEY_TOKEN_ID} and {SECRET_KEY_TOKEN_SECRET} may hold printable ASCII only"
                )));
            }
            Ok(Credentials::Token {
                token_id,
                secret: PveSecret::new(token),
            })
        }
        (None, None, Some(username), Some(password)) => {
            if !username.contains('@') {
                return Err(invalid(format!(
                    "the credentials Secret {name}: {SECRET_KEY_USERNAME} must look like USER@REALM"
                )));
            }
            Ok(Credentials::Password {
                username,
                password: PveSecret::new(password),
            })
        }
        // Any other combination of keys present and absent.
        (_, _, _, _) => Err(invalid(format!(
            "the credentials Secret {name} must hold the keys {SECRET_KEY_TOKEN_ID} and {SECRET_KEY_TOKEN_SECRET} (an API token), or {SECRET_KEY_USERNAME} and {SECRET_KEY_PASSWORD}"
        ))),
    }
}

fn header_safe(value: &str) -> bool {
    value.chars().all(|c| c == ' ' || c.is_ascii_graphic())
}

/// The client configuration; `Err` says what is wrong, for people.
pub(super) fn client_config(
    settings: &ProviderSettings,
    credentials_secret: &Secret,
    ca_secret: Option<(&Secret, &str)>,
    timing: &Timing,
    hook: RequestHook,
) -> Result<ClientConfig, Problem> {
    let mut config = ClientConfig::new(&settings.endpoint, credentials(credentials_secret)?)
        .map_err(|e| {
            Problem::new(
                ConfigReason::InvalidConfig,
                format!("endpoint {:?}: {e}", settings.endpoint),
            )
        })?;
    if config.endpoint.scheme() == "http" && !settings.tls.insecure_allow_plain_http {
        return Err(Problem::new(
            ConfigReason::InvalidConfig,
            crate::api::provider_config::PLAIN_HTTP_REFUSED,
        ));
    }
    let tls_problem = |message: String| Problem::new(ConfigReason::TlsError, message);
    let tls = &settings.tls;
    if let Some(fp) = &tls.fingerprint {
        let fp: Fingerprint = fp
            .parse()
            .map_err(|e: pve_client::Error| tls_problem(e.to_string()))?;
        config.tls.pinned_fingerprints = vec![fp];
    }
    config.tls.ca_pem = match (&tls.ca_bundle, ca_secret) {
        (Some(pem), _) => Some(pem.clone()),
        (None, Some((secret, key))) => Some(secret_value(secret, key).ok_or_else(|| {
            tls_problem(format!(
                "the CA bundle Secret {} has no key {key}",
                secret.metadata.name.as_deref().unwrap_or_default()
            ))
        })?),
        (None, None) => None,
    };
    config.tls.insecure_skip_verify = tls.insecure_skip_tls_verify;
    let limits = &settings.limits;
    config.limits.max_concurrent_requests = limits.max_concurrent_requests as usize;
    config.limits.requests_per_second = f64::from(limits.requests_per_second);
    config.limits.burst = limits.requests_per_second.saturating_mul(2);
    // A lock is reported on the resource and retried on a later pass, not
    // waited out inside one.
    config.retry = RetryPolicy {
        retry_locked: false,
        ..RetryPolicy::default()
    };
    config.tasks.poll_interval = timing.poll_interval;
    config.tasks.task_timeout = timing.task_timeout;
    config.tasks.observe_mode = OBSERVE_MODE.get().copied().unwrap_or_default();
    config.request_hook = Some(hook);
    config.agent = AGENT.get().cloned();
    Ok(config)
}

/// The client. Credentials and the endpoint were checked when the
/// configuration was made, so what is left to fail is the TLS setup (an
/// unreadable CA bundle).
pub(super) fn client(config: ClientConfig) -> Result<Client, Problem> {
    Client::new(config).map_err(|e| {
        Problem::new(
            ConfigReason::TlsError,
            format!("the CA bundle (tls.caBundle or tls.caBundleSecretRef) cannot be used: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some("pve".into());
        s.data = Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect::<BTreeMap<_, _>>(),
        );
        s
    }

    fn settings(extra: serde_json::Value) -> ProviderSettings {
        let mut v = serde_json::json!({
            "endpoint": "https://pve.example:8006",
            "credentials": {"secretRef": {"name": "pve"}},
        });
        if let (Some(obj), Some(more)) = (v.as_object_mut(), extra.as_object()) {
            obj.extend(more.clone());
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn token_or_password_from_the_secret() {
        let token = secret(&[("tokenId", "ci@pve!prov\n"), ("secret", "s3cr3t")]);
        match credentials(&token).unwrap() {
            Credentials::Token { token_id, secret } => {
                assert_eq!(token_id, "ci@pve!prov");
                assert_eq!(secret.expose(), "s3cr3t");
            }
            other => panic!("{other:?}"),
        }
        let user = secret(&[("username", "root@pam"), ("password", "pw")]);
        assert!(matches!(
            credentials(&user),
            Ok(Credentials::Password { .. })
        ));
        let err = credentials(&secret(&[("tokenId", "x")])).unwrap_err();
        assert_eq!(err.reason, ConfigReason::InvalidCredentials);
        assert!(err.message.contains("tokenId and secret"), "{err:?}");
        for bad in [
            secret(&[("tokenId", "no-realm"), ("secret", "s3cr3t")]),
            secret(&[("tokenId", "a@pve!t"), ("secret", "s3cr\u{7f}t")]),
            secret(&[("username", "root"), ("password", "s3cr3t")]),
        ] {
            let err = credentials(&bad).unwrap_err();
            assert_eq!(err.reason, ConfigReason::InvalidCredentials, "{err:?}");
            assert!(!err.message.contains("s3cr"), "no secret: {err:?}");
        }
    }

    #[test]
    fn tls_limits_and_timing_are_carried_over() {
        let fp = ["AB"; 32].join(":");
        let s = settings(serde_json::json!({
            "tls": {"fingerprint": fp},
            "limits": {"maxConcurrentRequests": 3, "requestsPerSecond": 7},
        }));
        let timing = Timing::default();
        let c = client_config(
            &s,
            &secret(&[("tokenId", "a@pve!t"), ("secret", "x")]),
            None,
            &timing,
            RequestHook::new(|_| {}),
        )
        .unwrap();
        assert_eq!(c.tls.pinned_fingerprints.len(), 1);
        assert_eq!(c.limits.max_concurrent_requests, 3);
        assert_eq!(c.limits.requests_per_second, 7.0);
        assert!(!c.retry.retry_locked);
        assert_eq!(c.tasks.poll_interval, timing.poll_interval);
        let missing_key = client_config(
            &settings(serde_json::json!({})),
            &secret(&[("tokenId", "a@pve!t"), ("secret", "x")]),
            Some((&secret(&[]), "ca.crt")),
            &timing,
            RequestHook::new(|_| {}),
        )
        .unwrap_err();
        assert_eq!(missing_key.reason, ConfigReason::TlsError);
        assert!(
            missing_key.message.contains("no key ca.crt"),
            "{missing_key:?}"
        );
        let bad_ca = client_config(
            &settings(serde_json::json!({"tls": {"caBundle": "-----BEGIN CERTIFICATE-----\nx\n"}})),
            &secret(&[("tokenId", "a@pve!t"), ("secret", "x")]),
            None,
            &timing,
            RequestHook::new(|_| {}),
        )
        .and_then(client)
        .unwrap_err();
        assert_eq!(bad_ca.reason, ConfigReason::TlsError, "{bad_ca:?}");
    }
}
