//! The Lease loop: every [`RETRY_PERIOD`], one LIST of the provider's
//! Leases, the renewal of this replica's member Lease and of every config
//! Lease it holds, and the acquisition or hand-over of what
//! [`super::assign`] says.
//!
//! Two kinds of Lease, both `coordination.k8s.io/v1` in the provider's
//! namespace and labelled [`KIND_LABEL`]:
//! * a **member** Lease per replica (`crossplane-provider-proxmox.member.<identity>`):
//!   the replicas alive are those whose member Lease changed within its
//!   duration, by this replica's clock;
//! * a **config** Lease per provider config
//!   (`crossplane-provider-proxmox.pc.<namespace>.<name>`,
//!   `crossplane-provider-proxmox.cpc.<name>`), held by one replica.
//!
//! Every write is a replace with the resourceVersion last read (or a
//! create): two replicas cannot both win one Lease. A Lease held by
//! another replica counts as free once this replica has seen it unchanged
//! for its `leaseDurationSeconds` (client-go's rule: no clocks are
//! compared across machines), or at once when its holder gave it up.
//!
//! Gaining a config clears everything this process remembers of it (its
//! resources' memory entries, its scheduler books, its cluster view, its
//! client with its task observer and request budget) before the term
//! starts, then wakes its resources and its config pass: the new holder
//! looks at every VM once, as a new leader did. Losing it ends the term
//! (cancelling its passes) and clears the same.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use kube::{Api, ResourceExt};

use super::assign::{assign, fnv1a};
use super::{LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD, Shards};
use crate::api::ProviderConfigKind;
use crate::reconcile::context::Context;
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::runtime::settings::{COMPONENT, LEASE_NAME};

/// The label telling the provider's Leases apart (`member` or `config`).
pub const KIND_LABEL: &str = "proxmox.crossplane.io/lease";
/// The label naming the one namespace the provider serves
/// (`Settings::namespace`), on the Leases it writes; a provider serving
/// every namespace sets none. Providers of different namespaces (and one
/// of all) may keep their Leases in one namespace: each counts as its
/// replicas only the member Leases of its own scope, so none hands a
/// config to a replica that does not serve it, and removes only config
/// Leases of its own scope. A config's Lease has one name whoever serves
/// it: two providers that both serve a config (one replacing the other,
/// as a Helm upgrade to `watchNamespace` does) never act on it at once,
/// and the new one takes it once it is free.
pub const SERVES_LABEL: &str = "proxmox.crossplane.io/serves";
/// The annotation naming a config Lease's config.
const CONFIG_ANNOTATION: &str = "proxmox.crossplane.io/config";
/// A member Lease unchanged this long is deleted by whoever sees it.
const MEMBER_GONE_AFTER: Duration = Duration::from_secs(60);

/// The name of the Lease of `key`.
pub fn config_lease(key: &ConfigKey) -> String {
    let name = match key.kind {
        ProviderConfigKind::ProviderConfig => {
            format!("{LEASE_NAME}.pc.{}.{}", key.namespace, key.name)
        }
        ProviderConfigKind::ClusterProviderConfig => format!("{LEASE_NAME}.cpc.{}", key.name),
    };
    bounded(name)
}

/// The name of the member Lease of `identity`.
pub fn member_lease(identity: &str) -> String {
    let clean: String = identity
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let clean = clean.trim_matches('-');
    bounded(format!("{LEASE_NAME}.member.{clean}"))
}

/// Object names stop at 253 characters: a longer one keeps its start and
/// a hash of the whole.
fn bounded(name: String) -> String {
    if name.len() <= 253 {
        return name;
    }
    let hash = fnv1a(name.as_bytes());
    format!("{}.{hash:016x}", &name[..236])
}

/// The labels of a Lease of `kind` (`member`, `config`) of a provider
/// serving `serves` (`None`: every namespace).
fn labels(kind: &str, serves: Option<&str>) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = [
        (KIND_LABEL.to_owned(), kind.to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            COMPONENT.to_owned(),
        ),
    ]
    .into();
    if let Some(namespace) = serves {
        labels.insert(SERVES_LABEL.to_owned(), namespace.to_owned());
    }
    labels
}

/// The namespace the provider that wrote `lease` serves ([`SERVES_LABEL`]).
fn serves(lease: &Lease) -> Option<&str> {
    lease.labels().get(SERVES_LABEL).map(String::as_str)
}

/// How a config is written in its Lease's annotation.
fn config_label(key: &ConfigKey) -> String {
    match key.kind {
        ProviderConfigKind::ProviderConfig => {
            format!("ProviderConfig/{}/{}", key.namespace, key.name)
        }
        ProviderConfigKind::ClusterProviderConfig => format!("ClusterProviderConfig/{}", key.name),
    }
}

