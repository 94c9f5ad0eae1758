//! Writes a frozen replica had already let go when it was frozen.
//!
//! A replica asks its term right before each Proxmox write (the client's
//! `WriteGate`) and, when the gate lets the write through, logs `sending a
//! write` with the server and path. A SIGSTOP that lands between that line
//! and the bytes leaving the socket holds the write back for the whole
//! pause, so Proxmox receives it after another replica took the config
//! over. No client can close that gap (Proxmox has no fencing token;
//! Kubernetes' leader election says the same of itself), so the sharded
//! run excuses exactly those writes, and names them: a write let go
//! before the test sent the SIGSTOP. A write the replica decided after it
//! resumed has no such line before the freeze and stays a failure.

use std::path::Path;

use k8s_openapi::jiff::Timestamp;

/// One `sending a write` line of a replica's log.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// Seconds since the epoch, from the line's timestamp.
    pub at: f64,
    pub method: String,
    /// `host:port` of the Proxmox API.
    pub server: String,
    /// The path below `/api2/json`, as sent.
    pub path: String,
}

/// A write as the simulator received it.
#[derive(Clone, Copy, Debug)]
pub struct Received<'a> {
    pub at: f64,
    pub method: &'a str,
    pub path: &'a str,
}

/// Every `sending a write` line of a text log.
pub fn sent_writes(log: &str) -> Vec<Sent> {
    log.lines().filter_map(parse_line).collect()
}

/// Reads the log file at `path` (empty when it cannot be read).
pub fn sent_writes_in(path: &Path) -> Vec<Sent> {
    sent_writes(&std::fs::read_to_string(path).unwrap_or_default())
}

/// `2026-12-06T07:16:59.123456Z DEBUG …: sending a write method=DELETE
/// server=127.0.0.1:8006 path=/nodes/pve2/qemu/102`
fn parse_line(line: &str) -> Option<Sent> {
    let (_, fields) = line.split_once("sending a write ")?;
    let stamp = line.split_whitespace().next()?;
    let at = stamp.parse::<Timestamp>().ok()?.as_microsecond() as f64 / 1e6;
    let field = |name: &str| {
        fields
            .split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .map(str::to_owned)
    };
    Some(Sent {
        at,
        method: field("method")?,
        server: field("server")?,
        path: field("path")?,
    })
}

/// When the write `write` (to `server`, received after the replica was
/// frozen at `frozen_at`) was let go, if it was let go before the freeze:
/// the replica's last `sending a write` line for that method and path
/// before the freeze, provided no request of the same method and path
/// reached the simulator between that line and `write` (that request
/// would be the line's own). `received` is every write of the replica the
/// simulator received.
pub fn let_go_before_freeze(
    sent: &[Sent],
    received: &[Received<'_>],
    server: &str,
    frozen_at: f64,
    write: Received<'_>,
) -> Option<f64> {
    if write.at < frozen_at {
        return None;
    }
    let same = |method: &str, path: &str| method == write.method && path == write.path;
    let line = sent
        .iter()
        .filter(|s| s.server == server && same(&s.method, &s.path) && s.at < frozen_at)
        .map(|s| s.at)
        .max_by(f64::total_cmp)?;
    let claimed = received
        .iter()
        .any(|r| same(r.method, r.path) && r.at >= line && r.at < write.at);
    (!claimed).then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: &str = "127.0.0.1:8006";

    fn line(at: f64, method: &str, path: &str) -> Sent {
        Sent {
            at,
            method: method.into(),
            server: SERVER.into(),
            path: path.into(),
        }
    }

    fn received<'a>(at: f64, method: &'a str, path: &'a str) -> Received<'a> {
        Received { at, method, path }
    }

    #[test]
    fn reads_the_lines_the_client_logs_and_nothing_else() {
        let log = "\
2026-12-06T07:16:59.250000Z DEBUG reconcile{object.ref=ProxmoxVM.v1alpha1.proxmox.crossplane.io/vm-1.ns}: pve_client::transport: sending a write method=DELETE server=127.0.0.1:8006 path=/nodes/pve2/qemu/102
2026-12-06T07:16:59.300000Z DEBUG pve_request{method=DELETE path=/nodes/{node}/qemu/{vmid}}: pve_client::transport: proxmox answered
2026-12-06T07:17:00.000000Z  INFO provider_proxmox: something else method=POST
";
        let lines = sent_writes(log);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].method, "DELETE");
        assert_eq!(lines[0].server, SERVER);
        assert_eq!(lines[0].path, "/nodes/pve2/qemu/102");
        let expected: f64 = "2026-12-06T07:16:59.25Z"
            .parse::<Timestamp>()
            .unwrap()
            .as_millisecond() as f64
            / 1000.0;
        assert!((lines[0].at - expected).abs() < 1e-6);
    }

    #[test]
    fn a_write_let_go_before_the_freeze_and_received_after_is_excused() {
        let sent = [line(99.9, "DELETE", "/nodes/pve2/qemu/102")];
        let write = received(125.0, "DELETE", "/nodes/pve2/qemu/102");
        let got = let_go_before_freeze(&sent, &[write], SERVER, 100.0, write);
        assert_eq!(got, Some(99.9));
    }

    /// The freeze is at 100.0 and the write judged is DELETE vm 102 on
    /// `SERVER`; none of these excuse it.
    #[test]
    fn nothing_else_excuses_a_write() {
        const VM: &str = "/nodes/pve2/qemu/102";
        let after = received(125.0, "DELETE", VM);
        let cases: [(&str, Vec<Sent>, Vec<Received<'_>>, Received<'_>); 6] = [
            (
                "let go after the freeze",
                vec![line(123.0, "DELETE", VM)],
                vec![after],
                after,
            ),
            (
                // The line's own request arrived before the freeze; the
                // second has no line of its own before it.
                "a line already answered by an earlier request",
                vec![line(99.0, "DELETE", VM)],
                vec![received(99.01, "DELETE", VM), after],
                after,
            ),
            (
                "received before the freeze (judged as any write)",
                vec![line(98.0, "DELETE", VM)],
                vec![received(99.0, "DELETE", VM)],
                received(99.0, "DELETE", VM),
            ),
            (
                "another path",
                vec![line(99.0, "DELETE", "/nodes/pve2/qemu/103")],
                vec![after],
                after,
            ),
            (
                "another method",
                vec![line(99.0, "POST", VM)],
                vec![after],
                after,
            ),
            (
                "another server",
                vec![Sent {
                    server: "127.0.0.1:8007".into(),
                    ..line(99.0, "DELETE", VM)
                }],
                vec![after],
                after,
            ),
        ];
        for (case, sent, received, write) in cases {
            assert_eq!(
                let_go_before_freeze(&sent, &received, SERVER, 100.0, write),
                None,
                "{case}"
            );
        }
    }
}
