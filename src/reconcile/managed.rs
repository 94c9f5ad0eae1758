//! What every managed kind runs through, whatever the kind:
//!
//! | module | what |
//! |---|---|
//! | [`envelope`] | the pass's hold: held here, report-only, or wait; cancelled when the term ends |
//! | [`watch`] | the scope of every watch |
//! | [`fresh`] | read-your-writes: the resource as this replica last wrote it |
//! | [`status`] | the status write (server-side apply, on the version read) |
//! | [`tasks`], [`task_watch`] | a Proxmox task observed, and the resource woken when it ended |
//! | [`reserve`] | a VMID, for the kinds that take one |
//! | [`states`] | how many of each kind exist, are Ready, are Synced (Crossplane's state metrics) |
//! | [`images`] | a ProxmoxImage about to be used, read afresh |
//! | [`backups`] | the ProxmoxBackup a restore names, read afresh |
//! | [`crud`] | the synchronous path: observe → diff → one call, for kinds made by plain calls |
//! | [`guests`] | the guest a resource names by reference (a snapshot's, a backup's), and its wake-up |
//! | [`selector`] | kinds choosing other kinds' objects by label: those of a namespace, and the wake-up when one changes |
//! | [`guest_firewall`], [`ip_sets`] | a guest's own firewall read and written; an IP set correction sent (the cluster's or a guest's) |
//! | [`firewall_wake`] | the guests whose firewall names a set or group woken when it becomes Ready |

pub mod backups;
pub mod connection_secret;
pub mod crud;
pub mod envelope;
pub mod firewall_wake;
pub mod fresh;
pub mod guard;
pub mod guest_firewall;
pub mod guests;
pub mod images;
pub mod ip_sets;
pub mod names;
pub mod pools;
pub mod reserve;
pub mod selector;
pub mod states;
pub mod status;
pub mod task_watch;
pub mod tasks;
pub mod watch;
