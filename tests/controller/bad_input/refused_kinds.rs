//! ProxmoxContainer and ProxmoxImage values the API server refuses at
//! apply time with the shared value rules of `api/rules.rs`: the hostile
//! values of issue 31 that once reached Proxmox (a mount point path with
//! `..` or a config line, `..` as a node, storage or template volume,
//! storage IDs with options, impossible addresses and sizes).

use serde_json::{Value, json};

use super::refused::{Row, row};
use crate::reconcile::containers::{container, debian};

/// A container with `change` merged into a good `forProvider`.
fn ct(change: Value) -> Value {
    container("bad", debian(change))
}

fn mount(path: &str) -> Value {
    json!({"mountPoints": [{"slot": "mp0", "storage": "local-lvm", "size": "1Gi", "path": path}]})
}

fn nic(more: Value) -> Value {
    let mut n = json!({"slot": "net0", "name": "eth0", "bridge": "vmbr0"});
    if let (Some(n), Some(more)) = (n.as_object_mut(), more.as_object()) {
        n.extend(more.clone());
    }
    json!({"networks": [n]})
}

/// A ProxmoxImage with `change` merged into a good download's
/// `forProvider`.
fn img(change: Value) -> Value {
    let mut fp = json!({
        "source": {"url": "https://images.example/noble.qcow2", "checksum": "a".repeat(64),
                   "checksumAlgorithm": "sha256"},
        "content": "import",
    });
    if let (Some(fp), Some(change)) = (fp.as_object_mut(), change.as_object()) {
        fp.extend(change.clone());
    }
    json!({
        "apiVersion": "proxmox.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": "bad"},
        "spec": {"forProvider": fp, "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"}},
    })
}

/// Every row of the container and image kinds.
pub fn rows() -> Vec<Row> {
    vec![
        row(
            "container mount point path with ..",
            ct(mount("/srv/../../etc")),
            "path must not contain .. parts",
        ),
        row(
            "container mount point path with a config line",
            ct(mount("/srv\nlxc.apparmor.profile: unconfined")),
            "must not contain control characters",
        ),
        row(
            "container template volume ..",
            ct(json!({"template": {"volume": "local:vztmpl/.."}})),
            "volume must not contain .. path parts",
        ),
        row(
            "container node ..",
            ct(json!({"node": ".."})),
            "must be a Proxmox node name",
        ),
        row(
            "container rootfs storage ..",
            ct(json!({"rootfs": {"storage": "..", "size": "4Gi"}})),
            "must be a Proxmox storage ID",
        ),
        row(
            "container OCI storage with options",
            ct(
                json!({"template": {"oci": {"reference": "docker.io/library/alpine:3.21",
                "storage": "local,cache=unsafe"}}}),
            ),
            "must be a Proxmox storage ID",
        ),
        row(
            "container memory 1Pi",
            ct(json!({"memory": "1Pi"})),
            "must be at most 64Ti",
        ),
        row(
            "container rootfs 1Ei",
            ct(json!({"rootfs": {"storage": "local-lvm", "size": "1Ei"}})),
            "must be at most 1Pi",
        ),
        row(
            "container IPv4 10.0.0.300/24",
            ct(nic(json!({"ip": "10.0.0.300/24"}))),
            "ip must be dhcp or an IPv4 address",
        ),
        row(
            "container gateway is its own address",
            ct(nic(json!({"ip": "10.0.0.5/24", "gateway": "10.0.0.5"}))),
            "gateway is the interface's own address",
        ),
        row(
            "container IPv6 :::::/999",
            ct(nic(json!({"ip6": ":::::/999"}))),
            "ip6 must be dhcp, auto or an IPv6 address",
        ),
        row(
            "container ssh key with a second line",
            ct(json!({"sshKeys": ["ssh-ed25519 AAAA a@b\nssh-rsa AAAA evil"]})),
            "one OpenSSH public key on one line",
        ),
        row(
            "image storage ..",
            img(json!({"storage": ".."})),
            "must be a Proxmox storage ID",
        ),
        row(
            "image template storage with options",
            img(json!({"template": {"storage": "local-lvm,cache=unsafe"}})),
            "must be a Proxmox storage ID",
        ),
        row(
            "image node ..",
            img(json!({"nodes": [".."]})),
            "nodes must be Proxmox node names",
        ),
        row(
            "image importFrom ..",
            img(json!({"source": {"importFrom": "local:../../etc/pve/priv/shadow.cfg"}})),
            "importFrom must not contain .. path parts",
        ),
        row(
            "image filename another image's default name",
            img(json!({"filename": "noble-aaaaaaaaaaaa-0123abcd.qcow2"})),
            "filename must not be one the provider gives",
        ),
        row(
            "VM disk filename a container's OCI pull name could be",
            super::refused::vm_with(json!({"disks": [{"slot": "scsi0", "storage": "local-lvm",
                "image": {"url": "https://images.example/a.qcow2", "checksum": "a".repeat(64),
                    "checksumAlgorithm": "sha256", "filename": "a-0123456789ab.qcow2"}}]})),
            "filename must not be one the provider gives",
        ),
        row(
            "image OCI reference with a config line",
            img(
                json!({"source": {"oci": "docker.io/library/alpine:3.21\nx"}, "content": "vztmpl"}),
            ),
            "reference must name an image with a tag",
        ),
    ]
}
