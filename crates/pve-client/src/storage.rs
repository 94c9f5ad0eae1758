//! Storage endpoints: content and `download-url`.
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
    /// `template/cache/` (`.tar.gz`, `.tar.xz`, `.tar.zst`): container
    /// templates.
    Vztmpl,
}

impl DownloadContent {
    pub fn as_str(self) -> &'static str {
        match self {
            DownloadContent::Import => "import",
            DownloadContent::Iso => "iso",
            DownloadContent::Vztmpl => "vztmpl",
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

/// `GET /nodes/{node}/query-url-metadata`: what the node learns from a
/// `HEAD` of the URL. Every field is optional: `size` is missing when the
/// server sends no `Content-Length`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct UrlMetadata {
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub size: Option<u64>,
    #[serde(default)]
    pub filename: Option<String>,
    #[serde(default)]
    pub mimetype: Option<String>,
}

impl Client {
    /// `GET /nodes/{node}/query-url-metadata?url=...` (the node sends a
    /// `HEAD` to the URL, through the datacenter's HTTP proxy).
    pub async fn query_url_metadata(
        &self,
        node: &str,
        url: &str,
        verify_certificates: Option<bool>,
    ) -> Result<UrlMetadata> {
        self.get(
            ApiPath::new("/nodes/{node}/query-url-metadata", &[node]),
            Params::new()
                .text("url", url)
                .opt_flag("verify-certificates", verify_certificates),
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

    /// `POST .../upload` of an ISO image (`content=iso`, multipart, with
    /// its SHA-256 so Proxmox verifies it); returns the `imgcopy` task. The
    /// volume is `<storage>:iso/<filename>`.
    pub async fn upload_iso(
        &self,
        node: &str,
        storage: &str,
        filename: &str,
        content: Vec<u8>,
    ) -> Result<Upid> {
        use sha2::Digest;
        let checksum: String = sha2::Sha256::digest(&content)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let params = Params::new()
            .text("content", "iso")
            .text("checksum", checksum)
            .text("checksum-algorithm", "sha256");
        let upload = crate::request::Upload {
            filename: filename.to_owned(),
            content: content.into(),
        };
        let path = ApiPath::new("/nodes/{node}/storage/{storage}/upload", &[node, storage]);
        self.start_upload(path, params, upload).await
    }

    /// `DELETE .../content/{volume}`; returns the `imgdel` task.
    pub async fn delete_volume(&self, node: &str, storage: &str, volume: &str) -> Result<Upid> {
        let path = ApiPath::new(
            "/nodes/{node}/storage/{storage}/content/{volume}",
            &[node, storage, volume],
        );
        self.start_task(Method::DELETE, path, Params::new()).await
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
