//! API errors and the exact shape PVE gives each (pve-http-server ≥ 5.2.0).

use std::collections::BTreeMap;

/// An API call that did not succeed, rendered by [`super::respond`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiError {
    /// 400 `Parameter verification failed.` with `errors` per parameter.
    Param(BTreeMap<String, String>),
    /// 403 `Permission check failed (<detail>)`; `None` gives the bare message.
    Forbidden(Option<String>),
    /// 500 with the message as reason phrase (first line) and in the body.
    Internal(String),
    /// 501, e.g. `Method 'GET /nodes/pve/foo' not implemented`.
    NotImplemented(String),
    /// 401 with an empty body after the (scaled) 3 s delay.
    Unauthorized(String),
    /// 401 `authentication failure` from `POST /access/ticket`, with a body.
    LoginFailed,
    /// An injected status such as 595/596/599: reason phrase only.
    Status { code: u16, reason: String },
    /// An injected connection reset: no response at all.
    Reset,
}

impl ApiError {
    pub fn param(key: impl Into<String>, msg: impl Into<String>) -> Self {
        Self::Param(BTreeMap::from([(key.into(), msg.into())]))
    }

    pub fn internal(msg: impl Into<String>) -> Self {
        Self::Internal(msg.into())
    }

    /// `Permission check failed (/vms/100, VM.Allocate)`.
    pub fn forbidden(path: &str, privs: &str) -> Self {
        Self::Forbidden(Some(format!("{path}, {privs}")))
    }

    pub fn status_code(&self) -> u16 {
        match self {
            Self::Param(_) => 400,
            Self::Forbidden(_) => 403,
            Self::Internal(_) => 500,
            Self::NotImplemented(_) => 501,
            Self::Unauthorized(_) | Self::LoginFailed => 401,
            Self::Status { code, .. } => *code,
            Self::Reset => 0,
        }
    }
}

/// What PVE dies with when a VM has no config on this node: a 500 in a
/// request handler, the exit status in a task (hence both conversions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoSuchVm {
    node: String,
    vmid: u32,
    dir: &'static str,
}

impl NoSuchVm {
    pub fn new(node: &str, vmid: u32) -> Self {
        Self::of(crate::state::GuestKind::Qemu, node, vmid)
    }

    /// The error for a VM (`qemu-server`) or a container (`lxc`).
    pub fn of(kind: crate::state::GuestKind, node: &str, vmid: u32) -> Self {
        Self {
            node: node.to_owned(),
            vmid,
            dir: kind.config_dir(),
        }
    }
}

impl std::fmt::Display for NoSuchVm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Configuration file 'nodes/{}/{}/{}.conf' does not exist",
            self.node, self.dir, self.vmid
        )
    }
}

impl From<NoSuchVm> for ApiError {
    fn from(e: NoSuchVm) -> Self {
        Self::Internal(e.to_string())
    }
}

impl From<NoSuchVm> for String {
    fn from(e: NoSuchVm) -> Self {
        e.to_string()
    }
}
