//! ProxmoxContainer rules: the shared value rules of `api/rules.rs` refuse
//! the hostile values issue 31 found reaching Proxmox (paths with `..` or a
//! newline, node names that become URL paths, impossible addresses and
//! sizes), naming the field.

use serde_json::{Value, json};

use super::{assert_verdict, refusals, schema_of};
use crate::api::ProxmoxContainer;
use kube::CustomResourceExt;

fn container(for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxContainer",
        "metadata": {"name": "ct", "namespace": "default"},
        "spec": {"forProvider": for_provider},
    })
}

/// A good container with `change` merged in (one level deep).
fn with(change: Value) -> Value {
    let mut fp = json!({
        "node": "pve",
        "template": {"volume": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"},
        "rootfs": {"storage": "local-lvm", "size": "4Gi"},
        "networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr0", "ip": "dhcp"}],
    });
    if let (Some(fp), Some(change)) = (fp.as_object_mut(), change.as_object()) {
        fp.extend(change.clone());
    }
    fp
}

fn mount(path: &str) -> Value {
    json!({"mountPoints": [{"slot": "mp0", "storage": "local-lvm", "size": "1Gi", "path": path}]})
}

fn net(more: Value) -> Value {
    let mut n = json!({"slot": "net0", "name": "eth0", "bridge": "vmbr0"});
    if let (Some(n), Some(more)) = (n.as_object_mut(), more.as_object()) {
        n.extend(more.clone());
    }
    json!({"networks": [n]})
}

#[test]
fn proxmox_container_value_rules() {
    let schema = schema_of(ProxmoxContainer::crd());
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("a good container", with(json!({})), None),
        ("mount point", with(mount("/srv/data")), None),
        (
            "vnet= as users write it for Proxmox",
            with(net(json!({"vnet": "web"}))),
            Some("write it in bridge"),
        ),
        (
            "mount point path with ..",
            with(mount("/srv/../../etc")),
            Some("path must not contain .. parts"),
        ),
        (
            "mount point path ending in ..",
            with(mount("/srv/..")),
            Some("path must not contain .. parts"),
        ),
        (
            "mount point path with a config line",
            with(mount("/srv\nlxc.apparmor.profile: unconfined")),
            Some("must not contain control characters"),
        ),
        (
            "relative mount point path",
            with(mount("srv")),
            Some("path must be absolute"),
        ),
        (
            "template volume ..",
            with(json!({"template": {"volume": "local:vztmpl/.."}})),
            Some("volume must not contain .. path parts"),
        ),
        (
            "template volume with a newline",
            with(json!({"template": {"volume": "local:vztmpl/a\nb.tar.zst"}})),
            Some("must not contain control characters"),
        ),
        (
            "node ..",
            with(json!({"node": ".."})),
            Some("must be a Proxmox node name"),
        ),
        (
            "allowed node with a slash",
            json!({
                "template": {"volume": "local:vztmpl/debian.tar.zst"},
                "rootfs": {"storage": "local-lvm", "size": "4Gi"},
                "allowedNodes": ["pve/../x"],
            }),
            Some("allowedNodes must be Proxmox node names"),
        ),
        (
            "rootfs storage ..",
            with(json!({"rootfs": {"storage": "..", "size": "4Gi"}})),
            Some("must be a Proxmox storage ID"),
        ),
        (
            "rootfs storage with options",
            with(json!({"rootfs": {"storage": "local-lvm,cache=unsafe", "size": "4Gi"}})),
            Some("must be a Proxmox storage ID"),
        ),
        (
            "1 EiB rootfs",
            with(json!({"rootfs": {"storage": "local-lvm", "size": "1Ei"}})),
            Some("must be at most 1Pi"),
        ),
        (
            "1 PiB rootfs",
            with(json!({"rootfs": {"storage": "local-lvm", "size": "1Pi"}})),
            None,
        ),
        (
            "1 PiB memory",
            with(json!({"memory": "1Pi"})),
            Some("must be at most 64Ti"),
        ),
        (
            "1 PiB swap",
            with(json!({"swap": "1Pi"})),
            Some("must be at most 64Ti"),
        ),
        (
            "IPv4 octet 300",
            with(net(json!({"ip": "10.0.0.300/24"}))),
            Some("ip must be dhcp or an IPv4 address"),
        ),
        (
            "static IPv4",
            with(net(json!({"ip": "10.0.0.5/24", "gateway": "10.0.0.1"}))),
            None,
        ),
        (
            "gateway is its own address",
            with(net(json!({"ip": "10.0.0.5/24", "gateway": "10.0.0.5"}))),
            Some("gateway is the interface's own address"),
        ),
        (
            "gateway octet 256",
            with(net(json!({"ip": "10.0.0.5/24", "gateway": "10.0.0.256"}))),
            Some("gateway must be an IPv4 address"),
        ),
        (
            "IPv6 :::::/999",
            with(net(json!({"ip6": ":::::/999"}))),
            Some("ip6 must be dhcp, auto or an IPv6 address"),
        ),
        ("IPv6", with(net(json!({"ip6": "fd00::5/64"}))), None),
        (
            "IPv4 as ip6",
            with(net(json!({"ip6": "10.0.0.5/24"}))),
            Some("ip6 must be dhcp, auto or an IPv6 address"),
        ),
        (
            "nameserver not an address",
            with(json!({"dns": {"nameservers": ["1.2.3.4.5"]}})),
            Some("nameservers must be IP addresses"),
        ),
        (
            "ssh key with a second line",
            with(json!({"sshKeys": ["ssh-ed25519 AAAA a@b\nssh-rsa AAAA evil"]})),
            Some("one OpenSSH public key on one line"),
        ),
        (
            "OCI registry with a path",
            with(json!({"template": {"oci": {"reference": "docker.io/library/alpine:3.21"}}})),
            None,
        ),
        (
            "OCI storage with options",
            with(
                json!({"template": {"oci": {"reference": "docker.io/library/alpine:3.21", "storage": "local,x=y"}}}),
            ),
            Some("must be a Proxmox storage ID"),
        ),
    ];
    for (name, for_provider, want) in cases {
        let got = refusals(&schema, &container(for_provider), None);
        assert_verdict(name, &got, want);
    }
}

