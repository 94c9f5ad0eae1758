//! ProxmoxImage rules, and the `disks[].image.name` form of a VM.

use serde_json::{Value, json};

use super::{assert_verdict, refusals, schema_of, vm};
use crate::api::{ProxmoxImage, ProxmoxVM};
use kube::CustomResourceExt;

fn image(for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": "noble", "namespace": "default"},
        "spec": {"forProvider": for_provider},
    })
}

fn url() -> Value {
    json!({"url": "https://images.example/noble.img", "checksum": "a".repeat(64),
           "checksumAlgorithm": "sha256"})
}

#[test]
fn proxmox_image_rules() {
    let schema = schema_of(ProxmoxImage::crd());
    let with = |source: Value, more: Value| {
        let mut fp = json!({"source": source, "content": "import"});
        if let (Some(fp), Some(more)) = (fp.as_object_mut(), more.as_object()) {
            fp.extend(more.clone());
        }
        fp
    };
    let mut both = url();
    both["importFrom"] = json!("local:import/noble.qcow2");
    let mut no_checksum = url();
    no_checksum.as_object_mut().unwrap().remove("checksum");
    let mut short = url();
    short["checksum"] = json!("abc");
    let mut ftp = url();
    ftp["url"] = json!("ftp://images.example/noble.img");
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("a download", with(url(), json!({})), None),
        (
            "an existing volume",
            with(json!({"importFrom": "local:import/noble.qcow2"}), json!({})),
            None,
        ),
        (
            "no source",
            with(json!({}), json!({})),
            Some("exactly one of url, importFrom and oci"),
        ),
        (
            "two sources",
            with(both, json!({})),
            Some("exactly one of url, importFrom and oci"),
        ),
        (
            "url without checksum",
            with(no_checksum, json!({})),
            Some("url needs checksum and checksumAlgorithm"),
        ),
        (
            "short checksum",
            with(short, json!({})),
            Some("checksum length does not match"),
        ),
        (
            "not http",
            with(ftp, json!({})),
            Some("must be an http:// or https:// URL"),
        ),
        (
            "bad volume",
            with(json!({"importFrom": "/var/lib/vz/x"}), json!({})),
            Some("must be a Proxmox volume ID"),
        ),
        (
            "oci not vztmpl",
            with(json!({"oci": "docker.io/library/alpine:3.20"}), json!({})),
            Some("content must be vztmpl"),
        ),
        (
            "template of an iso",
            json!({"source": url(), "content": "iso", "template": {"storage": "local-lvm"}}),
            Some("content must be import"),
        ),
        (
            "import file name",
            with(url(), json!({"filename": "noble.img"})),
            Some("must end in .qcow2, .raw or .vmdk"),
        ),
        (
            "good import file name",
            with(url(), json!({"filename": "noble.qcow2"})),
            None,
        ),
        (
            "iso file name",
            json!({"source": url(), "content": "iso", "filename": "seed.qcow2"}),
            Some("must end in .iso or .img"),
        ),
        (
            "vztmpl file name",
            json!({"source": url(), "content": "vztmpl", "filename": "rootfs.tgz"}),
            Some("must end in .tar.gz, .tar.xz, .tar.zst, .tar.bz2 or .tar"),
        ),
        (
            "good vztmpl file name",
            json!({"source": url(), "content": "vztmpl", "filename": "rootfs.tar.zst"}),
            None,
        ),
        (
            "file name without url",
            with(
                json!({"importFrom": "local:import/noble.qcow2"}),
                json!({"filename": "x.qcow2"}),
            ),
            Some("only allowed with source.url"),
        ),
        (
            "oci file name",
            json!({"source": {"oci": "docker.io/library/alpine:3.20"}, "content": "vztmpl", "filename": "alpine.tar.zst"}),
            Some("filename must end in .tar"),
        ),
        (
            "good oci file name",
            json!({"source": {"oci": "docker.io/library/alpine:3.20"}, "content": "vztmpl", "filename": "alpine.tar"}),
            None,
        ),
        // Issue 31: a file name another resource's default name could be.
        (
            "another image's default name",
            with(
                url(),
                json!({"filename": "noble-aaaaaaaaaaaa-0123abcd.qcow2"}),
            ),
            Some("filename must not be one the provider gives"),
        ),
        (
            "a VM disk's own download name",
            with(url(), json!({"filename": "noble-0123456789ab.qcow2"})),
            Some("filename must not be one the provider gives"),
        ),
        (
            "a container's OCI pull name",
            json!({"source": {"oci": "docker.io/library/alpine:3.21"}, "content": "vztmpl",
                   "filename": "alpine_3.21-0123456789ab.tar"}),
            Some("filename must not be one the provider gives"),
        ),
        (
            "a seed ISO's name",
            json!({"source": url(), "content": "iso", "filename": "crossplane-ci-100-x.iso"}),
            Some("filename must not be one the provider gives"),
        ),
        (
            "a name of its own",
            with(url(), json!({"filename": "noble-2024.qcow2"})),
            None,
        ),
        // The shared value rules (issue 31): what once reached Proxmox.
        (
            "storage ..",
            with(url(), json!({"storage": ".."})),
            Some("must be a Proxmox storage ID"),
        ),
        (
            "template storage with options",
            with(
                url(),
                json!({"template": {"storage": "local-lvm,cache=unsafe"}}),
            ),
            Some("must be a Proxmox storage ID"),
        ),
        (
            "node ..",
            with(url(), json!({"nodes": [".."]})),
            Some("nodes must be Proxmox node names"),
        ),
        (
            "importFrom with ..",
            with(
                json!({"importFrom": "local:../../etc/pve/priv/shadow.cfg"}),
                json!({}),
            ),
            Some("importFrom must not contain .. path parts"),
        ),
        (
            "importFrom with a newline",
            with(json!({"importFrom": "local:import/a\nb.qcow2"}), json!({})),
            Some("must be a Proxmox volume ID"),
        ),
        (
            "oci without a tag",
            json!({"source": {"oci": "docker.io/library/alpine"}, "content": "vztmpl"}),
            Some("reference must name an image with a tag"),
        ),
        (
            "oci with a newline",
            json!({"source": {"oci": "docker.io/library/alpine:3.20\nx"}, "content": "vztmpl"}),
            Some("reference must name an image with a tag"),
        ),
    ];
    for (name, fp, want) in cases {
        assert_verdict(name, &refusals(&schema, &image(fp), None), want);
    }
}

#[test]
fn a_disk_image_is_a_name_or_a_download() {
    let schema = schema_of(ProxmoxVM::crd());
    let disk = |image: Value| json!({"disks": [{"slot": "scsi0", "storage": "local-lvm", "image": image}]});
    let mut both = url();
    both["name"] = json!("noble");
    let mut named_file = json!({"name": "noble"});
    named_file["filename"] = json!("x.qcow2");
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("a ProxmoxImage", disk(json!({"name": "noble"})), None),
        ("a download", disk(url()), None),
        ("both", disk(both), Some("exactly one of name and url")),
        (
            "neither",
            disk(json!({})),
            Some("exactly one of name and url"),
        ),
        (
            "a name with a file name",
            disk(named_file),
            Some("filename is only allowed with url"),
        ),
        (
            "a name with a checksum",
            disk(
                json!({"name": "noble", "checksum": "a".repeat(64), "checksumAlgorithm": "sha256"}),
            ),
            Some("only allowed with url"),
        ),
        (
            "not a name",
            disk(json!({"name": "Noble_1"})),
            Some("must be the name of a ProxmoxImage"),
        ),
    ];
    for (name, fp, want) in cases {
        assert_verdict(name, &refusals(&schema, &vm(fp), None), want);
    }
}
