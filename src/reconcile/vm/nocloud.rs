//! NoCloud seed ISOs for `customCloudInit`: the files cloud-init's NoCloud
//! datasource reads (`user-data`, `meta-data`, `network-config`,
//! `vendor-data`) on an ISO 9660 volume labelled `cidata`.
//!
//! Plain ISO 9660 names are 8.3 upper case, so the files are named through
//! Rock Ridge and Joliet, as `genisoimage -J -R -V cidata` does; Linux
//! mounts either. The data may hold passwords: [`SeedFiles`] never shows
//! its content in `Debug`, and only its digest leaves the provider
//! (in the ISO's file name).

use std::collections::BTreeMap;
use std::fmt;
use std::io::Cursor;

use hadris_iso::read::PathSeparator;
use hadris_iso::write::options::{CreationFeatures, IsoFormatOptions};
use hadris_iso::write::{InputEntry, InputTree, IsoImageWriter};
use sha2::{Digest, Sha256};

/// The volume label cloud-init looks for (it accepts `CIDATA` too).
pub const LABEL: &str = "cidata";

/// The seed's files: name → content.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SeedFiles(BTreeMap<String, Vec<u8>>);

impl fmt::Debug for SeedFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names and sizes only: the content may be secret.
        let mut m = f.debug_map();
        for (name, content) in &self.0 {
            m.entry(name, &format_args!("<{} bytes>", content.len()));
        }
        m.finish()
    }
}

impl SeedFiles {
    /// Adds (or replaces) a file.
    pub fn insert(&mut self, name: &str, content: Vec<u8>) {
        self.0.insert(name.to_owned(), content);
    }

    /// Whether the seed has a file of this name.
    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// SHA-256 (hex) over names and contents, length-prefixed so that no
    /// two different seeds share it.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        for (name, content) in &self.0 {
            for part in [name.as_bytes(), content.as_slice()] {
                h.update((part.len() as u64).to_be_bytes());
                h.update(part);
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The seed with a `meta-data` of `instance-id` and `local-hostname`
    /// when it has none: a new instance ID (the digest of the rest) makes
    /// cloud-init run again when the data changes.
    pub fn with_default_meta_data(mut self, hostname: &str) -> Self {
        if !self.has("meta-data") {
            let id = self.digest();
            let meta = format!("instance-id: {}\nlocal-hostname: {hostname}\n", &id[..16]);
            self.insert("meta-data", meta.into_bytes());
        }
        self
    }

    /// The ISO image.
    pub fn iso(&self) -> Result<Vec<u8>, std::io::Error> {
        let entries = self
            .0
            .iter()
            .map(|(name, content)| InputEntry::file(name.clone(), content.clone()))
            .collect();
        let tree = InputTree::new(PathSeparator::ForwardSlash, entries);
        let options = IsoFormatOptions {
            volume_name: LABEL.to_owned(),
            system_id: None,
            volume_set_id: None,
            publisher_id: None,
            preparer_id: None,
            application_id: None,
            sector_size: 2048,
            path_separator: PathSeparator::ForwardSlash,
            // Keep the label lower case, as genisoimage does.
            strict_charset: false,
            features: CreationFeatures::extensions(),
        };
        let written = IsoImageWriter::create(Cursor::new(Vec::new()), tree, options)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(written.into_inner())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use hadris_iso::read::IsoImage;

    use super::*;

    fn seed() -> SeedFiles {
        let mut s = SeedFiles::default();
        s.insert("user-data", b"#cloud-config\npassword: hunter2\n".to_vec());
        s.insert("network-config", b"version: 2\n".to_vec());
        s
    }

    #[test]
    fn debug_shows_names_and_sizes_never_content() {
        let shown = format!("{:?}", seed());
        assert!(
            shown.contains("user-data") && shown.contains("bytes"),
            "{shown}"
        );
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn the_digest_follows_names_and_contents() {
        let a = seed();
        let mut b = seed();
        assert_eq!(a.digest(), b.digest());
        b.insert("user-data", b"#cloud-config\n".to_vec());
        assert_ne!(a.digest(), b.digest());
        let mut moved = SeedFiles::default();
        moved.insert("user-datan", b"etwork-config".to_vec());
        let mut split = SeedFiles::default();
        split.insert("user-data", b"network-config".to_vec());
        assert_ne!(moved.digest(), split.digest(), "length-prefixed");
        assert_eq!(a.digest().len(), 64);
    }

    #[test]
    fn default_meta_data_names_the_instance_by_the_digest() {
        let with = seed().with_default_meta_data("web");
        let meta = String::from_utf8(with.0["meta-data"].clone()).unwrap();
        let id = &seed().digest()[..16];
        assert_eq!(meta, format!("instance-id: {id}\nlocal-hostname: web\n"));
        let mut own = seed();
        own.insert("meta-data", b"instance-id: mine\n".to_vec());
        let kept = own.clone().with_default_meta_data("web");
        assert_eq!(kept, own, "a meta-data of the user's is kept");
    }

    #[test]
    fn the_iso_is_labelled_cidata_and_holds_the_files_by_their_names() {
        let files = seed().with_default_meta_data("web");
        let iso = files.iso().unwrap();
        assert!(iso.len() < 128 * 1024, "no padding: {} bytes", iso.len());
        assert_eq!(
            &iso[0x8001..0x8006],
            b"CD001",
            "a primary volume descriptor"
        );
        assert_eq!(&iso[0x8028..0x802e], b"cidata", "the volume label");
        // A supplementary volume descriptor with a Joliet escape (`%/`).
        let joliet = (17..20)
            .map(|sector| &iso[sector * 2048..(sector + 1) * 2048])
            .any(|d| d[0] == 2 && &d[1..6] == b"CD001" && &d[88..90] == b"%/");
        assert!(joliet, "Joliet names");
        let image = IsoImage::open(Cursor::new(iso)).unwrap();
        assert!(image.supports_rrip(), "Rock Ridge names");
        for (name, content) in &files.0 {
            let entry = image
                .find_path(&format!("/{name}"))
                .unwrap()
                .unwrap_or_else(|| panic!("{name} is on the ISO"));
            assert_eq!(&image.read_file(&entry).unwrap(), content, "{name}");
        }
        assert!(image.find_path("/vendor-data").unwrap().is_none());
    }
}
