//! The ProxmoxVM slice: its pure [`plan`], the [`pass`] around it, and
//! the `customCloudInit` seed ISO's files ([`nocloud`]).

pub mod nocloud;
pub mod pass;
pub mod plan;
