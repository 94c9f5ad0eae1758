//! The run directory's `state.json`: who owns the run and which processes
//! belong to it, so a later `testenv down`, `status`, or the sweep of stale
//! test runs can find them by PID.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::sys::ProcessId;

pub const FILE: &str = "state.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// The process the control plane is attached to; `None` when detached.
    pub owner: Option<ProcessId>,
    pub etcd: ProcessId,
    pub apiserver: ProcessId,
    /// `https://127.0.0.1:<port>`
    pub server: String,
    pub kubeconfig: PathBuf,
    /// kube-controller-manager and kube-scheduler, when serving a node.
    #[serde(default)]
    pub controllers: Vec<ProcessId>,
}

impl State {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(FILE)
    }

    pub fn write(&self, dir: &Path) -> Result<(), Error> {
        let path = Self::path(dir);
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::State {
            path: path.clone(),
            message: e.to_string(),
        })?;
        crate::pki::write_file(&path, &json, 0o644)
    }

    /// `Ok(None)` when there is no state file (nothing was started there).
    pub fn read(dir: &Path) -> Result<Option<Self>, Error> {
        let path = Self::path(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::State {
                    path,
                    message: e.to_string(),
                });
            }
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| Error::State {
                path,
                message: e.to_string(),
            })
    }

    /// The processes of this run, in the order they are stopped:
    /// the controllers, then the apiserver, then etcd.
    pub fn processes(&self) -> Vec<ProcessId> {
        let mut all = self.controllers.clone();
        all.extend([self.apiserver, self.etcd]);
        all
    }

    /// The processes of this run that still run.
    pub fn live_processes(&self) -> Vec<ProcessId> {
        self.processes()
            .into_iter()
            .filter(ProcessId::is_alive)
            .collect()
    }
}