/// What to do when this replica gains a config's Lease: wake every
/// resource that names it and the config's own pass; returns how many
/// resources were woken. Given by the composition root, so that the Lease
/// loop names no kind.
pub type Gained = Box<dyn Fn(&ConfigKey) -> usize + Send + Sync>;

/// What the loop works with.
pub struct Leases {
    ctx: Arc<Context>,
    gained: Gained,
    api: Api<Lease>,
    identity: String,
    /// The namespace served, if only one is ([`SERVES_LABEL`]).
    serves: Option<String>,
    /// Lease name → (resourceVersion, when this replica first saw it).
    seen: HashMap<String, (String, Instant)>,
}

/// Runs the Lease loop until `stop`, then ends every term and gives the
/// Leases up (so another replica takes them at once).
pub async fn run(
    ctx: Arc<Context>,
    gained: Gained,
    namespace: String,
    stop: impl Future<Output = ()>,
) {
    let Some(identity) = ctx.shards.identity().map(str::to_owned) else {
        return;
    };
    let mut leases = Leases {
        api: Api::namespaced(ctx.kube.clone(), &namespace),
        serves: ctx.settings.namespace.clone(),
        ctx,
        gained,
        identity,
        seen: HashMap::new(),
    };
    tokio::pin!(stop);
    tracing::info!(identity = %leases.identity, %namespace, "campaigning for the provider configs' Leases");
    loop {
        leases.tick().await;
        let next = Instant::now() + RETRY_PERIOD;
        let wake = leases
            .ctx
            .shards
            .next_deadline()
            .filter(|d| *d < next)
            .unwrap_or(next);
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep_until(wake.into()) => {}
        }
    }
    leases.release_all().await;
}

impl Leases {
    fn shards(&self) -> &Shards {
        &self.ctx.shards
    }

    /// Whether `lease` was written by a provider of this one's scope.
    fn ours(&self, lease: &Lease) -> bool {
        serves(lease) == self.serves.as_deref()
    }

    /// One round.
    async fn tick(&mut self) {
        for key in self.shards().overdue(Instant::now()) {
            self.lose(
                &key,
                "its renew deadline passed (not renewed in time, or the process was paused)",
            );
        }
        // The configs, once the config controllers listed them.
        let Some(configs) = self.ctx.providers.listed_configs() else {
            return;
        };
        let listed = match self
            .api
            .list(&ListParams::default().labels(KIND_LABEL))
            .await
        {
            Ok(list) => list.items,
            Err(e) => {
                // The terms run out at their deadlines if this goes on.
                tracing::debug!(error = %e, "cannot list the Leases");
                return;
            }
        };
        let now = Instant::now();
        let mut by_name: BTreeMap<String, Lease> = BTreeMap::new();
        for lease in listed {
            let name = lease.name_any();
            let version = lease.resource_version().unwrap_or_default();
            match self.seen.get(&name) {
                Some((v, _)) if *v == version => {}
                Some(_) | None => {
                    self.seen.insert(name.clone(), (version, now));
                }
            }
            by_name.insert(name, lease);
        }
        self.seen.retain(|name, _| by_name.contains_key(name));
        let member = member_lease(&self.identity);
        self.renew_member(&member, by_name.get(&member)).await;
        let mut members = BTreeSet::from([self.identity.clone()]);
        for (name, lease) in &by_name {
            if !is_kind(lease, "member") || *name == member || !self.ours(lease) {
                continue;
            }
            match holder(lease) {
                Some(who) if !self.expired(name, lease, LEASE_DURATION) => {
                    members.insert(who.to_owned());
                }
                Some(_) | None => {
                    if self.expired(name, lease, MEMBER_GONE_AFTER) {
                        self.delete(name, lease).await;
                    }
                }
            }
        }
        let by_lease: BTreeMap<String, ConfigKey> =
            configs.into_iter().map(|k| (config_lease(&k), k)).collect();
        let names: BTreeSet<String> = by_lease.keys().cloned().collect();
        let wanted = assign(&names, &members);
        for (name, key) in &by_lease {
            let want = wanted.get(name).map(String::as_str);
            self.settle(key, name, by_name.get(name), want, &members)
                .await;
        }
        // Leases of configs that are gone (of this provider's scope: another
        // provider's may be of configs this one does not serve).
        for (name, lease) in &by_name {
            if !is_kind(lease, "config") || by_lease.contains_key(name) || !self.ours(lease) {
                continue;
            }
            let mine = holder(lease) == Some(self.identity.as_str());
            if let Some(key) = self.held_by_lease(name) {
                self.lose(&key, "its provider config is gone");
            }
            if mine || holder(lease).is_none() || self.expired(name, lease, LEASE_DURATION) {
                self.delete(name, lease).await;
            }
        }
    }

