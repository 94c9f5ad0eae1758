//! What lives inside a guest and the guest agent reaches: files written
//! through `file-write` and the processes started with `exec`.

use std::collections::BTreeMap;

/// A finished `guest-exec` process.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecResult {
    pub exitcode: i32,
    pub out: String,
    pub err: String,
}

#[derive(Clone, Debug, Default)]
pub struct GuestState {
    pub files: BTreeMap<String, Vec<u8>>,
    pub execs: BTreeMap<u32, ExecResult>,
    pub next_pid: u32,
}
