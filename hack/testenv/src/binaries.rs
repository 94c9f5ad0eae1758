//! Finding (and on first use building) etcd, kube-apiserver and kubectl.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::error::{Error, IoContext};

/// Environment variable naming a directory with prebuilt binaries; when set,
/// nothing is built.
pub const BIN_DIR_ENV: &str = "CONTROL_PLANE_BIN_DIR";

#[derive(Debug, Clone)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kubectl: PathBuf,
}

impl Binaries {
    /// The binaries in `dir`, all of which must exist.
    pub fn in_dir(dir: &Path, hint: &str) -> Result<Self, Error> {
        let binaries = Self {
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
            kubectl: dir.join("kubectl"),
        };
        for binary in [&binaries.etcd, &binaries.kube_apiserver, &binaries.kubectl] {
            if !binary.is_file() {
                return Err(Error::MissingBinary {
                    binary: binary.clone(),
                    hint: hint.to_owned(),
                });
            }
        }
        Ok(binaries)
    }

    /// `$CONTROL_PLANE_BIN_DIR` if set, else the output of
    /// `hack/control-plane/build.sh`, which builds on first use (minutes,
    /// progress streamed to our stderr) and is a cache lookup afterwards.
    pub async fn ensure() -> Result<Self, Error> {
        if let Some(dir) = std::env::var_os(BIN_DIR_ENV) {
            let hint = format!("{BIN_DIR_ENV} points at {}", Path::new(&dir).display());
            return Self::in_dir(Path::new(&dir), &hint);
        }
        let script = build_script();
        let output = tokio::process::Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .output()
            .await
            .context(|| format!("running {}", script.display()))?;
        if !output.status.success() {
            return Err(Error::Build {
                script,
                status: output.status.to_string(),
            });
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let dir = stdout.lines().last().unwrap_or_default().trim();
        let hint = format!("{} reported {dir:?} as its output", script.display());
        Self::in_dir(Path::new(dir), &hint)
    }
}

/// The repository this crate lives in (two levels above `hack/testenv`).
pub fn repo_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .and_then(Path::parent)
        .unwrap_or(manifest_dir)
        .to_path_buf()
}

fn build_script() -> PathBuf {
    repo_root().join("hack/control-plane/build.sh")
}