    /// The held config whose Lease is `name`.
    fn held_by_lease(&self, name: &str) -> Option<ConfigKey> {
        self.shards()
            .held()
            .into_iter()
            .find(|k| config_lease(k) == name)
    }

    /// Renews, hands over or acquires the Lease `name` of `key`.
    async fn settle(
        &mut self,
        key: &ConfigKey,
        name: &str,
        lease: Option<&Lease>,
        want: Option<&str>,
        members: &BTreeSet<String>,
    ) {
        let me = self.identity.clone();
        let current = self.shards().term_of(key);
        if let Some((term, _)) = current {
            let ours = lease.is_some_and(|l| holder(l) == Some(me.as_str()));
            if !ours {
                self.lose(key, "another replica holds its Lease now");
                return;
            }
            let Some(lease) = lease else { return };
            match want {
                Some(other) if other != me && members.contains(other) => {
                    // Hand over: stop acting first, then give the Lease up.
                    self.lose(key, "handed over to the replica it is assigned to");
                    let mut given = lease.clone();
                    if let Some(spec) = given.spec.as_mut() {
                        spec.holder_identity = None;
                    }
                    self.write(name, given).await;
                }
                Some(_) | None => {
                    let sent = Instant::now();
                    let mut renewed = lease.clone();
                    if let Some(spec) = renewed.spec.as_mut() {
                        spec.renew_time = Some(MicroTime(Timestamp::now()));
                    }
                    match self.write(name, renewed).await {
                        Write::Done => {
                            if !self.shards().renewed(key, term, sent + RENEW_DEADLINE) {
                                self.lose(key, "renewed too late");
                            }
                        }
                        Write::Conflict => self.lose(key, "its Lease changed under us"),
                        // Tried again next round, until the deadline.
                        Write::Failed => {}
                    }
                }
            }
            return;
        }
        let free = match lease {
            None => true,
            Some(l) => match holder(l) {
                None => true,
                // Ours from an earlier term (a pause past the deadline):
                // nobody else took it.
                Some(who) if who == me => true,
                Some(_) => self.expired(name, l, LEASE_DURATION),
            },
        };
        let long_free = lease.is_some_and(|l| {
            (holder(l).is_none() || self.expired(name, l, LEASE_DURATION))
                && self.expired(name, l, LEASE_DURATION * 2)
        });
        if !(free && (want == Some(me.as_str()) || long_free)) {
            return;
        }
        let sent = Instant::now();
        let now = MicroTime(Timestamp::now());
        let transitions = lease
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0);
        let spec = LeaseSpec {
            holder_identity: Some(me.clone()),
            lease_duration_seconds: Some(duration_seconds()),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(transitions.saturating_add(1)),
            ..LeaseSpec::default()
        };
        let wanted = match lease {
            // Perhaps another provider's (see `SERVES_LABEL`): ours now.
            Some(l) => Lease {
                metadata: ObjectMeta {
                    labels: Some(labels("config", self.serves.as_deref())),
                    ..l.metadata.clone()
                },
                spec: Some(spec),
            },
            None => Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    labels: Some(labels("config", self.serves.as_deref())),
                    annotations: Some([(CONFIG_ANNOTATION.to_owned(), config_label(key))].into()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            },
        };
        if let Write::Done = self.write(name, wanted).await {
            self.gain(key, sent + RENEW_DEADLINE);
        }
    }

    /// Renews (or creates) this replica's member Lease.
    async fn renew_member(&mut self, name: &str, lease: Option<&Lease>) {
        let now = MicroTime(Timestamp::now());
        let spec = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(duration_seconds()),
            renew_time: Some(now.clone()),
            acquire_time: lease
                .and_then(|l| l.spec.as_ref())
                .and_then(|s| s.acquire_time.clone())
                .or(Some(now)),
            ..LeaseSpec::default()
        };
        let metadata = match lease {
            Some(l) => l.metadata.clone(),
            None => ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(labels("member", self.serves.as_deref())),
                ..ObjectMeta::default()
            },
        };
        self.write(
            name,
            Lease {
                metadata,
                spec: Some(spec),
            },
        )
        .await;
    }

    /// Creates `lease` (no resourceVersion) or replaces it at the version
    /// it was read at (LISTs are quorum reads).
    async fn write(&mut self, name: &str, lease: Lease) -> Write {
        let result = match lease.metadata.resource_version {
            Some(_) => self.api.replace(name, &PostParams::default(), &lease).await,
            None => self.api.create(&PostParams::default(), &lease).await,
        };
        match result {
            Ok(written) => {
                let version = written.resource_version().unwrap_or_default();
                self.seen.insert(name.to_owned(), (version, Instant::now()));
                Write::Done
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Write::Conflict,
            Err(e) => {
                tracing::debug!(lease = name, error = %e, "Lease write failed");
                Write::Failed
            }
        }
    }

    async fn delete(&mut self, name: &str, lease: &Lease) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: lease.resource_version(),
                uid: lease.uid(),
            }),
            ..DeleteParams::default()
        };
        match self.api.delete(name, &params).await {
            Ok(_) => {
                tracing::debug!(lease = name, "deleted a Lease no longer used");
                self.seen.remove(name);
            }
            Err(e) => tracing::debug!(lease = name, error = %e, "cannot delete a Lease"),
        }
    }

    /// Whether `lease` has been unchanged for `long` by our clock.
    fn expired(&self, name: &str, lease: &Lease, long: Duration) -> bool {
        let duration = lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map_or(long, |s| long.max(Duration::from_secs(s)));
        self.seen
            .get(name)
            .is_some_and(|(_, since)| since.elapsed() >= duration)
    }

    /// A term of `key` begins: forget the config, then act for it.
    fn gain(&self, key: &ConfigKey, deadline: Instant) {
        forget_config(&self.ctx, key);
        self.shards().begin(key, deadline);
        self.ctx.metrics.lease_changed(&key.to_string(), true);
        tracing::info!(config = %key, identity = %self.identity, "acquired the provider config's Lease");
        let woken = (self.gained)(key);
        tracing::debug!(config = %key, resources = woken, "woke the provider config's resources");
    }

    /// The term of `key` ends (if there is one): passes cancelled, the
    /// config forgotten.
    fn lose(&self, key: &ConfigKey, why: &str) {
        if self.shards().end(key) {
            forget_config(&self.ctx, key);
            self.ctx.metrics.lease_changed(&key.to_string(), false);
            tracing::warn!(config = %key, identity = %self.identity, %why, "lost the provider config's Lease; standing by for it");
        }
    }

    /// Ends every term and gives the Leases up.
    async fn release_all(&mut self) {
        let held = self.shards().held();
        for key in &held {
            self.lose(key, "the replica stops");
        }
        for key in &held {
            let name = config_lease(key);
            if let Ok(mut lease) = self.api.get(&name).await
                && holder(&lease) == Some(self.identity.as_str())
            {
                if let Some(spec) = lease.spec.as_mut() {
                    spec.holder_identity = None;
                }
                self.write(&name, lease).await;
            }
        }
        let member = member_lease(&self.identity);
        if let Ok(lease) = self.api.get(&member).await {
            self.delete(&member, &lease).await;
        }
        tracing::info!("gave up the provider configs' Leases");
    }
}

