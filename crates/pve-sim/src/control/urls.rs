//! What `download-url` "downloads": the simulator never touches the network.
//! A URL is either registered (size, checksums, or an error to fail with)
//! or synthesized by a fixed rule, so tests know checksums in advance.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};

/// A registered URL (`POST /_sim/urls`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct UrlEntry {
    pub url: String,
    /// Download size in bytes (default 600 MiB).
    #[serde(default)]
    pub size: Option<u64>,
    /// Virtual disk size of an image (default: 3.5 GiB for qcow2/vmdk, else the size).
    #[serde(default)]
    pub virtual_size: Option<u64>,
    /// Known checksums, algorithm → hex.
    #[serde(default)]
    pub checksums: BTreeMap<String, String>,
    /// If set, the download fails with this wget-style error.
    #[serde(default)]
    pub error: Option<String>,
    /// The downloaded image fails to import like a corrupt image.
    #[serde(default)]
    pub corrupt: bool,
    /// The server sends no `Content-Length` (chunked): `query-url-metadata`
    /// answers no `size`; the download still writes `size` bytes.
    #[serde(default)]
    pub no_length: bool,
}

/// What a download of a URL produces.
pub struct Resolved {
    pub size: u64,
    /// What a `HEAD` of the URL says the size is (`None`: no
    /// `Content-Length`).
    pub content_length: Option<u64>,
    pub virtual_size: Option<u64>,
    pub checksums: BTreeMap<String, String>,
    pub error: Option<String>,
    pub corrupt: bool,
}

pub const DEFAULT_SIZE: u64 = 600 << 20;

#[derive(Default)]
pub struct UrlRegistry {
    entries: HashMap<String, UrlEntry>,
}

impl UrlRegistry {
    pub fn register(&mut self, entry: UrlEntry) {
        self.entries.insert(entry.url.clone(), entry);
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn list(&self) -> Vec<UrlEntry> {
        let mut v: Vec<_> = self.entries.values().cloned().collect();
        v.sort_by(|a, b| a.url.cmp(&b.url));
        v
    }

    /// Registered entry, or the rule for unregistered URLs: hosts under
    /// `.invalid` fail to resolve; anything else is a 600 MiB file whose
    /// SHA-2 checksums are the digests of the URL text itself.
    pub fn resolve(&self, url: &str) -> Resolved {
        if let Some(e) = self.entries.get(url) {
            let mut checksums = url_checksums(url);
            checksums.extend(
                e.checksums
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_ascii_lowercase())),
            );
            let size = e.size.unwrap_or(DEFAULT_SIZE);
            return Resolved {
                size,
                content_length: (!e.no_length).then_some(size),
                virtual_size: e.virtual_size,
                checksums,
                error: e.error.clone(),
                corrupt: e.corrupt,
            };
        }
        let host = host_of(url);
        let error = (host.ends_with(".invalid") || host == "invalid")
            .then(|| format!("unable to resolve host address '{host}'"));
        Resolved {
            size: DEFAULT_SIZE,
            content_length: Some(DEFAULT_SIZE),
            virtual_size: None,
            checksums: url_checksums(url),
            error,
            corrupt: false,
        }
    }
}

/// The host name of a URL (empty when it has none).
pub fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The checksums of an unregistered URL's simulated content.
pub fn url_checksums(url: &str) -> BTreeMap<String, String> {
    let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    BTreeMap::from([
        ("sha224".to_owned(), hex(&Sha224::digest(url.as_bytes()))),
        ("sha256".to_owned(), hex(&Sha256::digest(url.as_bytes()))),
        ("sha384".to_owned(), hex(&Sha384::digest(url.as_bytes()))),
        ("sha512".to_owned(), hex(&Sha512::digest(url.as_bytes()))),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unregistered_urls_follow_the_rule() {
        let r = UrlRegistry::default();
        let ok = r.resolve("https://images.example/x.qcow2");
        assert!(ok.error.is_none());
        assert_eq!(ok.checksums["sha256"].len(), 64);
        assert!(r.resolve("https://nowhere.invalid/x.qcow2").error.is_some());
    }
}
