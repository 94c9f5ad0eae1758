//! Provider configs that cannot be read as the types this provider knows
//! (written around the API server's validation) are left out of the watch
//! and reported on themselves (Ready=False, InvalidConfig). Watched as the
//! plain types, one such config would fail every list of its kind, and no
//! config would get a status again.

use std::future;

use futures::{Stream, StreamExt};
use kube::core::DeserializeGuard;
use kube::runtime::watcher;

use super::kind::ConfigObject;
use crate::reconcile::invalid;

/// The events of the configs that can be read; the others are reported.
pub fn readable_only<K: ConfigObject>(
    kube: kube::Client,
    events: impl Stream<Item = Result<watcher::Event<DeserializeGuard<K>>, watcher::Error>>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> {
    events.filter_map(move |event| {
        let readable = |guard: DeserializeGuard<K>| match guard.0 {
            Ok(config) => Some(config),
            Err(unreadable) => {
                tracing::warn!(
                    config = %unreadable.metadata.name.as_deref().unwrap_or_default(),
                    namespace = %unreadable.metadata.namespace.as_deref().unwrap_or_default(),
                    error = %unreadable.error,
                    "cannot read the provider config"
                );
                invalid::report::<K>(&kube, &unreadable.metadata, invalid::CONFIG);
                None
            }
        };
        let passed = match event {
            Ok(watcher::Event::Apply(g)) => readable(g).map(|c| Ok(watcher::Event::Apply(c))),
            Ok(watcher::Event::InitApply(g)) => {
                readable(g).map(|c| Ok(watcher::Event::InitApply(c)))
            }
            // A config never read was never cached.
            Ok(watcher::Event::Delete(g)) => g.0.ok().map(|c| Ok(watcher::Event::Delete(c))),
            Ok(watcher::Event::Init) => Some(Ok(watcher::Event::Init)),
            Ok(watcher::Event::InitDone) => Some(Ok(watcher::Event::InitDone)),
            Err(e) => Some(Err(e)),
        };
        future::ready(passed)
    })
}