/// What became of a Lease write.
enum Write {
    Done,
    /// Someone else wrote it first (or deleted it).
    Conflict,
    /// No answer, or another error.
    Failed,
}

fn duration_seconds() -> i32 {
    i32::try_from(LEASE_DURATION.as_secs()).unwrap_or(i32::MAX)
}

fn is_kind(lease: &Lease, kind: &str) -> bool {
    lease.labels().get(KIND_LABEL).map(String::as_str) == Some(kind)
}

/// The holder of `lease`, if it has one.
fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// Forgets everything this process remembers of `key`: its resources'
/// memory entries, its scheduler books, its cluster view and its client.
pub fn forget_config(ctx: &Context, key: &ConfigKey) {
    ctx.memory.forget_config(key);
    ctx.scheduler.forget_config(key);
    ctx.inventory.forget(key);
    ctx.providers.forget(key);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_valid_and_distinct() {
        let pc = |ns: &str, name: &str| ConfigKey {
            kind: ProviderConfigKind::ProviderConfig,
            namespace: ns.into(),
            name: name.into(),
        };
        let cpc = ConfigKey {
            kind: ProviderConfigKind::ClusterProviderConfig,
            namespace: String::new(),
            name: "a.b".into(),
        };
        assert_ne!(config_lease(&pc("a-b", "c")), config_lease(&pc("a", "b-c")));
        assert_ne!(config_lease(&pc("a", "b.c")), config_lease(&cpc));
        assert_eq!(
            config_lease(&pc("ns", "one")),
            "crossplane-provider-proxmox.pc.ns.one"
        );
        let long = config_lease(&pc("ns", &"x".repeat(253)));
        assert!(long.len() <= 253);
        assert_eq!(
            member_lease("Chaos_a-1-0ab3"),
            "crossplane-provider-proxmox.member.chaos-a-1-0ab3"
        );
    }

    #[test]
    fn leases_say_which_namespace_their_provider_serves() {
        let lease = |labels: BTreeMap<String, String>| Lease {
            metadata: ObjectMeta {
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        assert_eq!(
            serves(&lease(labels("member", Some("team-a")))),
            Some("team-a")
        );
        assert_eq!(serves(&lease(labels("config", None))), None);
        // Written before the label existed: a provider of every namespace.
        let older = [(KIND_LABEL.to_owned(), "member".to_owned())].into();
        assert_eq!(serves(&lease(older)), None);
    }
}
