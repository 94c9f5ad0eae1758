//! Invalid objects the API server refuses at apply time, each with the
//! message a person reads in `kubectl apply`'s error.

use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, ValidationDirective};
use serde_json::{Value, json};

use crate::reconcile::manifests;
use crate::support;

/// One row: what is wrong, the object, a part of the server's message.
pub struct Row {
    pub what: &'static str,
    pub object: Value,
    pub message: &'static str,
}

pub fn row(what: &'static str, object: Value, message: &'static str) -> Row {
    Row {
        what,
        object,
        message,
    }
}

/// A ProxmoxVM whose `forProvider` is a good imported VM with `change`
/// merged in (one level deep; `null` removes a field).
pub fn vm_with(change: Value) -> Value {
    let mut for_provider = manifests::imported(json!({}));
    merge(&mut for_provider, &change);
    manifests::vm("bad", for_provider)
}

fn merge(into: &mut Value, change: &Value) {
    if let (Some(into), Some(change)) = (into.as_object_mut(), change.as_object()) {
        for (k, v) in change {
            if v.is_null() {
                into.remove(k);
            } else {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A VM with one disk, network or cloud-init setting replaced.
fn vm_disk(disk: Value) -> Value {
    vm_with(json!({"disks": [disk]}))
}

fn vm_net(net: Value) -> Value {
    vm_with(json!({"networks": [net]}))
}

fn vm_cloud_init(cloud_init: Value) -> Value {
    vm_with(json!({"cloudInit": cloud_init}))
}

/// A ProxmoxVM with its whole `spec` given.
fn vm_spec(spec: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxVM",
        "metadata": {"name": "bad"},
        "spec": spec,
    })
}

/// Notes holding another resource's owner marker line.
pub const FORGED_NOTES: &str =
    "db notes\nManaged by crossplane-provider-proxmox: ProxmoxVM other-team/db uid=0000-other";

const FINGERPRINT: &str = "AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB";

/// A provider config of `kind` with `change` merged into a good spec.
pub fn config_with(kind: &str, change: Value) -> Value {
    let mut spec = json!({
        "endpoint": "https://pve.example.com:8006",
        "credentials": {"source": "Secret", "secretRef": {"name": "pve-credentials"}},
    });
    if kind == "ClusterProviderConfig" {
        spec["credentials"]["secretRef"]["namespace"] = json!("crossplane-system");
    }
    merge(&mut spec, &change);
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "bad"},
        "spec": spec,
    })
}

fn pc(change: Value) -> Value {
    config_with("ProviderConfig", change)
}

fn cpc(change: Value) -> Value {
    config_with("ClusterProviderConfig", change)
}

fn image(change: Value) -> Value {
    let mut image = json!({
        "url": "https://images.example/jammy.qcow2",
        "checksum": "a".repeat(64),
        "checksumAlgorithm": "sha256",
    });
    merge(&mut image, &change);
    json!({"slot": "scsi0", "storage": "local-lvm", "image": image})
}

