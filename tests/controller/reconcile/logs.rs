//! The controller's log lines of the whole test binary, captured so a test
//! can prove a secret never appears in them.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber (debug level for the provider) once
/// per test binary.
pub fn capture() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let filter = tracing_subscriber::EnvFilter::new("provider_proxmox=debug,kube=info");
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(|| Capture)
            .with_ansi(false)
            .try_init();
    });
}

/// Everything logged so far.
pub fn text() -> String {
    String::from_utf8_lossy(&LOGS.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}
