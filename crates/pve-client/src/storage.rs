//! Storage endpoints: list, content, and `download-url`.
//!
//! `download-url` with `content=import` (PVE ≥ 8.4 for `.qcow2`/`.raw`/
//! `.vmdk`; `.img` is refused, so save Ubuntu's `*.img` as `*.qcow2`) puts
//! an image where the `import-from` drive option can read it
//! (`<storage>:import/<file>`).

use reqwest::Method;
use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;
use crate::upid::Upid;

/// An entry of `GET /nodes/{node}/storage`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct StorageInfo {
    pub storage: String,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// Content types, comma-separated (`images,rootdir,import,iso`).
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub active: bool,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub enabled: Option<bool>,
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub shared: bool,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub avail: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub total: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub used: Option<u64>,
}

impl StorageInfo {
    /// Whether the storage accepts a content type.
    pub fn supports(&self, content: &str) -> bool {
        self.content
            .as_deref()
            .is_some_and(|c| c.split(',').any(|x| x.trim() == content))
    }
}

/// An entry of `GET /nodes/{node}/storage/{storage}/content`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct StorageContent {
    /// `local:import/jammy.qcow2`.
    pub volid: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub size: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub vmid: Option<u64>,
}

/// Where `download-url` puts the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownloadContent {
    /// `import/`, for `import-from` (`.qcow2`, `.raw`, `.vmdk`, `.ova`).
    Import,
    /// `template/iso/` (`.iso`, `.img`).
    Iso,
}

impl DownloadContent {
    pub fn as_str(self) -> &'static str {
        match self {
            DownloadContent::Import => "import",
            DownloadContent::Iso => "iso",
        }
    }
}

/// A checksum for `download-url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checksum {
    pub value: String,
    /// `md5`, `sha1`, `sha224`, `sha256`, `sha384`, `sha512`.
    pub algorithm: String,
}

/// `POST /nodes/{node}/storage/{storage}/download-url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DownloadUrl {
    pub url: String,
    pub content: DownloadContent,
    /// PVE keeps only `[a-zA-Z0-9_.-]` and the basename.
    pub filename: String,
    pub checksum: Option<Checksum>,
    pub verify_certificates: Option<bool>,
}

impl DownloadUrl {
    /// The volume id the file will have: `<storage>:<content>/<filename>`.
    pub fn volid(&self, storage: &str) -> String {
        format!("{storage}:{}/{}", self.content.as_str(), self.filename)
    }
}

impl Client {
    /// `GET /nodes/{node}/storage[?content=...]`.
    pub async fn list_storage(
        &self,
        node: &str,
        content: Option<&str>,
    ) -> Result<Vec<StorageInfo>> {
        self.get(
            ApiPath::new("/nodes/{node}/storage", &[node]),
            Params::new().opt("content", content),
        )
        .await
    }

    /// `GET /nodes/{node}/storage/{storage}/content[?content=...]`.
    pub async fn storage_content(
        &self,
        node: &str,
        storage: &str,
        content: Option<&str>,
    ) -> Result<Vec<StorageContent>> {
        self.get(
            ApiPath::new("/nodes/{node}/storage/{storage}/content", &[node, storage]),
            Params::new().opt("content", content),
        )
        .await
    }

    /// Whether a volume (e.g. `local:import/jammy.qcow2`) exists.
    /// The content listing is filtered by the volume's directory (`import`,
    /// `iso`, ...), which names its content type.
    pub async fn volume_exists(&self, node: &str, volid: &str) -> Result<bool> {
        let (storage, content) = match volid.split_once(':') {
            Some((storage, rest)) => (storage, rest.split_once('/').map(|(dir, _)| dir)),
            None => (volid, None),
        };
        let items = self.storage_content(node, storage, content).await?;
        Ok(items.iter().any(|c| c.volid == volid))
    }

    /// `POST .../download-url`; returns the `download` task.
    pub async fn download_url(&self, node: &str, storage: &str, req: &DownloadUrl) -> Result<Upid> {
        let mut params = Params::new()
            .text("url", &req.url)
            .text("content", req.content.as_str())
            .text("filename", &req.filename)
            .opt_flag("verify-certificates", req.verify_certificates);
        if let Some(c) = &req.checksum {
            params = params
                .text("checksum", &c.value)
                .text("checksum-algorithm", &c.algorithm);
        }
        self.start_task(
            Method::POST,
            ApiPath::new(
                "/nodes/{node}/storage/{storage}/download-url",
                &[node, storage],
            ),
            params,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_supports_content() {
        let s: StorageInfo = serde_json::from_value(serde_json::json!({
            "storage":"local","type":"dir","content":"iso,import, vztmpl","active":1,"enabled":1,"shared":0
        }))
        .unwrap();
        assert!(s.supports("import") && s.supports("vztmpl") && !s.supports("images"));
        assert_eq!(s.enabled, Some(true));
    }

    #[test]
    fn download_volid() {
        let d = DownloadUrl {
            url: "https://images.invalid/jammy.img".into(),
            content: DownloadContent::Import,
            filename: "jammy.qcow2".into(),
            checksum: None,
            verify_certificates: None,
        };
        assert_eq!(d.volid("local"), "local:import/jammy.qcow2");
    }
}
