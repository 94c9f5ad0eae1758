//! Rendering of results and errors into HTTP responses with PVE's status
//! lines (the reason phrase carries the first line of the message), headers
//! and JSON bodies.

use bytes::Bytes;
use http_body_util::Full;
use hyper::ext::ReasonPhrase;
use hyper::{Response, StatusCode, header};
use serde_json::{Map, Value, json};

use super::{ApiError, Reply};

pub type Body = Full<Bytes>;

const JSON: &str = "application/json;charset=UTF-8";

/// A success: `{"data": ...}` (+ `total`).
pub fn reply(reply: &Reply) -> Response<Body> {
    let mut obj = Map::new();
    obj.insert("data".into(), reply.data.clone());
    if let Some(total) = reply.total {
        obj.insert("total".into(), json!(total));
    }
    build(200, None, Some(Value::Object(obj)))
}

/// An error in PVE's shape. `Reset` has no response; callers handle it.
pub fn error(err: &ApiError) -> Response<Body> {
    let mut resp = error_response(err);
    // pveproxy closes the connection after every response with code >= 300.
    resp.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    resp
}

fn error_response(err: &ApiError) -> Response<Body> {
    match err {
        ApiError::Param(errors) => build(
            400,
            Some("Parameter verification failed."),
            Some(
                json!({"data": null, "errors": errors, "message": "Parameter verification failed.\n"}),
            ),
        ),
        ApiError::Forbidden(detail) => {
            let msg = match detail {
                Some(d) => format!("Permission check failed ({d})"),
                None => "Permission check failed".to_owned(),
            };
            build(
                403,
                Some(&msg),
                Some(json!({"data": null, "message": format!("{msg}\n")})),
            )
        }
        ApiError::Internal(msg) => {
            let body_msg = if msg.ends_with('\n') {
                msg.clone()
            } else {
                format!("{msg}\n")
            };
            build(
                500,
                Some(first_line(msg)),
                Some(json!({"data": null, "message": body_msg})),
            )
        }
        ApiError::NotImplemented(msg) => build(
            501,
            Some(first_line(msg)),
            Some(json!({"data": null, "message": msg})),
        ),
        ApiError::Unauthorized(reason) => build(401, Some(reason), None),
        ApiError::LoginFailed => build(
            401,
            Some("authentication failure"),
            Some(json!({"data": null, "message": "authentication failure\n"})),
        ),
        ApiError::Status { code, reason } => build(*code, Some(reason), None),
        ApiError::Reset => build(500, Some("connection reset"), None),
    }
}

/// A plain-text response (`501 no such uri` for unknown formats).
pub fn text(code: u16, reason: &str, body: &str) -> Response<Body> {
    let mut resp = build(code, Some(reason), None);
    *resp.body_mut() = Full::new(Bytes::from(body.to_owned()));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain;charset=UTF-8"),
    );
    resp
}

/// A JSON response for the control API (plain, no PVE envelope).
pub fn control(code: u16, value: &Value) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(value.to_string())));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn first_line(msg: &str) -> &str {
    msg.lines().next().unwrap_or_default()
}

fn build(code: u16, reason: Option<&str>, body: Option<Value>) -> Response<Body> {
    let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    let has_body = !bytes.is_empty();
    let mut resp = Response::new(Full::new(bytes));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Some(reason) = reason.and_then(|r| ReasonPhrase::try_from(sanitize(r)).ok()) {
        resp.extensions_mut().insert(reason);
    }
    let headers = resp.headers_mut();
    headers.insert(
        header::SERVER,
        header::HeaderValue::from_static("pve-api-daemon/3.0"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("max-age=0"),
    );
    headers.insert(header::PRAGMA, header::HeaderValue::from_static("no-cache"));
    if has_body {
        headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static(JSON));
    }
    resp
}

/// Reason phrases may hold only visible ASCII, space and tab.
fn sanitize(reason: &str) -> String {
    reason
        .chars()
        .map(|c| {
            if c == '\t' || (' '..='~').contains(&c) {
                c
            } else {
                '?'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_error_uses_first_line_as_reason() {
        let resp = error(&ApiError::internal("VM is locked (create)"));
        assert_eq!(resp.status(), 500);
        let reason = resp.extensions().get::<ReasonPhrase>().unwrap();
        assert_eq!(reason.as_bytes(), b"VM is locked (create)");
    }
}
