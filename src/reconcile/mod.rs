//! The ProxmoxVM controller: pure decision logic plus the Kubernetes and Proxmox edges.

pub mod plan;
