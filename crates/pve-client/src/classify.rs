//! Classification of PVE answers into [`Error`]s.
//!
//! PVE reports most failures as `500 <first line of the message>`, so the
//! class is read from the message text as much as from the status code
//! (pve-api.md §4, §5). Messages come from the JSON `message` field when the
//! server sends one (libpve-http-server ≥ 5.2.0) and from the HTTP reason
//! phrase otherwise (older servers put the text only there).

use std::collections::BTreeMap;

use crate::error::{Error, format_errors};

/// Statuses that mean "the proxy hop or the server is unwell", not "your
/// request is wrong". 595 = AnyEvent::HTTP connect error: the daemon behind
/// pveproxy never saw the request.
fn transient_status(status: u16) -> Option<bool> {
    match status {
        595 => Some(false),
        502 | 503 | 504 | 596 | 597 | 599 => Some(true),
        _ => None,
    }
}

/// Extracts the message: JSON `message` first, then the reason phrase, then
/// the canonical reason for the status.
fn response_message(status: u16, reason: Option<&str>, body: &serde_json::Value) -> String {
    let from_body = body
        .get("message")
        .and_then(|m| m.as_str())
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty());
    from_body
        .or_else(|| {
            reason
                .map(|r| r.trim().to_owned())
                .filter(|r| !r.is_empty())
        })
        .or_else(|| {
            reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("HTTP {status}"))
}

/// Classifies a non-2xx answer. `body` is the raw body (may be empty or not
/// JSON); `reason` the HTTP reason phrase as sent by the server.
pub fn classify(status: u16, reason: Option<&str>, body: &[u8]) -> Error {
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    let message = response_message(status, reason, &json);
    let errors: BTreeMap<String, String> = json
        .get("errors")
        .and_then(|e| e.as_object())
        .map(|map| {
            map.iter()
                .map(|(k, v)| {
                    let text = v
                        .as_str()
                        .map_or_else(|| v.to_string(), |s| s.trim().to_owned());
                    (k.clone(), text)
                })
                .collect()
        })
        .unwrap_or_default();

    if let Some(may_have_run) = transient_status(status) {
        return Error::Transient {
            status: Some(status),
            message,
            may_have_run,
        };
    }
    match status {
        401 => Error::Unauthorized { message },
        403 => {
            let (path, privilege) = parse_permission(&message);
            Error::Forbidden {
                path,
                privilege,
                message,
            }
        }
        404 => Error::NotFound { message },
        400 => {
            if errors.values().any(|v| v.contains("already exists")) {
                Error::AlreadyExists {
                    message: format!("{message}{}", format_errors(&errors)),
                }
            } else {
                Error::Invalid { message, errors }
            }
        }
        501 => Error::NotImplemented { message },
        _ => classify_message(status, message),
    }
}

/// Classifies by message text, for 500s and for task exit statuses.
fn classify_message(status: u16, message: String) -> Error {
    if let Some(what) = lock_kind(&message) {
        return Error::Locked { what, message };
    }
    if message.contains("already exists") {
        return Error::AlreadyExists { message };
    }
    if message.contains("checksum mismatch") {
        return Error::Conflict { message };
    }
    if message.contains("does not exist") || message.starts_with("no such ") {
        return Error::NotFound { message };
    }
    if message.contains("got no worker upid") {
        // bpg retries this: pvedaemon could not fork the worker.
        return Error::Transient {
            status: Some(status),
            message,
            may_have_run: false,
        };
    }
    if status > 501 {
        return Error::Transient {
            status: Some(status),
            message,
            may_have_run: true,
        };
    }
    Error::Api { status, message }
}

/// `VM is locked (create)` → `create`; `can't lock file '...' - got timeout`
/// → `flock`.
fn lock_kind(message: &str) -> Option<String> {
    if let Some(rest) = message.split("is locked (").nth(1)
        && let Some(what) = rest.split(')').next()
    {
        return Some(what.to_owned());
    }
    if message.contains("can't lock file") && message.contains("got timeout") {
        return Some("flock".to_owned());
    }
    None
}

