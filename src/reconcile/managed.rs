//! What every managed kind runs through, whatever the kind: the scope of
//! its watch, the status write, observing its Proxmox task, a VMID for
//! the kinds that take one.

pub mod reserve;
pub mod status;
pub mod task_watch;
pub mod tasks;
pub mod watch;
