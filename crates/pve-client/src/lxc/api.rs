//! Container endpoints under `/nodes/{node}/lxc`, and the OCI pull.

use std::collections::BTreeMap;

use reqwest::Method;
use serde::Deserialize;

use super::params::{ContainerUpdate, CreateContainer, OciPull};
use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;
use crate::upid::Upid;
use crate::vm::DeleteOptions;

/// `GET .../status/current` of a container.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ContainerStatus {
    #[serde(deserialize_with = "lenient::u64_any")]
    pub vmid: u64,
    /// `running` or `stopped`.
    pub status: String,
    #[serde(default)]
    pub lock: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
}

impl ContainerStatus {
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }
}

/// A container config as `GET .../config` returns it: every key as a
/// string (PVE returns numbers for integer options), and the digest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerConfig {
    /// SHA-1 of the config file; sent back with an update so that a
    /// concurrent edit is refused rather than overwritten.
    pub digest: Option<String>,
    /// Every other key.
    pub raw: BTreeMap<String, String>,
}

impl ContainerConfig {
    /// From the `data` of `GET .../config`.
    pub fn from_json(value: &serde_json::Value) -> Self {
        let mut raw: BTreeMap<String, String> = value
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| Some((k.clone(), lenient::scalar_to_string(v)?)))
                    .collect()
            })
            .unwrap_or_default();
        let digest = raw.remove("digest");
        Self { digest, raw }
    }

    /// A key's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.raw.get(key).map(String::as_str)
    }

    /// The config lock (`create`, `destroyed`, `backup`, ...), if any.
    pub fn lock(&self) -> Option<&str> {
        self.get("lock").filter(|l| !l.is_empty())
    }
}

fn ct_path(template: &'static str, node: &str, vmid: u32) -> ApiPath {
    ApiPath::new(template, &[node, &vmid.to_string()])
}

impl Client {
    /// `POST /nodes/{node}/lxc`: creates a container; returns the
    /// `vzcreate` task. The config exists (with `lock: create`) as soon as
    /// this returns, so a second create of the VMID is refused; if the task
    /// fails PVE removes it again.
    pub async fn create_container(&self, node: &str, create: &CreateContainer) -> Result<Upid> {
        self.start_task(
            Method::POST,
            ApiPath::new("/nodes/{node}/lxc", &[node]),
            create.to_params(),
        )
        .await
    }

    /// `GET .../lxc/{vmid}/config`.
    pub async fn container_config(&self, node: &str, vmid: u32) -> Result<ContainerConfig> {
        let value: serde_json::Value = self
            .get(
                ct_path("/nodes/{node}/lxc/{vmid}/config", node, vmid),
                Params::new(),
            )
            .await?;
        Ok(ContainerConfig::from_json(&value))
    }

    /// `PUT .../lxc/{vmid}/config`: synchronous for containers (no task).
    pub async fn update_container_config(
        &self,
        node: &str,
        vmid: u32,
        update: &ContainerUpdate,
    ) -> Result<()> {
        let _: serde_json::Value = self
            .write(
                Method::PUT,
                ct_path("/nodes/{node}/lxc/{vmid}/config", node, vmid),
                update.to_params(),
            )
            .await?;
        Ok(())
    }

    /// `GET .../lxc/{vmid}/status/current`.
    pub async fn container_status(&self, node: &str, vmid: u32) -> Result<ContainerStatus> {
        self.get(
            ct_path("/nodes/{node}/lxc/{vmid}/status/current", node, vmid),
            Params::new(),
        )
        .await
    }

    /// `POST .../status/start`; the `vzstart` task.
    pub async fn start_container(&self, node: &str, vmid: u32) -> Result<Upid> {
        self.start_task(
            Method::POST,
            ct_path("/nodes/{node}/lxc/{vmid}/status/start", node, vmid),
            Params::new(),
        )
        .await
    }

    /// `POST .../status/stop` (immediate); the `vzstop` task.
    pub async fn stop_container(&self, node: &str, vmid: u32) -> Result<Upid> {
        self.start_task(
            Method::POST,
            ct_path("/nodes/{node}/lxc/{vmid}/status/stop", node, vmid),
            Params::new(),
        )
        .await
    }

    /// `POST .../status/shutdown` (the container's init is asked to stop;
    /// `forceStop` after `timeout` seconds); the `vzshutdown` task.
    pub async fn shutdown_container(
        &self,
        node: &str,
        vmid: u32,
        timeout: Option<u32>,
        force_stop: bool,
    ) -> Result<Upid> {
        self.start_task(
            Method::POST,
            ct_path("/nodes/{node}/lxc/{vmid}/status/shutdown", node, vmid),
            Params::new()
                .opt("timeout", timeout)
                .opt_flag("forceStop", Some(force_stop)),
        )
        .await
    }

    /// `DELETE .../lxc/{vmid}`; the `vzdestroy` task.
    pub async fn delete_container(
        &self,
        node: &str,
        vmid: u32,
        opts: DeleteOptions,
    ) -> Result<Upid> {
        let params = Params::new()
            .opt_flag("purge", opts.purge.then_some(true))
            .opt_flag(
                "destroy-unreferenced-disks",
                opts.destroy_unreferenced_disks.then_some(true),
            );
        self.start_task(
            Method::DELETE,
            ct_path("/nodes/{node}/lxc/{vmid}", node, vmid),
            params,
        )
        .await
    }

    /// `POST /nodes/{node}/storage/{storage}/oci-registry-pull` (PVE 9.1):
    /// pulls an OCI image into the storage's templates; the
    /// `ociregistrypull` task. PVE refuses to overwrite an existing file.
    pub async fn pull_oci_image(&self, node: &str, storage: &str, pull: &OciPull) -> Result<Upid> {
        self.start_task(
            Method::POST,
            ApiPath::new(
                "/nodes/{node}/storage/{storage}/oci-registry-pull",
                &[node, storage],
            ),
            pull.to_params(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_config_keeps_every_key_as_text_and_the_digest_apart() {
        let c = ContainerConfig::from_json(&json!({
            "digest": "abc", "cores": 2, "memory": 512, "unprivileged": 1,
            "net0": "name=eth0,bridge=vmbr0", "lock": "create",
        }));
        assert_eq!(c.digest.as_deref(), Some("abc"));
        assert_eq!(c.get("cores"), Some("2"));
        assert_eq!(c.get("unprivileged"), Some("1"));
        assert_eq!(c.lock(), Some("create"));
        assert!(c.get("digest").is_none());
    }
}
