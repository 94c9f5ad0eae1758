//! The ProxmoxVM and ProviderConfig CRDs are the cluster's, and the suite
//! shares one cluster: a test that swaps them for loose copies (bad_input's
//! writes around the schema) holds [`loose`] while it does, and every other
//! test that needs the real schema (refusals, defaults) holds [`strict`]
//! for as long as its objects are written: each [`Env`](super::Env) does,
//! for its life.
//!
//! The lock is write-preferring: once a test asks for [`loose`], tests
//! starting later wait behind it, so it waits only for those already
//! running. A test must not ask for [`strict`] twice (an `Env` and a
//! second guard), or it could wait behind a queued [`loose`] forever.

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static CRDS: RwLock<()> = RwLock::const_new(());

/// Holds the real CRDs in place.
pub async fn strict() -> RwLockReadGuard<'static, ()> {
    CRDS.read().await
}

/// Lets its holder, alone, replace the CRDs (and put the real ones back
/// before dropping it).
pub async fn loose() -> RwLockWriteGuard<'static, ()> {
    CRDS.write().await
}