/// Every row.
pub fn rows() -> Vec<Row> {
    let ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIC6 user@host";
    vec![
        // ProxmoxVM: identity and placement
        row(
            "vmid below 100",
            vm_with(json!({"vmid": 99})),
            "should be greater than or equal to 100",
        ),
        row(
            "vmid as text",
            vm_with(json!({"vmid": "one hundred"})),
            ".spec.forProvider.vmid: expected numeric",
        ),
        row(
            "node name",
            vm_with(json!({"node": "-pve"})),
            "must be a Proxmox node name",
        ),
        row(
            "node outside allowedNodes",
            vm_with(json!({"node": "pve3", "allowedNodes": ["pve1", "pve2"]})),
            "node must be one of allowedNodes",
        ),
        row(
            "allowedNodes name",
            vm_with(json!({"node": null, "allowedNodes": ["pve_2"]})),
            "allowedNodes must be Proxmox node names",
        ),
        row(
            "VM name",
            vm_with(json!({"name": "web_1"})),
            "must be a DNS name",
        ),
        row(
            "pool",
            vm_with(json!({"pool": "team a"})),
            "pool must be a Proxmox pool ID",
        ),
        row(
            "tag",
            vm_with(json!({"tags": ["ok", "-bad"]})),
            "tags contain letters",
        ),
        // sizes and counts
        row(
            "memory not a quantity",
            vm_with(json!({"memory": "2 GB"})),
            "must be a positive Kubernetes quantity",
        ),
        row(
            "memory too small",
            vm_with(json!({"memory": "8Mi"})),
            "memory must be at least 16Mi",
        ),
        row(
            "memory zero",
            vm_with(json!({"memory": "0"})),
            "must be a positive Kubernetes quantity",
        ),
        row(
            "no cores",
            vm_with(json!({"cpu": {"cores": 0}})),
            "should be greater than or equal to 1",
        ),
        row(
            "too many sockets",
            vm_with(json!({"cpu": {"sockets": 17}})),
            "should be less than or equal to 16",
        ),
        row(
            "cpu type",
            vm_with(json!({"cpu": {"type": "host cpu"}})),
            "cpu.type must be a QEMU CPU model",
        ),
        // enums
        row(
            "power state",
            vm_with(json!({"powerState": "Hibernating"})),
            "supported values: \"Running\", \"Stopped\"",
        ),
        row(
            "SCSI controller",
            vm_with(json!({"scsiController": "ahci"})),
            "Unsupported value: \"ahci\"",
        ),
        row(
            "NIC model",
            vm_net(json!({"slot": "net0", "bridge": "vmbr0", "model": "ne2k"})),
            "Unsupported value: \"ne2k\"",
        ),
        row(
            "checksum algorithm",
            vm_disk(image(json!({"checksumAlgorithm": "crc32"}))),
            "Unsupported value: \"crc32\"",
        ),
        row(
            "management policy",
            vm_spec(json!({"forProvider": {}, "managementPolicies": ["Destroy"]})),
            "Unsupported value: \"Destroy\"",
        ),
        row(
            "provider config kind",
            vm_spec(
                json!({"forProvider": {}, "providerConfigRef": {"kind": "Other", "name": "pve"}}),
            ),
            "Unsupported value: \"Other\"",
        ),
        // disks
        row(
            "disk slot",
            vm_disk(json!({"slot": "scsi31", "storage": "local-lvm", "size": "1Gi"})),
            "slot must be scsi0..scsi30",
        ),
        row(
            "disk storage",
            vm_disk(json!({"slot": "scsi0", "storage": "local lvm", "size": "1Gi"})),
            "must be a Proxmox storage ID",
        ),
        row(
            "disk size",
            vm_disk(json!({"slot": "scsi0", "storage": "local-lvm", "size": "lots"})),
            "must be a positive Kubernetes quantity",
        ),
        row(
            "import from a path",
            vm_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "/var/lib/vz/x.img"}),
            ),
            "must be a Proxmox volume ID",
        ),
        row(
            "two disk sources",
            vm_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": manifests::UBUNTU, "image": image(json!({}))["image"]}),
            ),
            "a disk takes one source",
        ),
        row(
            "empty disk without size",
            vm_disk(json!({"slot": "scsi1", "storage": "local-lvm"})),
            "an empty disk (no importFrom, no image) needs a size",
        ),
        row(
            "checksum length",
            vm_disk(image(json!({"checksum": "abc"}))),
            "checksum length does not match",
        ),
        row(
            "image URL",
            vm_disk(image(json!({"url": "ftp://images.example/jammy.qcow2"}))),
            "must be an http:// or https:// URL",
        ),
        row(
            "image file name",
            vm_disk(image(json!({"filename": "jammy.img"}))),
            "must be a file name ending in .qcow2",
        ),
        row(
            "image storage",
            vm_disk(image(json!({"storage": "local import"}))),
            "must be a Proxmox storage ID",
        ),
        // networks
        row(
            "NIC slot",
            vm_net(json!({"slot": "eth0", "bridge": "vmbr0"})),
            "slot must be net0 ... net31",
        ),
        row(
            "multicast MAC",
            vm_net(json!({"slot": "net0", "bridge": "vmbr0", "mac": "01:00:5E:00:00:01"})),
            "must be a unicast MAC address",
        ),
        row(
            "VLAN tag",
            vm_net(json!({"slot": "net0", "bridge": "vmbr0", "vlanTag": 5000})),
            "should be less than or equal to 4094",
        ),
        row(
            "bridge name",
            vm_net(json!({"slot": "net0", "bridge": "1br"})),
            "must be a Linux bridge name",
        ),
        // cloud-init
        row(
            "gateway with DHCP",
            vm_cloud_init(
                json!({"ipConfigs": [{"interface": "net0", "ip": "dhcp", "gateway": "10.0.0.1"}]}),
            ),
            "gateway needs a static ip",
        ),
        row(
            "address without prefix",
            vm_cloud_init(json!({"ipConfigs": [{"interface": "net0", "ip": "10.0.0.5"}]})),
            "ip must be dhcp or an IPv4 address with prefix length",
        ),
        row(
            "SSH key",
            vm_cloud_init(json!({"sshKeys": [ssh_key, "not a key"]})),
            "each item must be one OpenSSH public key",
        ),
        row(
            "user name",
            vm_cloud_init(json!({"user": "Root"})),
            "must be a Linux user name",
        ),
        row(
            "nameserver",
            vm_cloud_init(json!({"nameservers": ["dns.example"]})),
            "nameservers must be IP addresses",
        ),
        row(
            "search domain",
            vm_cloud_init(json!({"searchDomain": "corp example"})),
            "searchDomain must be a DNS domain",
        ),
        row(
            "cloud-init drive slot",
            vm_cloud_init(json!({"driveSlot": "scsi40"})),
            "driveSlot must be",
        ),
        row(
            "cloud-init storage",
            vm_cloud_init(json!({"storage": "local lvm"})),
            "must be a Proxmox storage ID",
        ),
        row(
            "password Secret name",
            vm_cloud_init(json!({"passwordSecretRef": {"name": "Pass_Word", "key": "pw"}})),
            "must be a Secret name",
        ),
        // clones
        row(
            "clone template twice",
            vm_with(
                json!({"disks": null, "clone": {"templateVmid": 9000, "templateName": "jammy"}}),
            ),
            "exactly one of templateVmid, templateName or image",
        ),
        row(
            "linked clone with storage",
            vm_with(
                json!({"disks": null, "clone": {"templateVmid": 9000, "full": false, "storage": "fast"}}),
            ),
            "storage can only be set for full clones",
        ),
        row(
            "clone with an imported disk",
            vm_with(json!({"clone": {"templateVmid": 9000}})),
            "a cloned VM gets its disks from the template",
        ),
        row(
            "clone template name",
            vm_with(json!({"disks": null, "clone": {"templateName": "my template"}})),
            "templateName must be a Proxmox VM name",
        ),
        row(
            "clone storage",
            vm_with(
                json!({"disks": null, "clone": {"templateVmid": 9000, "storage": "fast storage"}}),
            ),
            "must be a Proxmox storage ID",
        ),
        // the resource around the parameters
        row(
            "policies without Observe",
            vm_spec(json!({"forProvider": {}, "managementPolicies": ["Create"]})),
            "managementPolicies must include Observe",
        ),
        row(
            "* with another policy",
            vm_spec(json!({"forProvider": {}, "managementPolicies": ["*", "Delete"]})),
            "cannot be combined with other policies",
        ),
        row(
            "provider config without name",
            vm_spec(json!({"forProvider": {}, "providerConfigRef": {"kind": "ProviderConfig"}})),
            "providerConfigRef.name: Required value",
        ),
        row(
            "connection Secret name",
            vm_spec(json!({"forProvider": {}, "writeConnectionSecretToRef": {"name": "Web_Conn"}})),
            "must be a Secret name",
        ),
        row(
            "no forProvider",
            vm_spec(json!({})),
            "spec.forProvider: Required value",
        ),
        row(
            "misspelt field",
            vm_with(json!({"memroy": "2Gi"})),
            ".spec.forProvider.memroy: field not declared in schema",
        ),
        // ProxmoxVM: what one team may not reach (many teams in one cluster)
        row(
            "description forging another resource's owner marker",
            vm_with(json!({"description": FORGED_NOTES})),
            "description must not contain the owner marker",
        ),
        row(
            "serial device leaving /dev",
            vm_with(json!({"serialPorts": [{"slot": "serial0", "device": "/dev/../etc/shadow"}]})),
            "serialPorts device must be socket or a device name under /dev/",
        ),
        row(
            "serial device with an empty part",
            vm_with(json!({"serialPorts": [{"slot": "serial0", "device": "/dev//ttyS0"}]})),
            "serialPorts device must be socket or a device name under /dev/",
        ),
        row(
            "importFrom with a .. path part",
            vm_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "local:import/../images/777/vm-777-disk-0.qcow2"}),
            ),
            "importFrom must not contain .. path parts",
        ),
        // ProviderConfig and ClusterProviderConfig
        row(
            "endpoint without scheme",
            pc(json!({"endpoint": "pve.example.com:8006"})),
            "endpoint must be an https:// URL",
        ),
        row(
            "plain http to a remote host",
            pc(json!({"endpoint": "http://pve.example.com:8006"})),
            "endpoint is http://: every request would carry the API token or password in clear",
        ),
        row(
            "plain http to loopback without the opt-in",
            pc(json!({"endpoint": "http://127.0.0.1:8006"})),
            "set tls.insecureAllowPlainHTTP: true to accept that",
        ),
        row(
            "endpoint without host",
            pc(json!({"endpoint": "https://"})),
            "endpoint must be a URL with a host name",
        ),
        row(
            "no endpoint",
            pc(json!({"endpoint": null})),
            "spec.endpoint: Required value",
        ),
        row(
            "Secret in another namespace",
            pc(json!({"credentials": {"secretRef": {"name": "pve", "namespace": "other"}}})),
            "reads its Secret from its own namespace",
        ),
        row(
            "credentials source",
            pc(json!({"credentials": {"source": "Vault", "secretRef": {"name": "pve"}}})),
            "Unsupported value: \"Vault\"",
        ),
        row(
            "credentials without Secret",
            pc(json!({"credentials": {"source": "Secret"}})),
            "credentials.secretRef: Required value",
        ),
        row(
            "credentials Secret name",
            pc(json!({"credentials": {"secretRef": {"name": "PVE_Creds"}}})),
            "must be a Secret name",
        ),
        row(
            "CA bundle not PEM",
            pc(json!({"tls": {"caBundle": "MIIB...base64 without armour"}})),
            "caBundle must hold PEM certificates",
        ),
        row(
            "fingerprint too short",
            pc(json!({"tls": {"fingerprint": "AB:CD:EF"}})),
            "fingerprint must be a SHA-256 fingerprint",
        ),
        row(
            "fingerprint too long",
            pc(json!({"tls": {"fingerprint": format!("{FINGERPRINT}:AB")}})),
            "fingerprint must be a SHA-256 fingerprint",
        ),
        row(
            "fingerprint without colons",
            pc(json!({"tls": {"fingerprint": FINGERPRINT.replace(':', "")}})),
            "fingerprint must be a SHA-256 fingerprint",
        ),
        row(
            "two CA bundles",
            pc(
                json!({"tls": {"caBundle": "-----BEGIN CERTIFICATE-----", "caBundleSecretRef": {"name": "ca"}}}),
            ),
            "give the CA bundle inline (caBundle) or from a Secret",
        ),
        row(
            "insecure and pinned",
            pc(json!({"tls": {"insecureSkipTLSVerify": true, "fingerprint": FINGERPRINT}})),
            "insecureSkipTLSVerify turns verification off",
        ),
        row(
            "resync in days",
            pc(json!({"resyncInterval": "1d"})),
            "resyncInterval must be a Go duration between 5s and 24h",
        ),
        row(
            "resync too short",
            pc(json!({"resyncInterval": "1s"})),
            "resyncInterval must be a Go duration between 5s and 24h",
        ),
        row(
            "poll interval without unit",
            pc(json!({"tasks": {"pollInterval": "10"}})),
            "pollInterval must be a Go duration between 500ms and 5m",
        ),
        row(
            "negative timeout",
            pc(json!({"tasks": {"timeout": "-1m"}})),
            "timeout must be a Go duration between 10s and 24h",
        ),
        row(
            "shutdown timeout too long",
            pc(json!({"tasks": {"shutdownTimeout": "2h"}})),
            "shutdownTimeout must be a Go duration between 1s and 1h",
        ),
        row(
            "no requests allowed",
            pc(json!({"limits": {"maxConcurrentRequests": 0}})),
            "should be greater than or equal to 1",
        ),
        row(
            "cluster config Secret without namespace",
            cpc(json!({"credentials": {"secretRef": {"name": "pve"}}})),
            "must name the Secret's namespace: set credentials.secretRef.namespace",
        ),
        row(
            "cluster config CA Secret without namespace",
            cpc(json!({"tls": {"caBundleSecretRef": {"name": "ca"}}})),
            "must name the Secret's namespace: set tls.caBundleSecretRef.namespace",
        ),
        row(
            "cluster config endpoint",
            cpc(json!({"endpoint": "https://"})),
            "endpoint must be a URL with a host name",
        ),
        row(
            "cluster config fingerprint",
            cpc(json!({"tls": {"fingerprint": "SHA256:abc"}})),
            "fingerprint must be a SHA-256 fingerprint",
        ),
    ]
}

/// A server-side dry-run apply with strict field validation, as `kubectl
/// apply` does: `Err` holds the server's message.
pub async fn dry_run(object: &Value, namespace: &str) -> Result<(), String> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let plural = match kind {
        "ProxmoxVM" => "proxmoxvms",
        "ProxmoxContainer" => "proxmoxcontainers",
        "ProxmoxImage" => "proxmoximages",
        "ProviderConfig" => "providerconfigs",
        "ClusterProviderConfig" => "clusterproviderconfigs",
        other => panic!("no rows of kind {other}"),
    };
    let resource = ApiResource {
        group: "proxmox.m.crossplane.io".into(),
        version: "v1alpha1".into(),
        api_version: "proxmox.m.crossplane.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let api: Api<DynamicObject> = if kind == "ClusterProviderConfig" {
        Api::all_with(support::client(), &resource)
    } else {
        Api::namespaced_with(support::client(), namespace, &resource)
    };
    let mut params = PatchParams::apply("bad-input-test").dry_run();
    params.field_validation = Some(ValidationDirective::Strict);
    match api.patch("bad", &params, &Patch::Apply(object)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(e) => panic!("dry-run apply: {e}"),
    }
}
