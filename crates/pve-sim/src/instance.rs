//! One running simulator: its configuration, state and the shared pieces
//! every request handler and task uses.

use std::sync::{Mutex, MutexGuard, PoisonError};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::auth::Auth;
use crate::clock::Clock;
use crate::config::{Durations, SimConfig};
use crate::control::faults::{FaultRule, Faults};
use crate::control::holds::Holds;
use crate::control::traffic::Traffic;
use crate::control::urls::UrlRegistry;
use crate::error::Error;
use crate::http::router::Router;
use crate::state::{Cluster, seed};
use crate::tasks::TaskTable;
use crate::tasks::flock::Flocks;

pub struct Instance {
    pub clock: Clock,
    pub durations: Durations,
    pub auth: Auth,
    pub router: Router,
    pub tasks: TaskTable,
    pub flocks: Flocks,
    /// Tasks held by `task-held` faults until released.
    pub holds: Holds,
    pub ca_pem: String,
    pub fingerprint: String,
    /// The PVE major version simulated (8 or 9).
    pub pve_version: u8,
    cluster: Mutex<Cluster>,
    /// The configuration it started with (accounts for the state export).
    pub config: SimConfig,
    faults: Mutex<Faults>,
    traffic: Mutex<Traffic>,
    urls: Mutex<UrlRegistry>,
    rng: Mutex<StdRng>,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Instance {
    pub fn new(config: &SimConfig, ca_pem: String, fingerprint: String) -> Result<Self, Error> {
        let mut rng = StdRng::seed_from_u64(config.seed);
        let key: [u8; 32] = rng.random();
        let auth = Auth::new(config, key).map_err(Error::Config)?;
        Ok(Self {
            clock: Clock::new(config.time_scale),
            durations: config.durations.clone(),
            auth,
            router: Router::new(
                crate::api::routes_for(config.pve_version),
                crate::api::generic::catalog_for(config.pve_version),
            ),
            tasks: TaskTable::new(config.seed),
            flocks: Flocks::default(),
            holds: Holds::default(),
            ca_pem,
            fingerprint,
            pve_version: config.pve_version,
            cluster: Mutex::new(match &config.state {
                Some(state) => crate::state::build::cluster(state, config)?,
                None => seed::cluster(config),
            }),
            config: config.clone(),
            faults: Mutex::new(Faults::new(config.seed, &config.faults)),
            traffic: Mutex::new(Traffic::default()),
            urls: Mutex::new(UrlRegistry::default()),
            rng: Mutex::new(rng),
        })
    }

    /// The cluster state. Never hold the guard across an `.await`.
    pub fn cluster(&self) -> MutexGuard<'_, Cluster> {
        guard(&self.cluster)
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        guard(&self.faults)
    }

    /// Adds a fault rule (after validating it); a `task-held` rule arms its
    /// hold, so a name released before holds again.
    pub fn add_fault(&self, rule: FaultRule) -> Result<u64, String> {
        let holds: Vec<String> = rule.action.holds().into_iter().map(str::to_owned).collect();
        let id = self.faults().add(rule)?;
        for hold in &holds {
            self.holds.arm(hold);
        }
        Ok(id)
    }

    pub fn traffic(&self) -> MutexGuard<'_, Traffic> {
        guard(&self.traffic)
    }

    pub fn urls(&self) -> MutexGuard<'_, UrlRegistry> {
        guard(&self.urls)
    }

    /// `(version, release, repoid)` of the simulated pve-manager.
    pub fn version(&self) -> (&'static str, &'static str, &'static str) {
        if self.pve_version == 8 {
            ("8.4.14", "8.4", "b502d23c55afcba1")
        } else {
            ("9.1.1", "9.1", "42db4a6cf")
        }
    }

    /// A MAC in Proxmox's OUI `BC:24:11`, as PVE generates for new NICs.
    pub fn random_mac(&self) -> String {
        let b: [u8; 3] = guard(&self.rng).random();
        format!("BC:24:11:{:02X}:{:02X}:{:02X}", b[0], b[1], b[2])
    }

    /// A random (version 4) UUID for `smbios1` and `vmgenid`.
    pub fn random_uuid(&self) -> String {
        let mut b: [u8; 16] = guard(&self.rng).random();
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}