/// `Permission check failed (/vms/100, VM.Allocate)` → (path, privilege).
fn parse_permission(message: &str) -> (Option<String>, Option<String>) {
    let Some(inner) = message
        .split_once("Permission check failed (")
        .and_then(|(_, rest)| rest.rsplit_once(')'))
        .map(|(inner, _)| inner)
    else {
        return (None, None);
    };
    match inner.split_once(", ") {
        Some((path, privilege)) if path.starts_with('/') => {
            (Some(path.to_owned()), Some(privilege.to_owned()))
        }
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn classification_table() {
        use serde_json::json;
        struct Case {
            status: u16,
            reason: Option<&'static str>,
            body: Vec<u8>,
            check: fn(&Error) -> bool,
        }
        let cases = [
            Case {
                status: 401,
                reason: Some("No ticket"),
                body: vec![],
                check: |e| matches!(e, Error::Unauthorized { message } if message == "No ticket"),
            },
            Case {
                status: 401,
                reason: Some("Permission denied - invalid csrf token"),
                body: vec![],
                check: |e| matches!(e, Error::Unauthorized { message } if message.contains("csrf")),
            },
            Case {
                status: 403,
                reason: Some("Permission check failed (/vms/100, VM.Allocate)"),
                body: body(
                    json!({"data":null,"message":"Permission check failed (/vms/100, VM.Allocate)\n"}),
                ),
                check: |e| matches!(e, Error::Forbidden { path: Some(p), privilege: Some(v), .. } if p == "/vms/100" && v == "VM.Allocate"),
            },
            Case {
                status: 403,
                reason: Some("Permission check failed (/vms/100, VM.Config.Disk|VM.Config.CDROM)"),
                body: vec![],
                check: |e| matches!(e, Error::Forbidden { privilege: Some(v), .. } if v == "VM.Config.Disk|VM.Config.CDROM"),
            },
            Case {
                status: 403,
                reason: Some("Permission check failed"),
                body: vec![],
                check: |e| {
                    matches!(
                        e,
                        Error::Forbidden {
                            path: None,
                            privilege: None,
                            ..
                        }
                    )
                },
            },
            Case {
                status: 500,
                reason: Some("VM is locked (create)"),
                body: body(json!({"data":null,"message":"VM is locked (create)\n"})),
                check: |e| matches!(e, Error::Locked { what, message } if what == "create" && message == "VM is locked (create)"),
            },
            // Old server: no message field, reason phrase only.
            Case {
                status: 500,
                reason: Some("can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"),
                body: body(json!({"data":null})),
                check: |e| matches!(e, Error::Locked { what, .. } if what == "flock"),
            },
            Case {
                status: 500,
                reason: Some("unable to create VM 100 - VM 100 already exists on node 'pve'"),
                body: vec![],
                check: |e| matches!(e, Error::AlreadyExists { .. }),
            },
            Case {
                status: 400,
                reason: Some("Parameter verification failed."),
                body: body(json!({"data":null,"errors":{"vmid":"VM 100 already exists"}})),
                check: |e| matches!(e, Error::AlreadyExists { .. }),
            },
            Case {
                status: 500,
                reason: Some("Configuration file 'nodes/pve/qemu-server/100.conf' does not exist"),
                body: vec![],
                check: |e| e.is_not_found(),
            },
            Case {
                status: 404,
                reason: None,
                body: vec![],
                check: |e| e.is_not_found(),
            },
            Case {
                status: 400,
                reason: Some("Parameter verification failed."),
                body: body(
                    json!({"data":null,"errors":{"sshkeys":"invalid format - invalid urlencoded string: a b\n","memory":"type check ('integer') failed - got 'x'"},"message":"Parameter verification failed.\n"}),
                ),
                check: |e| matches!(e, Error::Invalid { errors, message } if errors.len() == 2 && errors["sshkeys"] == "invalid format - invalid urlencoded string: a b" && message == "Parameter verification failed."),
            },
            Case {
                status: 501,
                reason: Some("Method 'POST /nodes/pve/qemu/100/importdisk' not implemented"),
                body: vec![],
                check: |e| matches!(e, Error::NotImplemented { message } if message.contains("importdisk")),
            },
            Case {
                status: 595,
                reason: Some(
                    "Errors during connection establishment, proxy handshake: Connection refused",
                ),
                body: vec![],
                check: |e| {
                    matches!(
                        e,
                        Error::Transient {
                            status: Some(595),
                            may_have_run: false,
                            ..
                        }
                    )
                },
            },
            Case {
                status: 596,
                reason: Some("Broken pipe"),
                body: vec![],
                check: |e| {
                    matches!(
                        e,
                        Error::Transient {
                            status: Some(596),
                            may_have_run: true,
                            ..
                        }
                    )
                },
            },
            Case {
                status: 597,
                reason: None,
                body: vec![],
                check: |e| {
                    matches!(
                        e,
                        Error::Transient {
                            status: Some(597),
                            ..
                        }
                    )
                },
            },
            Case {
                status: 599,
                reason: Some("Too many redirections"),
                body: vec![],
                check: |e| {
                    matches!(
                        e,
                        Error::Transient {
                            status: Some(599),
                            ..
                        }
                    )
                },
            },
            Case {
                status: 503,
                reason: None,
                body: vec![],
                check: |e| matches!(e, Error::Transient { status: Some(503), message, .. } if message == "Service Unavailable"),
            },
            Case {
                status: 500,
                reason: Some("got no worker upid - start worker failed"),
                body: vec![],
                check: |e| {
                    matches!(
                        e,
                        Error::Transient {
                            may_have_run: false,
                            ..
                        }
                    )
                },
            },
            Case {
                status: 500,
                reason: Some("VM 100 is running - destroy failed"),
                body: vec![],
                check: |e| matches!(e, Error::Api { status: 500, .. }),
            },
            // JSON message wins over the reason phrase.
            Case {
                status: 500,
                reason: Some("first line"),
                body: body(json!({"data":null,"message":"first line\nsecond line\n"})),
                check: |e| matches!(e, Error::Api { message, .. } if message == "first line\nsecond line"),
            },
        ];
        for (i, case) in cases.iter().enumerate() {
            let err = classify(case.status, case.reason, &case.body);
            assert!(
                (case.check)(&err),
                "case {i} ({} {:?}) classified as {err:?}",
                case.status,
                case.reason
            );
        }
    }

    #[test]
    fn retryable_classes() {
        assert!(classify(596, None, b"").is_retryable());
        assert!(classify(500, Some("VM is locked (clone)"), b"").is_retryable());
        assert!(!classify(400, Some("Parameter verification failed."), b"").is_retryable());
        assert!(!classify(403, Some("Permission check failed"), b"").is_retryable());
        assert!(!classify(500, Some("boom"), b"").is_retryable());
        assert!(!classify(501, Some("no"), b"").is_retryable());
    }

    #[test]
    fn lock_kind_parsing() {
        assert_eq!(
            lock_kind("VM is locked (snapshot-delete)").as_deref(),
            Some("snapshot-delete")
        );
        assert_eq!(
            lock_kind("CT is locked (backup)").as_deref(),
            Some("backup")
        );
        assert_eq!(lock_kind("unable to create VM 100 - can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout").as_deref(), Some("flock"));
        assert_eq!(lock_kind("all fine"), None);
    }

    #[test]
    fn messages_fall_back_to_canonical_reason() {
        let e = classify(502, None, b"<html>bad gateway</html>");
        assert!(e.to_string().contains("Bad Gateway"), "{e}");
        assert_eq!(e.status(), Some(502));
    }
}
