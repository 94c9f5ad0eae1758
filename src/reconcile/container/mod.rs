//! The ProxmoxContainer controller: LXC containers managed like
//! ProxmoxVMs, sharing their Context (provider configs and their clients,
//! the scheduler's VMIDs and placement, the cluster view, events).
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | the decisions: resource + observation → one step, the status (pure) |
//! | [`late_init`] | `LateInitialize`: unset spec fields filled from the container (pure) |
//! | [`observed`] | the config as `status.atProvider` shows it, in the spec's shape (pure) |
//! | [`render`] | the spec as Proxmox values: the create call, the managed keys compared for drift (pure) |
//! | [`pass`] | one pass: connect, observe, reserve, plan, act, settle, report |
//! | [`controller`] | the kube-runtime Controller of ProxmoxContainers |

pub mod connection;
pub mod controller;
pub mod known;
pub mod late_init;
pub mod observed;
pub mod pass;
pub mod plan;
pub mod render;

#[cfg(test)]
mod tests;
