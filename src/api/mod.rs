//! Kubernetes API types: `ProxmoxVM`, `ProviderConfig`, `ClusterProviderConfig`.
