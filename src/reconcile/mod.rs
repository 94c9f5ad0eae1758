//! The controllers of every kind: each kind a slice ([`vm`], [`container`],
//! [`image`], [`fleet`], [`configs`]) with a pure decision core and the I/O
//! around it; beneath them what they share, one concept per module:
//!
//! | module | concept |
//! |---|---|
//! | [`vm`] | the ProxmoxVM slice: `plan` (spec + observed Proxmox state + status → the next step, pure) and `pass` (read → preflight → connect → observe and reserve → plan → act → settle → report) |
//! | [`common`] | the vocabulary every kind uses, naming none: a provider config's state, the scheduler's grants, a task's state, the owner marker, events (pure) |
//! | [`schedule`] | what many resources share, decided atomically: VMIDs, placement, per-node import/clone slots |
//! | [`process`] | starting and stopping: the metrics server and the controllers until shutdown |
//! | [`controllers`] | the composition root: every kind's watch and what triggers its pass |
//! | [`context`] | what every pass shares |
//! | [`managed`] | what every managed kind runs through (the scope of its watch) |
//! | [`runtime`] | process infrastructure that names no kind: leader election, memory, queue, wake-ups (a task ended, a slot freed, a template got further, a Secret or ConfigMap read changed), metrics |
//! | [`image`] | the ProxmoxImage controller: files downloaded once per storage, deleted when nothing uses them |
//! | [`container`] | the ProxmoxContainer controller (LXC), beside the VMs' and sharing their context |
//! | [`pool`] | the ProxmoxPool controller: a resource pool and its access, through the shared CRUD path |
//! | [`backup_job`] | the ProxmoxBackupJob controller: a scheduled backup of the guests a selector or pool chooses, through the shared CRUD pass |
//! | [`configs`] | provider config status: Ready, Proxmox version, users |
//! | [`providers`] | provider configs → one shared Proxmox client each |
//! | [`inventory`] | each provider config's cluster view, one read per poll interval |
//! | [`events`] | core v1 events, aggregated |
//! | [`identity`] | who a resource is, resolved once per pass |
//! | [`invalid`] | objects that do not match the schema |

pub mod backup;
pub mod backup_job;
pub mod common;
pub mod configs;
pub mod container;
pub mod context;
pub mod controllers;
pub mod downloads;
pub mod error;
pub mod events;
pub mod fleet;
pub mod identity;
pub mod image;
pub mod invalid;
pub mod inventory;
pub mod ip_set;
pub mod managed;
pub mod pool;
pub mod process;
pub mod providers;
pub mod runtime;
pub mod schedule;
pub mod sdn;
pub mod security_group;
pub mod snapshot;
pub mod vm;

pub use error::Error;
pub use process::{Runtime, run};
pub use runtime::settings::{LeaderElection, Settings};
