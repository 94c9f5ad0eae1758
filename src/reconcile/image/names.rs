//! The file an image downloads, and the volume it becomes.
//!
//! The default name carries the URL's file name (for people), the first 12
//! digits of the checksum (a new checksum is a new file, so a VM being
//! created from the old one keeps it) and a short hash of the image's
//! namespace and name: two images with the same URL never share a file, so
//! deleting one never takes the file of another (nor that of a VM's own
//! `disks[].image` download, whose name has no such hash).

use sha2::{Digest, Sha256};

use crate::api::image::{ImageContent, ImageParameters};

/// What the image's source is, as the controller acts on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Downloaded (`source.url`) into this file.
    Download {
        /// The URL.
        url: String,
        /// The file name on the storage.
        file: String,
    },
    /// A volume that is already there (`source.importFrom`).
    Existing,
    /// Pulled from an OCI registry (`source.oci`, oci-registry-pull).
    Pull {
        /// The image reference.
        reference: String,
        /// The `filename` parameter of the pull: PVE normalises it and
        /// appends `.tar`.
        file: String,
    },
}

/// Why the source cannot be carried out (said as `InvalidSpec`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadSource(pub String);

/// The image's source and the volume ID its file has (the same on every
/// node): `<storage>:<content>/<file>`, or `importFrom` as it is.
pub fn source(
    spec: &ImageParameters,
    namespace: &str,
    name: &str,
) -> Result<(Source, Option<String>), BadSource> {
    let src = &spec.source;
    if let Some(volume) = &src.import_from {
        return Ok((Source::Existing, Some(volume.clone())));
    }
    if let Some(reference) = &src.oci {
        return Ok(pull(spec, reference, namespace, name));
    }
    let Some(url) = &src.url else {
        return Err(BadSource(
            "exactly one of source.url, source.importFrom and source.oci must be set".into(),
        ));
    };
    let file = match &spec.filename {
        Some(file) => file.clone(),
        None => default_file(
            url,
            src.checksum.as_deref().unwrap_or_default(),
            spec.content,
            namespace,
            name,
        )?,
    };
    let volume = format!("{}:{}/{file}", spec.storage, spec.content.as_str());
    Ok((
        Source::Download {
            url: url.clone(),
            file,
        },
        Some(volume),
    ))
}

/// An OCI pull: the file PVE names it (`normalize_content_filename` of the
/// `filename` parameter, `.tar` appended), by default the reference's last
/// path part (`alpine:3.20` → `alpine_3.20`, as a container's own pull
/// names it) with the owner hash: a container's pull of the same reference
/// and another image of it never share the file this image deletes.
fn pull(
    spec: &ImageParameters,
    reference: &str,
    namespace: &str,
    name: &str,
) -> (Source, Option<String>) {
    let file = match &spec.filename {
        // Validated to end in `.tar`, which PVE appends itself.
        Some(file) => file.strip_suffix(".tar").unwrap_or(file).to_owned(),
        None => {
            let last = reference.rsplit('/').next().unwrap_or(reference);
            format!("{last}-{}", owner_hash(namespace, name))
        }
    };
    let volume = format!(
        "{}:vztmpl/{}",
        spec.storage,
        pve_client::lxc::oci_file_name(&file)
    );
    let source = Source::Pull {
        reference: reference.to_owned(),
        file,
    };
    (source, Some(volume))
}

