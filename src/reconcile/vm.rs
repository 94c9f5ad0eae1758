//! The ProxmoxVM slice: its pure [`plan`], the [`pass`] around it, its
//! wakers ([`wake`]: templates, Secrets and ConfigMaps read) and the
//! `customCloudInit` seed ISO's files ([`nocloud`]).

pub mod nocloud;
pub mod pass;
pub mod plan;
pub mod wake;
