//! How big a run is: the reduced size (the default, part of `make test`) or
//! the full size (`CHAOS_SIZE=full`, what `make chaos` runs), each knob
//! overridable from the environment.

use std::path::PathBuf;
use std::time::Duration;

/// The knobs of one run.
#[derive(Clone, Debug)]
pub struct Size {
    /// `reduced` or `full`: which defaults apply.
    pub name: String,
    /// `CHAOS_VMS`: ProxmoxVMs created.
    pub vms: usize,
    /// `CHAOS_WAVES`: they are applied in this many waves, so creates keep
    /// starting while the kills go on.
    pub waves: usize,
    /// `CHAOS_WAVE_GAP` (seconds) between two waves.
    pub wave_gap: Duration,
    /// `CHAOS_KILLS`: SIGKILLs of a provider process while VMs are created.
    pub kills: usize,
    /// `CHAOS_LEADER_KILLS`: how many of those at least hit the leader.
    pub leader_kills: usize,
    /// `CHAOS_DISPATCH_KILLS`: how many of the leader kills come right after
    /// the simulator logged a create or clone that started a task.
    pub dispatch_kills: usize,
    /// `CHAOS_DELETE_KILLS`: SIGKILLs while everything is being deleted.
    pub delete_kills: usize,
    /// `CHAOS_KILL_GAP` (seconds, `MIN-MAX`): pause before each kill.
    pub kill_gap: (f64, f64),
    /// `CHAOS_TIME_SCALE`: pve-sim's time scale.
    pub time_scale: f64,
    /// `CHAOS_SEED`: seeds the fleet, the kill plan and pve-sim (random
    /// unless given; always printed).
    pub seed: u64,
    /// `CHAOS_READY_TIMEOUT` (seconds): how long every VM may take to be
    /// Ready, and then to be deleted.
    pub timeout: Duration,
    /// `CHAOS_REPORT`: a Markdown file whose figures section is rewritten
    /// with this run's figures (`make chaos` names docs/reliability.md).
    pub report: Option<PathBuf>,
}

impl Size {
    /// 9 VMs, one kill right after a dispatch (the leader), one at a random
    /// moment, one apiserver restart: every kind of fault and event, well
    /// under a minute of chaos.
    pub fn reduced() -> Self {
        Self {
            name: "reduced".into(),
            vms: 9,
            waves: 1,
            wave_gap: Duration::ZERO,
            kills: 2,
            leader_kills: 1,
            dispatch_kills: 1,
            delete_kills: 0,
            kill_gap: (1.0, 3.0),
            time_scale: 0.05,
            seed: rand::random::<u32>().into(),
            timeout: Duration::from_secs(180),
            report: None,
        }
    }

    /// 50 VMs in five waves, twelve kills (at least four of the leader,
    /// four right after a dispatch), two more while deleting.
    fn full() -> Self {
        Self {
            name: "full".into(),
            vms: 50,
            waves: 5,
            wave_gap: Duration::from_secs(20),
            kills: 12,
            leader_kills: 4,
            dispatch_kills: 4,
            delete_kills: 2,
            kill_gap: (3.0, 10.0),
            time_scale: 0.1,
            timeout: Duration::from_secs(900),
            ..Self::reduced()
        }
    }

    /// The size `CHAOS_SIZE` names, with every `CHAOS_*` override applied.
    pub fn from_env() -> Self {
        let mut size = match var("CHAOS_SIZE").as_deref() {
            None | Some("reduced") => Self::reduced(),
            Some("full") => Self::full(),
            Some(other) => panic!("CHAOS_SIZE={other}: use reduced or full"),
        };
        let number = |name: &str| var(name).map(|v| parse::<f64>(name, &v));
        let count = |name: &str| var(name).map(|v| parse::<usize>(name, &v));
        size.vms = count("CHAOS_VMS").unwrap_or(size.vms);
        size.waves = count("CHAOS_WAVES").unwrap_or(size.waves).max(1);
        size.wave_gap = number("CHAOS_WAVE_GAP").map_or(size.wave_gap, Duration::from_secs_f64);
        size.kills = count("CHAOS_KILLS").unwrap_or(size.kills);
        size.leader_kills = count("CHAOS_LEADER_KILLS").unwrap_or(size.leader_kills);
        size.dispatch_kills = count("CHAOS_DISPATCH_KILLS").unwrap_or(size.dispatch_kills);
        size.delete_kills = count("CHAOS_DELETE_KILLS").unwrap_or(size.delete_kills);
        if let Some(gap) = var("CHAOS_KILL_GAP") {
            let (min, max) = gap
                .split_once('-')
                .unwrap_or_else(|| panic!("CHAOS_KILL_GAP={gap}: use MIN-MAX seconds"));
            size.kill_gap = (parse("CHAOS_KILL_GAP", min), parse("CHAOS_KILL_GAP", max));
        }
        size.time_scale = number("CHAOS_TIME_SCALE").unwrap_or(size.time_scale);
        size.seed = var("CHAOS_SEED").map_or(size.seed, |v| parse("CHAOS_SEED", &v));
        size.timeout = number("CHAOS_READY_TIMEOUT").map_or(size.timeout, Duration::from_secs_f64);
        size.report = var("CHAOS_REPORT").map(PathBuf::from);
        size.check();
        size
    }

    fn check(&self) {
        assert!(self.vms >= 1, "CHAOS_VMS must be at least 1");
        assert!(
            self.leader_kills <= self.kills && self.dispatch_kills <= self.leader_kills,
            "need CHAOS_DISPATCH_KILLS <= CHAOS_LEADER_KILLS <= CHAOS_KILLS, got {} <= {} <= {}",
            self.dispatch_kills,
            self.leader_kills,
            self.kills
        );
        assert!(
            self.kill_gap.0 >= 0.0 && self.kill_gap.0 <= self.kill_gap.1,
            "CHAOS_KILL_GAP must be MIN-MAX with 0 <= MIN <= MAX"
        );
    }

    /// The environment that repeats this run.
    pub fn command(&self) -> String {
        format!(
            "CHAOS_SIZE={} CHAOS_SEED={} CHAOS_VMS={} CHAOS_KILLS={} CHAOS_LEADER_KILLS={} \
             CHAOS_DISPATCH_KILLS={} CHAOS_DELETE_KILLS={} CHAOS_TIME_SCALE={}",
            self.name,
            self.seed,
            self.vms,
            self.kills,
            self.leader_kills,
            self.dispatch_kills,
            self.delete_kills,
            self.time_scale
        )
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn parse<T: std::str::FromStr>(name: &str, value: &str) -> T {
    value
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name}={value} is not a valid number"))
}
