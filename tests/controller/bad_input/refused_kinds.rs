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
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
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
        // The rules the container and image kinds had before issue 31,
        // on the real API server too (the table grows toward the VM's).
        row(
            "container without a template",
            ct(json!({"template": {}})),
            "template needs exactly one of volume, oci and image",
        ),
        row(
            "container with two template sources",
            ct(json!({"template": {"volume": "local:vztmpl/a.tar.zst", "image": {"name": "a"}}})),
            "template needs exactly one of volume, oci and image",
        ),
        row(
            "container OCI reference without a tag",
            ct(json!({"template": {"oci": {"reference": "docker.io/library/alpine"}}})),
            "reference must name an image with a tag",
        ),
        row(
            "container template volume of an iso",
            ct(json!({"template": {"volume": "local:iso/debian.iso"}})),
            "volume must be a container template volume",
        ),
        row(
            "container mount point slot mp256",
            ct(
                json!({"mountPoints": [{"slot": "mp256", "storage": "local-lvm", "size": "1Gi", "path": "/a"}]}),
            ),
            "slot must be mp0 ... mp255",
        ),
        row(
            "container mount point slot twice",
            ct(json!({"mountPoints": [
                {"slot": "mp0", "storage": "local-lvm", "size": "1Gi", "path": "/a"},
                {"slot": "mp0", "storage": "local-lvm", "size": "1Gi", "path": "/b"}]})),
            "each mount point slot may appear only once",
        ),
        row(
            "container mount point path /",
            ct(mount("/")),
            "path must be absolute, not /",
        ),
        row(
            "container mount point path with a comma",
            ct(mount("/a,ro=1")),
            "without commas",
        ),
        row(
            "container mount point of 100Mi",
            ct(
                json!({"mountPoints": [{"slot": "mp0", "storage": "local-lvm", "size": "100Mi", "path": "/a"}]}),
            ),
            "size must be at least 1Gi",
        ),
        row(
            "container network slot eth0",
            ct(json!({"networks": [{"slot": "eth0", "name": "eth0", "bridge": "vmbr0"}]})),
            "slot must be net0 ... net31",
        ),
        row(
            "container network slot twice",
            ct(json!({"networks": [
                {"slot": "net0", "name": "eth0", "bridge": "vmbr0"},
                {"slot": "net0", "name": "eth1", "bridge": "vmbr0"}]})),
            "each network slot may appear only once",
        ),
        row(
            "container interface name twice",
            ct(json!({"networks": [
                {"slot": "net0", "name": "eth0", "bridge": "vmbr0"},
                {"slot": "net1", "name": "eth0", "bridge": "vmbr0"}]})),
            "each network interface name may appear only once",
        ),
        row(
            "container interface name with a space",
            ct(nic(json!({"name": "eth 0"}))),
            "name must be an interface name",
        ),
        row(
            "container bridge with options",
            ct(nic(json!({"bridge": "vmbr0,rate=1"}))),
            "must be a Linux bridge name",
        ),
        row(
            "container VLAN 5000",
            ct(nic(json!({"vlan": 5000}))),
            "should be less than or equal to 4094",
        ),
        row(
            "container gateway with DHCP",
            ct(nic(json!({"ip": "dhcp", "gateway": "10.0.0.1"}))),
            "gateway needs a static ip",
        ),
        row(
            "container memory 8Mi",
            ct(json!({"memory": "8Mi"})),
            "memory must be at least 16Mi",
        ),
        row(
            "container rootfs of 100Mi",
            ct(json!({"rootfs": {"storage": "local-lvm", "size": "100Mi"}})),
            "rootfs.size must be at least 1Gi",
        ),
        row(
            "container no cores",
            ct(json!({"cpu": {"cores": 0}})),
            "should be greater than or equal to 1",
        ),
        row(
            "container vmid 99",
            ct(json!({"vmid": 99})),
            "should be greater than or equal to 100",
        ),
        row(
            "container hostname with a dot at the end",
            ct(json!({"hostname": "web."})),
            "hostname must be a DNS name",
        ),
        row(
            "container tag with a space",
            ct(json!({"tags": ["a b"]})),
            "tags contain letters, digits",
        ),
        row(
            "container search domain with a space",
            ct(json!({"dns": {"searchDomain": "a b"}})),
            "searchDomain must be a DNS name",
        ),
        row(
            "container description with the owner marker",
            ct(
                json!({"description": "Managed by crossplane-provider-proxmox: ProxmoxContainer x/y uid=z"}),
            ),
            "description cannot contain the provider's owner marker",
        ),
        row(
            "container node and allowedNodes",
            ct(json!({"allowedNodes": ["pve"]})),
            "set node or allowedNodes, not both",
        ),
        row(
            "image without a source",
            img(json!({"source": {}})),
            "exactly one of url, importFrom and oci",
        ),
        row(
            "image with two sources",
            img(
                json!({"source": {"url": "https://images.example/a.qcow2", "checksum": "a".repeat(64),
                "checksumAlgorithm": "sha256", "importFrom": "local:import/a.qcow2"}}),
            ),
            "exactly one of url, importFrom and oci",
        ),
        row(
            "image url without a checksum",
            img(json!({"source": {"url": "https://images.example/a.qcow2"}})),
            "url needs checksum and checksumAlgorithm",
        ),
        row(
            "image checksum too short",
            img(
                json!({"source": {"url": "https://images.example/a.qcow2", "checksum": "abc", "checksumAlgorithm": "sha256"}}),
            ),
            "checksum length does not match",
        ),
        row(
            "image ftp url",
            img(
                json!({"source": {"url": "ftp://images.example/a.qcow2", "checksum": "a".repeat(64), "checksumAlgorithm": "sha256"}}),
            ),
            "must be an http:// or https:// URL",
        ),
        row(
            "image OCI as an import",
            img(json!({"source": {"oci": "docker.io/library/alpine:3.21"}})),
            "content must be vztmpl",
        ),
        row(
            "image template of an iso",
            img(json!({"content": "iso", "template": {"storage": "local-lvm"}})),
            "content must be import",
        ),
        row(
            "image import file name .img",
            img(json!({"filename": "noble.img"})),
            "must end in .qcow2, .raw or .vmdk",
        ),
        row(
            "image filename without a download",
            img(json!({"source": {"importFrom": "local:import/a.qcow2"}, "filename": "b.qcow2"})),
            "only allowed with source.url",
        ),
        row(
            "image OCI filename not .tar",
            img(
                json!({"source": {"oci": "docker.io/library/alpine:3.21"}, "content": "vztmpl", "filename": "alpine.tar.zst"}),
            ),
            "filename must end in .tar",
        ),
        row(
            "image content unknown",
            img(json!({"content": "backup"})),
            "Unsupported value",
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
