//! `pve-sim`: an in-memory Proxmox VE API simulator. Shares no code with `crate::proxmox`.