/// `restore`: exactly one of template and restore, one archive source of
/// a container, nothing the archive brings, and fixed once created.
#[test]
fn proxmox_container_restore_rules() {
    let schema = schema_of(ProxmoxContainer::crd());
    let archive = "local:backup/vzdump-lxc-100-2026_12_05-01_00_00.tar.zst";
    let restoring = |restore: Value, more: Value| {
        let mut fp = with(more);
        if let Some(fp) = fp.as_object_mut() {
            fp.remove("template");
            fp.insert("restore".into(), restore);
        }
        fp
    };
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "restore by archive",
            restoring(json!({"archive": archive}), json!({})),
            None,
        ),
        (
            "restore by a ProxmoxBackup",
            restoring(json!({"backupRef": {"name": "app-nightly"}}), json!({})),
            None,
        ),
        (
            "restore naming both",
            restoring(
                json!({"archive": archive, "backupRef": {"name": "b"}}),
                json!({}),
            ),
            Some("restore needs exactly one of archive and backupRef"),
        ),
        (
            "restore naming neither",
            restoring(json!({}), json!({})),
            Some("restore needs exactly one of archive and backupRef"),
        ),
        (
            "restore of a VM archive",
            restoring(
                json!({"archive": "local:backup/vzdump-qemu-100-x.vma.zst"}),
                json!({}),
            ),
            Some("archive must be a container backup volume ID"),
        ),
        (
            "restore with a template",
            with(json!({"restore": {"archive": archive}})),
            Some("set exactly one of template and restore"),
        ),
        (
            "neither template nor restore",
            {
                let mut fp = with(json!({}));
                fp.as_object_mut().map(|fp| fp.remove("template"));
                fp
            },
            Some("set exactly one of template and restore"),
        ),
        (
            "restore with mount points",
            restoring(json!({"archive": archive}), mount("/srv/data")),
            Some("a restored container gets its mount points from the archive"),
        ),
        (
            "restore with a password",
            restoring(
                json!({"archive": archive}),
                json!({"passwordSecretRef": {"name": "pw", "key": "password"}}),
            ),
            Some("keeps the archive's root password and SSH keys"),
        ),
    ];
    for (name, for_provider, want) in cases {
        let got = refusals(&schema, &container(for_provider), None);
        assert_verdict(name, &got, want);
    }
    // Once created, the source is fixed.
    let old = container(restoring(json!({"archive": archive}), json!({})));
    let other = "local:backup/vzdump-lxc-101-2026_12_05-01_00_00.tar.zst";
    let changed = container(restoring(json!({"archive": other}), json!({})));
    let got = refusals(&schema, &changed, Some(&old));
    assert_verdict(
        "restore changed",
        &got,
        Some("the restore source cannot be changed"),
    );
    let dropped = container(with(json!({})));
    let got = refusals(&schema, &dropped, Some(&old));
    assert_verdict(
        "restore removed",
        &got,
        Some("restore cannot be added or removed"),
    );
}
