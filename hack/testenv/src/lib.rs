//! Control plane launcher (see hack/control-plane).