/// 8 hex digits of a hash of the image's namespace and name.
fn owner_hash(namespace: &str, name: &str) -> String {
    let owner = Sha256::digest(format!("{namespace}/{name}").as_bytes());
    owner.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// `<url stem>-<checksum 12>-<hash 8>.<ext>`, with an extension Proxmox
/// accepts for the content type (`import`: .qcow2/.raw/.vmdk, `iso`:
/// .iso/.img, `vztmpl`: .tar.gz/.tar.xz/.tar.zst/.tar.bz2/.tar).
fn default_file(
    url: &str,
    checksum: &str,
    content: ImageContent,
    namespace: &str,
    name: &str,
) -> Result<String, BadSource> {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let base = path.rsplit('/').next().unwrap_or_default();
    let lower = base.to_ascii_lowercase();
    let (stem, ext) = match content {
        ImageContent::Import => match lower.rsplit_once('.') {
            Some((_, ext @ ("qcow2" | "raw" | "vmdk"))) => split_at_ext(base, ext),
            // Cloud images named `.img` are qcow2 files (Ubuntu, Debian):
            // Proxmox refuses `.img` for `import`.
            Some(_) | None => (strip_ext(base), "qcow2".to_owned()),
        },
        ImageContent::Iso => match lower.rsplit_once('.') {
            Some((_, ext @ ("iso" | "img"))) => split_at_ext(base, ext),
            Some(_) | None => (strip_ext(base), "iso".to_owned()),
        },
        ImageContent::Vztmpl => {
            // The compression is read from the extension: it cannot be
            // guessed.
            // pve-storage's `$VZTMPL_EXT_RE_1`; a plain `.tar` since PVE 9.
            match ["tar.gz", "tar.xz", "tar.zst", "tar.bz2", "tar"]
                .into_iter()
                .find(|ext| lower.ends_with(&format!(".{ext}")))
            {
                Some(ext) => split_at_ext(base, ext),
                None => {
                    return Err(BadSource(format!(
                        "cannot tell the compression of the container template at {url}: its file name does not end in .tar.gz, .tar.xz, .tar.zst, .tar.bz2 or .tar; set spec.forProvider.filename"
                    )));
                }
            }
        }
    };
    let stem = crate::api::vm::file_stem(&stem);
    let digest: String = checksum.chars().take(12).collect();
    let owner = owner_hash(namespace, name);
    Ok(format!(
        "{stem}-{}-{owner}.{ext}",
        digest.to_ascii_lowercase()
    ))
}

fn split_at_ext(base: &str, ext: &str) -> (String, String) {
    let stem = &base[..base.len().saturating_sub(ext.len() + 1)];
    (stem.to_owned(), ext.to_owned())
}

fn strip_ext(base: &str) -> String {
    match base.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_owned(),
        Some(_) | None => base.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::image::ImageSource;

    fn spec(url: &str, content: ImageContent) -> ImageParameters {
        ImageParameters {
            source: ImageSource {
                url: Some(url.into()),
                checksum: Some("ABCDEF0123456789".repeat(4)),
                checksum_algorithm: Some(crate::api::vm::ChecksumAlgorithm::Sha256),
                import_from: None,
                oci: None,
            },
            content,
            storage: "local".into(),
            nodes: vec![],
            filename: None,
            template: None,
        }
    }

    fn volume(url: &str, content: ImageContent) -> Result<String, BadSource> {
        source(&spec(url, content), "ns", "img").map(|(_, v)| v.unwrap_or_default())
    }

    #[test]
    fn default_names_keep_proxmox_extensions_per_content_type() {
        let hash = {
            let h = Sha256::digest(b"ns/img");
            h.iter()
                .take(4)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let cases = [
            (
                "https://x.example/noble-server-cloudimg-amd64.img",
                ImageContent::Import,
                format!("local:import/noble-server-cloudimg-amd64-abcdef012345-{hash}.qcow2"),
            ),
            (
                "https://x.example/disk.RAW?sig=1",
                ImageContent::Import,
                format!("local:import/disk-abcdef012345-{hash}.raw"),
            ),
            (
                "https://x.example/seed.img",
                ImageContent::Iso,
                format!("local:iso/seed-abcdef012345-{hash}.img"),
            ),
            (
                "https://x.example/netinst",
                ImageContent::Iso,
                format!("local:iso/netinst-abcdef012345-{hash}.iso"),
            ),
            (
                "https://x.example/alpine-3.20-default_20240908_amd64.tar.xz",
                ImageContent::Vztmpl,
                format!(
                    "local:vztmpl/alpine-3.20-default_20240908_amd64-abcdef012345-{hash}.tar.xz"
                ),
            ),
            (
                "https://x.example/a%20b.vmdk",
                ImageContent::Import,
                format!("local:import/a_20b-abcdef012345-{hash}.vmdk"),
            ),
        ];
        for (url, content, want) in cases {
            assert_eq!(volume(url, content), Ok(want), "{url}");
        }
    }

    #[test]
    fn two_images_of_one_url_never_share_a_file() {
        let s = spec("https://x.example/a.qcow2", ImageContent::Import);
        let a = source(&s, "ns", "a").unwrap();
        let b = source(&s, "ns", "b").unwrap();
        let c = source(&s, "other", "a").unwrap();
        assert_ne!(a.1, b.1);
        assert_ne!(a.1, c.1);
    }

    #[test]
    fn a_container_template_of_unknown_compression_needs_a_file_name() {
        let err = volume("https://x.example/rootfs.tar.lz4", ImageContent::Vztmpl).unwrap_err();
        assert!(err.0.contains("set spec.forProvider.filename"), "{err:?}");
        let mut s = spec("https://x.example/rootfs.tar.lz4", ImageContent::Vztmpl);
        s.filename = Some("rootfs.tar.zst".into());
        assert_eq!(
            source(&s, "ns", "img").unwrap().1.as_deref(),
            Some("local:vztmpl/rootfs.tar.zst")
        );
    }

    #[test]
    fn import_from_is_the_volume_and_oci_is_pulled_into_a_tar() {
        let mut s = spec("https://x.example/a.qcow2", ImageContent::Import);
        s.source.url = None;
        s.source.import_from = Some("local:import/noble.qcow2".into());
        assert_eq!(
            source(&s, "ns", "img"),
            Ok((Source::Existing, Some("local:import/noble.qcow2".into())))
        );
        s.source.import_from = None;
        s.source.oci = Some("docker.io/library/alpine:3.20".into());
        s.content = ImageContent::Vztmpl;
        let hash = owner_hash("ns", "img");
        assert_eq!(
            source(&s, "ns", "img"),
            Ok((
                Source::Pull {
                    reference: "docker.io/library/alpine:3.20".into(),
                    file: format!("alpine:3.20-{hash}"),
                },
                Some(format!("local:vztmpl/alpine_3.20-{hash}.tar"))
            ))
        );
        s.filename = Some("alpine-base.tar".into());
        assert_eq!(
            source(&s, "ns", "img").map(|(src, v)| (src, v.unwrap_or_default())),
            Ok((
                Source::Pull {
                    reference: "docker.io/library/alpine:3.20".into(),
                    file: "alpine-base".into(),
                },
                "local:vztmpl/alpine-base.tar".into()
            ))
        );
    }
}
