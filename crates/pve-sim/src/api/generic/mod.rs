//! Every path and method of PVE's API that the simulator does not model,
//! answered the way a PVE host answers when the feature is not configured:
//! directory indexes list their children, lists are `[]`, singleton
//! settings are their defaults, a read of an entry that does not exist
//! fails with PVE's own message, and writes are refused with
//! `501 pve-sim: not simulated` (docs/pve-sim.md lists them).
//!
//! `catalog.txt` holds one line per API path, `PATH | METHOD KIND [ARG] | ...`:
//! `index` (subdirectories), `json VALUE`, `err MESSAGE` (500; `{var}`
//! names a path variable) or `ns` (not simulated). Modelled routes take
//! precedence, so the catalog names every path of the PVE 9 API once.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use crate::http::error::NoSuchVm;
use crate::http::{ApiError, Reply};
use crate::instance::Instance;

const CATALOG: &str = include_str!("catalog.txt");

/// The generic answer of one method on one path.
#[derive(Debug)]
pub enum Answer {
    /// A directory index: `[{"subdir": child}, ...]`.
    Index,
    /// A fixed value (`[]`, `{}`, defaults).
    Json(Value),
    /// 500 with this message; `{var}` is replaced by the path variable.
    Error(&'static str),
    /// 501 `pve-sim: not simulated`.
    NotSimulated,
}

/// The prefix of every refusal, for clients and the schema walk.
pub const NOT_SIMULATED: &str = "pve-sim: not simulated";

type Entry = (&'static str, &'static str, Answer);

/// The parsed catalog: (path, method, answer), once per process.
pub fn catalog() -> &'static [Entry] {
    static PARSED: OnceLock<Vec<Entry>> = OnceLock::new();
    PARSED.get_or_init(|| parse(CATALOG).unwrap_or_default())
}

/// The catalog of a PVE major version: PVE 8 has no HA rules and no OCI
/// image pull (both came with 9.x).
pub fn catalog_for(pve_version: u8) -> impl Iterator<Item = &'static Entry> {
    catalog().iter().filter(move |(path, _, _)| {
        pve_version >= 9
            || !(path.starts_with("/cluster/ha/rules") || path.ends_with("/oci-registry-pull"))
    })
}

fn parse(text: &'static str) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.split(" | ");
        let path = parts.next().unwrap_or_default();
        for spec in parts {
            let (method, rest) = spec
                .split_once(' ')
                .ok_or_else(|| format!("bad entry '{spec}' for {path}"))?;
            let (kind, arg) = rest.split_once(' ').unwrap_or((rest, ""));
            let answer = match kind {
                "index" => Answer::Index,
                "ns" => Answer::NotSimulated,
                "err" => Answer::Error(arg),
                "json" => Answer::Json(
                    serde_json::from_str(arg).map_err(|e| format!("{path} {method}: {e}"))?,
                ),
                other => return Err(format!("unknown kind '{other}' for {path}")),
            };
            out.push((path, method, answer));
        }
    }
    Ok(out)
}

/// Answers a call of a catalog entry. Guests in the path must exist, as
/// PVE loads their config first.
pub fn answer(
    inst: &Arc<Instance>,
    method: &str,
    template: &str,
    vars: &[(&'static str, String)],
    children: &[&'static str],
    answer: &Answer,
) -> Result<Reply, ApiError> {
    let var = |name: &str| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map_or("", |(_, v)| v.as_str())
    };
    if let Ok(vmid) = var("vmid").parse::<u32>() {
        let node = var("node");
        let cluster = inst.cluster();
        if template.contains("/lxc/") {
            cluster.ct(node, vmid)?;
        } else if template.contains("/qemu/") {
            cluster.vm(node, vmid)?;
        } else if !cluster.vms.contains_key(&vmid) {
            return Err(NoSuchVm::new(node, vmid).into());
        }
    }
    match answer {
        Answer::Index => Ok(Reply::data(
            children
                .iter()
                .map(|c| json!({"subdir": c}))
                .collect::<Vec<_>>(),
        )),
        Answer::Json(v) => Ok(Reply::data(v.clone())),
        Answer::Error(msg) => {
            let mut text = (*msg).to_owned();
            for (k, v) in vars {
                text = text.replace(&format!("{{{k}}}"), v);
            }
            Err(ApiError::internal(text))
        }
        Answer::NotSimulated => Err(ApiError::NotImplemented(format!(
            "{NOT_SIMULATED}: {method} {template}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_parses_completely() {
        let entries = parse(CATALOG).unwrap();
        assert!(entries.len() > 600, "{} entries", entries.len());
        assert_eq!(catalog().len(), entries.len());
        assert!(
            entries
                .iter()
                .any(|(p, m, a)| *p == "/cluster/firewall/rules"
                    && *m == "GET"
                    && matches!(a, Answer::Json(Value::Array(v)) if v.is_empty()))
        );
    }
}
