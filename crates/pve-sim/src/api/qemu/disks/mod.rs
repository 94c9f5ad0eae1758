//! Disk parameters: the synchronous checks PVE makes before a task starts
//! (`check_storage_access`, the `import-from` syntax) in `plan`, and the
//! work a task does (allocate, import with progress, cloud-init drive) in
//! `work`.

mod plan;
mod work;

use std::collections::BTreeMap;

pub use plan::{check_images_storage, plan};
pub use work::{allocate, allocate_cloudinit, copy_with_progress, execute, set_contents, wrote};

pub enum DiskOp {
    /// `storage:N`: a new empty disk of N GiB.
    Alloc {
        key: String,
        storage: String,
        bytes: u64,
        opts: BTreeMap<String, String>,
    },
    /// `storage:0,import-from=<source>`: a new disk with the source's content.
    Import {
        key: String,
        storage: String,
        source: String,
        opts: BTreeMap<String, String>,
    },
    /// `storage:cloudinit`: the cloud-init drive.
    CloudInit {
        key: String,
        storage: String,
        opts: BTreeMap<String, String>,
    },
    /// Anything else (an existing volume, `none`, `cdrom`, an ISO): stored as given.
    Keep { key: String, value: String },
}

/// The content type a volume name implies (`iso/x.iso` → `iso`, `vm-100-disk-0` → `images`).
pub fn volume_type(volname: &str) -> &str {
    if volname.starts_with("vm-") || volname.starts_with("base-") {
        return "images";
    }
    match volname.split_once('/') {
        Some((t, _)) if ["iso", "vztmpl", "import", "snippets", "backup"].contains(&t) => t,
        _ => "images",
    }
}

/// Prints a drive: the volume first, then the options sorted by name.
pub fn print_drive(file: &str, opts: &BTreeMap<String, String>) -> String {
    let mut parts = vec![file.to_owned()];
    parts.extend(
        opts.iter()
            .filter(|(k, _)| *k != "file")
            .map(|(k, v)| format!("{k}={v}")),
    );
    parts.join(",")
}

/// PVE's `render_bytes` with one decimal: `3.5 GiB`, `0.0 B`.
pub fn render_bytes(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < units.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", units[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_bytes_like_pve() {
        assert_eq!(render_bytes(0), "0.0 B");
        assert_eq!(render_bytes(3584 << 20), "3.5 GiB");
        assert_eq!(render_bytes(36 << 20), "36.0 MiB");
    }
}
