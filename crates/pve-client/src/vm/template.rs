//! `POST /nodes/{node}/qemu/{vmid}/template`: turning a VM into a template.
//!
//! PVE refuses a running VM, a VM with snapshots and a template; the task
//! (`qmtemplate`) renames each disk to a base volume (`base-<vmid>-disk-N`)
//! that linked clones share. It cannot be undone.

use reqwest::Method;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::request::ApiPath;
use crate::upid::Upid;

impl Client {
    /// Converts a stopped VM into a template; returns the `qmtemplate` task.
    pub async fn convert_to_template(&self, node: &str, vmid: u32) -> Result<Upid> {
        self.start_task(
            Method::POST,
            ApiPath::new(
                "/nodes/{node}/qemu/{vmid}/template",
                &[node, &vmid.to_string()],
            ),
            Params::new(),
        )
        .await
    }
}
