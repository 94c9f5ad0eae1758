//! The ProxmoxVM controller.
//!
//! The decisions are a pure function ([`plan`]); everything else here is the
//! I/O around it, one concept per module:
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | the decisions: spec + observed Proxmox state + status → the next step (pure) |
//! | [`pass`] | one pass as one line: read → preflight → connect → observe and reserve → plan → act → settle → report |
//! | [`schedule`] | what many resources share, decided atomically: VMIDs, placement, per-node import/clone slots |
//! | [`runtime`] | the process around the passes: leader election, the controller and what triggers a pass, memory, queue, wake-ups (a task ended, a slot freed, a template got further, a Secret or ConfigMap read changed), metrics |
//! | [`image`] | the ProxmoxImage controller: files downloaded once per storage, deleted when nothing uses them |
//! | [`container`] | the ProxmoxContainer controller (LXC), beside the VMs' and sharing their context |
//! | [`configs`] | provider config status: Ready, Proxmox version, users |
//! | [`providers`] | provider configs → one shared Proxmox client each |
//! | [`inventory`] | each provider config's cluster view, one read per poll interval |
//! | [`events`] | core v1 events, aggregated |
//! | [`identity`] | who a resource is, resolved once per pass |
//! | [`nocloud`] | the `customCloudInit` seed ISO's files |
//! | [`invalid`] | objects that do not match the schema |

pub mod configs;
pub mod container;
pub mod error;
pub mod events;
pub mod fleet;
pub mod identity;
pub mod image;
pub mod invalid;
pub mod inventory;
pub mod nocloud;
pub mod pass;
pub mod plan;
pub mod providers;
pub mod runtime;
pub mod schedule;

pub use error::Error;
pub use runtime::settings::{LeaderElection, Settings};
pub use runtime::{Runtime, run};
