//! Proxmox VE REST client. Knows nothing of Kubernetes.
