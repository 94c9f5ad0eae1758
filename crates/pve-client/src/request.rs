//! One API request before it is sent (path, parameters, kind) and the
//! envelope of its answer.

use std::borrow::Cow;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::form::Params;
use crate::retry::CallKind;
use crate::upid::Upid;

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
}

/// One API request, before authentication.
#[derive(Debug)]
pub(crate) struct ApiRequest {
    pub(crate) method: Method,
    pub(crate) path: ApiPath,
    pub(crate) params: Params,
    pub(crate) kind: CallKind,
    /// A file sent after `params` in a `multipart/form-data` body.
    pub(crate) upload: Option<Upload>,
}

/// A file upload's part: its name and content (never shown by `Debug`).
#[derive(Clone)]
pub(crate) struct Upload {
    pub(crate) filename: String,
    pub(crate) content: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Upload({}, {} bytes)", self.filename, self.content.len())
    }
}

/// The boundary of our multipart bodies: no file content holds it, since
/// the content is not scanned for it, it is long and random-looking.
const BOUNDARY: &str = "pve-client-7c1d3f0e9a4b4b6f8e2d5a1c0b9e8f7a";

impl Upload {
    /// The `Content-Type` header of the body.
    pub(crate) fn content_type() -> String {
        format!("multipart/form-data; boundary={BOUNDARY}")
    }

    /// `params` as text parts, then the file as the part named `filename`
    /// (pve-http-server reads the parameters before the file, which must
    /// come last).
    pub(crate) fn body(&self, params: &Params) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.content.len() + 1024);
        for (name, value) in params.pairs() {
            body.extend_from_slice(
                format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                    .as_bytes(),
            );
        }
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"{}\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                self.filename
            )
            .as_bytes(),
        );
        body.extend_from_slice(&self.content);
        body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
        body
    }
}

impl ApiRequest {
    pub(crate) fn get(path: ApiPath, params: Params) -> Self {
        Self {
            method: Method::GET,
            path,
            params,
            kind: CallKind::Read,
            upload: None,
        }
    }

    pub(crate) fn new(method: Method, path: ApiPath, params: Params, kind: CallKind) -> Self {
        Self {
            method,
            path,
            params,
            kind,
            upload: None,
        }
    }

    pub(crate) fn endpoint(&self) -> String {
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
    /// Takes `data` out (the rest of the body stays): decoding a copy
    /// would double the answer in memory for as long as it is decoded,
    /// and the cluster view of a large cluster is megabytes as a tree.
    pub(crate) fn data<T: DeserializeOwned>(&mut self, endpoint: &str) -> Result<T> {
        let data = self
            .body
            .get_mut("data")
            .map(serde_json::Value::take)
            .unwrap_or(serde_json::Value::Null);
        serde_json::from_value(data)
            .map_err(|e| Error::protocol(format!("unexpected answer from {endpoint}: {e}")))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_taken_out_and_the_other_keys_stay() {
        let mut envelope = Envelope {
            body: serde_json::json!({"data": [{"n": 1, "t": "a"}], "total": 7}),
        };
        let lines: Vec<serde_json::Value> = envelope.data("GET /log").unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!(envelope.body["total"], 7, "the rest of the body is kept");
        let missing: Option<u32> = Envelope {
            body: serde_json::json!({}),
        }
        .data("GET /x")
        .unwrap();
        assert_eq!(missing, None, "no data reads as null");
    }
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
