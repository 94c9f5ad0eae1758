//! One variant's simulator: fresh, with a token for the actor under test
//! (whose requests and tasks are then its records) and a referee that only
//! reads.

use std::path::Path;

use crate::child::Neighbour;
use crate::cli::RunArgs;
use crate::sim::{Request, Sim, SimOptions, Task, Token};

pub struct Arena {
    pub sim: Sim,
    pub actor: Token,
    pub referee: pve_client::Client,
}

impl Arena {
    pub async fn start(
        args: &RunArgs,
        binary: &Path,
        actor: &str,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let actor = Token::root(actor);
        let referee = Token::root("referee");
        let sim = Sim::start(SimOptions {
            binary,
            nodes: &args.nodes,
            time_scale: args.time_scale,
            tokens: &[&actor, &referee],
            dir,
        })
        .await?;
        let referee = sim.client(&referee, generous_limits())?;
        Ok(Self {
            sim,
            actor,
            referee,
        })
    }

    /// The actor's requests and tasks, and the simulator's CPU and memory
    /// over the run; stops the simulator.
    pub async fn finish(self) -> anyhow::Result<(Vec<Request>, Vec<Task>, Neighbour)> {
        let id = &self.actor.id;
        let requests = self
            .sim
            .requests()
            .await?
            .into_iter()
            .filter(|r| r.user.as_deref() == Some(id.as_str()))
            .collect();
        let tasks = self
            .sim
            .tasks()
            .await?
            .into_iter()
            .filter(|t| &t.user == id)
            .collect();
        let samples = self.sim.stop().await;
        let sim = Neighbour {
            name: "pve-sim".to_owned(),
            samples,
        };
        Ok((requests, tasks, sim))
    }
}

/// Client limits far above anything measured: the referee (and the
/// predecessor driver, a Go http.Client without limits) never wait.
pub fn generous_limits() -> pve_client::Limits {
    pve_client::Limits {
        max_concurrent_requests: 64,
        requests_per_second: 10_000.0,
        burst: 10_000,
        ..pve_client::Limits::default()
    }
}
