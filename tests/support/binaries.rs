//! Binaries of other workspace packages (Cargo gives integration tests only
//! their own package's binaries through `CARGO_BIN_EXE_*`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// The path of binary `name` of workspace package `package`, built first if
/// it is not next to this test binary (e.g. when a single test is run with
/// `cargo test --test ...`). `cargo test --workspace` builds it anyway.
pub fn workspace_binary(package: &str, name: &str) -> PathBuf {
    // target/<profile>/deps/<test binary> → target/<profile>/<name>
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in target/<profile>/deps");
    let path = profile_dir.join(name);
    static BUILD: Mutex<()> = Mutex::new(());
    let _one_build = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--package", package, "--bin", name])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(
            status.success(),
            "cargo build --package {package} --bin {name}"
        );
    }
    assert!(path.exists(), "{} was built", path.display());
    path
}
