//! Run directories: where certificates, etcd's data, logs, the kubeconfig
//! and `state.json` of one control plane live.

use std::path::Path;

use crate::error::{Error, IoContext};

/// Marks a directory as made by testenv: only such directories are ever
/// reused or deleted, so a mistyped `--dir` cannot wipe someone's files.
const MARKER: &str = ".testenv-run";

/// Whether testenv created `dir`.
pub fn is_marked(dir: &Path) -> bool {
    dir.join(MARKER).exists()
}

/// Deletes a run directory, but only one testenv created.
pub fn remove(dir: &Path) -> Result<(), Error> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.join(MARKER).exists() {
        return Err(Error::RunDir {
            dir: dir.to_owned(),
            message: "was not created by testenv; not deleting it".into(),
        });
    }
    std::fs::remove_dir_all(dir).context(|| format!("removing {}", dir.display()))
}

pub fn create_marked(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).context(|| format!("creating {}", dir.display()))?;
    crate::pki::write_file(&dir.join(MARKER), "", 0o644)
}

pub fn is_non_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_foreign_non_empty_directories() {
        let dir = std::env::temp_dir().join(format!("testenv-foreign-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("precious.txt"), "keep me").unwrap();
        let prepared = crate::detached::prepare(&dir);
        let removed = remove(&dir);
        let survived = dir.join("precious.txt").exists();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            prepared.is_err(),
            "detached::prepare accepted a foreign dir"
        );
        assert!(removed.is_err(), "remove deleted a foreign dir");
        assert!(survived);
    }
}
