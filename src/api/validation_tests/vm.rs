//! ProxmoxVM rules: create, management policies, updates.

use serde_json::{Value, json};

use super::{assert_verdict, good_disk, refusals, schema_of, vm};
use crate::api::ProxmoxVM;
use kube::CustomResourceExt;

#[test]
fn proxmox_vm_create_rules() {
    let schema = schema_of(ProxmoxVM::crd());
    let with_disk = |disk: Value| json!({"disks": [disk]});
    let mut image_disk = good_disk();
    image_disk["importFrom"] = json!("local:import/x.qcow2");
    let mut short_checksum = good_disk();
    short_checksum["image"]["checksum"] = json!("abc");
    let mut bad_filename = good_disk();
    bad_filename["image"]["filename"] = json!("jammy.img");

    // (case, forProvider, None = accepted | Some(part of the refusal message))
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("empty forProvider gets defaults", json!({}), None),
        ("image disk", with_disk(good_disk()), None),
        (
            "import disk without size",
            with_disk(
                json!({"slot": "virtio0", "storage": "local-lvm", "importFrom": "local:import/jammy.qcow2"}),
            ),
            None,
        ),
        (
            "two sources",
            with_disk(image_disk),
            Some("a disk takes one source"),
        ),
        (
            "empty disk without size",
            with_disk(json!({"slot": "scsi1", "storage": "local-lvm"})),
            Some("an empty disk (no importFrom, no image) needs a size"),
        ),
        (
            "slot out of range",
            with_disk(json!({"slot": "scsi31", "storage": "local-lvm", "size": "1Gi"})),
            Some("slot must be scsi0..scsi30"),
        ),
        (
            "size not a quantity",
            with_disk(json!({"slot": "scsi1", "storage": "local-lvm", "size": "lots"})),
            Some("must be a positive Kubernetes quantity"),
        ),
        (
            "100 PiB disk",
            with_disk(json!({"slot": "scsi1", "storage": "local-lvm", "size": "100Pi"})),
            Some("must be at most 1Pi"),
        ),
        (
            "1 PiB memory",
            json!({"memory": "1Pi"}),
            Some("must be at most 64Ti"),
        ),
        (
            "import with .. at the start of the path",
            with_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "local:../etc/x.qcow2"}),
            ),
            Some("importFrom must not contain .. path parts"),
        ),
        (
            "absolute path import",
            with_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "/var/lib/vz/x.img"}),
            ),
            Some("must be a Proxmox volume ID"),
        ),
        // The provider config decides (clonePolicy): not the schema.
        (
            "import of another VM's disk",
            with_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "local-lvm:vm-777-disk-0"}),
            ),
            None,
        ),
        (
            "import of a linked clone's disk",
            with_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "zfs:base-9000-disk-0/vm-101-disk-0"}),
            ),
            None,
        ),
        (
            "import of a template's disk",
            with_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "local-lvm:base-9000-disk-0"}),
            ),
            None,
        ),
        (
            "import volume named like a VM disk",
            with_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "local:import/vm-100-disk-0.qcow2"}),
            ),
            None,
        ),
        (
            "import with ..",
            with_disk(
                json!({"slot": "scsi0", "storage": "local-lvm", "importFrom": "local:import/../x.qcow2"}),
            ),
            Some("importFrom must not contain .. path parts"),
        ),
        (
            "description with the owner marker",
            json!({"description": "notes\nManaged by crossplane-provider-proxmox: ProxmoxVM other/db uid=u-2"}),
            Some("description must not contain the owner marker"),
        ),
        (
            "description without it",
            json!({"description": "managed by the db team"}),
            None,
        ),
        (
            "checksum length",
            with_disk(short_checksum),
            Some("checksum length does not match"),
        ),
        (
            "image file name extension",
            with_disk(bad_filename),
            Some("must be a file name ending in .qcow2"),
        ),
        (
            "memory too small",
            json!({"memory": "8Mi"}),
            Some("memory must be at least 16Mi"),
        ),
        (
            "memory not a quantity",
            json!({"memory": "2 GB"}),
            Some("positive Kubernetes quantity"),
        ),
        (
            "clone with imported disk",
            json!({"clone": {"templateVmid": 9000}, "disks": [good_disk()]}),
            Some("a cloned VM gets its disks from the template"),
        ),
        (
            "restore by archive",
            json!({"restore": {"archive": "local:backup/vzdump-qemu-100-2026_12_05-01_00_00.vma.zst", "storage": "local-lvm"}}),
            None,
        ),
        (
            "restore by a ProxmoxBackup",
            json!({"restore": {"backupRef": {"name": "web-nightly"}}}),
            None,
        ),
        (
            "restore naming both",
            json!({"restore": {"archive": "local:backup/vzdump-qemu-100-x.vma.zst", "backupRef": {"name": "b"}}}),
            Some("restore needs exactly one of archive and backupRef"),
        ),
        (
            "restore naming neither",
            json!({"restore": {"storage": "local-lvm"}}),
            Some("restore needs exactly one of archive and backupRef"),
        ),
        (
            "restore of a container archive",
            json!({"restore": {"archive": "local:backup/vzdump-lxc-100-x.tar.zst"}}),
            Some("archive must be a VM backup volume ID"),
        ),
        (
            "restore with clone",
            json!({"restore": {"backupRef": {"name": "b"}}, "clone": {"templateVmid": 9000}}),
            Some("restore and clone are two ways to create the VM"),
        ),
        (
            "restore with an imported disk",
            json!({"restore": {"backupRef": {"name": "b"}}, "disks": [good_disk()]}),
            Some("a restored VM gets its disks from the archive"),
        ),
        (
            "clone growing a disk",
            json!({"clone": {"templateName": "jammy"}, "disks": [{"slot": "scsi0", "storage": "local-lvm", "size": "40Gi"}]}),
            None,
        ),
        (
            "clone template named twice",
            json!({"clone": {"templateVmid": 9000, "templateName": "jammy"}}),
            Some("exactly one of templateVmid, templateName or image"),
        ),
        (
            "clone of an image's template",
            json!({"clone": {"image": "noble", "full": false}}),
            None,
        ),
        (
            "clone of an image and a template",
            json!({"clone": {"image": "noble", "templateVmid": 9000}}),
            Some("exactly one of templateVmid, templateName or image"),
        ),
        (
            "clone of an image that is no name",
            json!({"clone": {"image": "Noble_Image"}}),
            Some("image must be the name of a ProxmoxImage"),
        ),
        (
            "clone template named never",
            json!({"clone": {"full": true}}),
            Some("exactly one of templateVmid, templateName or image"),
        ),
        (
            "linked clone with storage",
            json!({"clone": {"templateVmid": 9000, "full": false, "storage": "fast"}}),
            Some("storage can only be set for full clones"),
        ),
        (
            "node outside allowedNodes",
            json!({"node": "pve3", "allowedNodes": ["pve1", "pve2"]}),
            Some("node must be one of allowedNodes"),
        ),
        (
            "bad node name",
            json!({"node": "-pve"}),
            Some("must be a Proxmox node name"),
        ),
        (
            "bad vm name",
            json!({"name": "web_1"}),
            Some("must be a DNS name"),
        ),
        (
            "bad tag",
            json!({"tags": ["ok", "-bad"]}),
            Some("tags contain letters"),
        ),
        (
            "net slot",
            json!({"networks": [{"slot": "eth0", "bridge": "vmbr0"}]}),
            Some("slot must be net0 ... net31"),
        ),
        (
            "multicast mac",
            json!({"networks": [{"slot": "net0", "bridge": "vmbr0", "mac": "01:00:5E:00:00:01"}]}),
            Some("unicast MAC address"),
        ),
        (
            "vnet= as users write it for Proxmox",
            json!({"networks": [{"slot": "net0", "bridge": "vmbr0", "vnet": "web"}]}),
            Some(
                "vnet is not a NIC option: Proxmox attaches a NIC to an SDN VNet with bridge set to the VNet's ID",
            ),
        ),
        (
            "good network",
            json!({"networks": [{"slot": "net0", "bridge": "vmbr0", "vlanTag": 10, "mac": "BC:24:11:00:00:01"}]}),
            None,
        ),
        (
            "static ipv4",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net0", "ip": "10.0.0.5/24", "gateway": "10.0.0.1"}]}}),
            None,
        ),
        (
            "gateway with dhcp",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net0", "ip": "dhcp", "gateway": "10.0.0.1"}]}}),
            Some("gateway needs a static ip"),
        ),
        (
            "ipv6 in ip",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net0", "ip": "fd00::5/64"}]}}),
            Some("ip must be dhcp or an IPv4 address"),
        ),
        (
            "address without prefix",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net0", "ip": "10.0.0.5"}]}}),
            Some("ip must be dhcp or an IPv4 address"),
        ),
        (
            "ipv6 slaac",
            json!({"cloudInit": {"ipConfigs": [{"interface": "net1", "ip6": "auto"}]}}),
            None,
        ),
        (
            "nameserver not an ip",
            json!({"cloudInit": {"nameservers": ["dns.example"]}}),
            Some("nameservers must be IP addresses"),
        ),
        (
            "ssh key",
            json!({"cloudInit": {"user": "ubuntu", "sshKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0 me@laptop"]}}),
            None,
        ),
        (
            "ssh key with a newline",
            json!({"cloudInit": {"sshKeys": ["ssh-ed25519 AAAA a\nssh-rsa AAAA b"]}}),
            Some("one OpenSSH public key on one line"),
        ),
        (
            "private key pasted",
            json!({"cloudInit": {"sshKeys": ["-----BEGIN OPENSSH PRIVATE KEY-----"]}}),
            Some("one OpenSSH public key on one line"),
        ),
        (
            "custom cloud-init from a Secret",
            json!({"customCloudInit": {"userData": {"secretKeyRef": {"name": "seed", "key": "user-data"}}}}),
            None,
        ),
        (
            "custom cloud-init with nothing in it",
            json!({"customCloudInit": {"storage": "local"}}),
            Some("customCloudInit needs at least one of userData"),
        ),
        (
            "custom cloud-init source naming both",
            json!({"customCloudInit": {"userData": {
                "secretKeyRef": {"name": "a", "key": "k"},
                "configMapKeyRef": {"name": "b", "key": "k"}}}}),
            Some("set exactly one of secretKeyRef and configMapKeyRef"),
        ),
        (
            "custom cloud-init beside cloudInit",
            json!({"cloudInit": {}, "customCloudInit": {"metaData": {"configMapKeyRef": {"name": "m", "key": "k"}}}}),
            Some("customCloudInit replaces cloudInit"),
        ),
        (
            "custom cloud-init on a SCSI slot",
            json!({"customCloudInit": {"driveSlot": "scsi1", "metaData": {"configMapKeyRef": {"name": "m", "key": "k"}}}}),
            Some("driveSlot must be ide0..ide3 or sata0..sata5"),
        ),
        (
            "custom cloud-init on a disk's slot",
            json!({"disks": [{"slot": "sata0", "storage": "local-lvm", "size": "1Gi"}],
                   "customCloudInit": {"driveSlot": "sata0", "metaData": {"configMapKeyRef": {"name": "m", "key": "k"}}}}),
            Some("customCloudInit.driveSlot is already used by a disk"),
        ),
        ("ha started", json!({"ha": {}}), None),
        (
            "ha stopped while powerState is Running",
            json!({"ha": {"state": "stopped"}}),
            Some("ha.state started needs powerState Running"),
        ),
        (
            "ha stopped with powerState Stopped",
            json!({"ha": {"state": "stopped"}, "powerState": "Stopped"}),
            None,
        ),
        (
            "ha ignored whatever the power state",
            json!({"ha": {"state": "ignored"}, "powerState": "Stopped"}),
            None,
        ),
        (
            "ha node affinity without nodes",
            json!({"ha": {"nodeAffinity": {"strict": true}}}),
            Some("ha.nodeAffinity keeps the VM on allowedNodes"),
        ),
        (
            "ha node affinity on allowedNodes",
            json!({"ha": {"nodeAffinity": {}}, "allowedNodes": ["pve1", "pve2"]}),
            None,
        ),
        (
            "cloud-init drive on a disk slot",
            json!({"disks": [{"slot": "ide2", "storage": "local-lvm", "size": "1Gi"}], "cloudInit": {}}),
            Some("cloudInit.driveSlot is already used by a disk"),
        ),
    ];
    for (name, for_provider, want) in cases {
        let got = refusals(&schema, &vm(for_provider), None);
        assert_verdict(name, &got, want);
    }
}

#[test]
fn proxmox_vm_management_policy_rules() {
    let schema = schema_of(ProxmoxVM::crd());
    let with = |policies: Value| {
        let mut obj = vm(json!({}));
        obj["spec"]["managementPolicies"] = policies;
        obj
    };
    let cases = [
        (json!(["Observe"]), None),
        (json!([]), None),
        (json!(["*", "Delete"]), Some("cannot be combined")),
        (json!(["Create", "Delete"]), Some("must include Observe")),
    ];
    for (policies, want) in cases {
        let got = refusals(&schema, &with(policies.clone()), None);
        assert_verdict(&policies.to_string(), &got, want);
    }
}

#[test]
fn proxmox_vm_update_rules() {
    let schema = schema_of(ProxmoxVM::crd());
    let disk = |size: &str| json!({"slot": "scsi0", "storage": "local-lvm", "size": size});
    // (case, old forProvider, new forProvider, None = accepted | Some(message))
    let cases: Vec<(&str, Value, Value, Option<&str>)> = vec![
        (
            "vmid change",
            json!({"vmid": 100}),
            json!({"vmid": 101}),
            Some("vmid cannot be changed"),
        ),
        (
            "vmid removal",
            json!({"vmid": 100}),
            json!({}),
            Some("vmid cannot be changed"),
        ),
        ("vmid added later", json!({}), json!({"vmid": 100}), None),
        (
            "node change (a migration)",
            json!({"node": "pve1"}),
            json!({"node": "pve2"}),
            None,
        ),
        (
            "node removal",
            json!({"node": "pve1"}),
            json!({}),
            Some("node cannot be removed"),
        ),
        (
            "node change outside allowedNodes",
            json!({"node": "pve1", "allowedNodes": ["pve1", "pve2"]}),
            json!({"node": "pve3", "allowedNodes": ["pve1", "pve2"]}),
            Some("node must be one of allowedNodes"),
        ),
        (
            "clone source change",
            json!({"clone": {"templateVmid": 9000}}),
            json!({"clone": {"templateVmid": 9001}}),
            Some("the clone source cannot be changed"),
        ),
        (
            "clone added",
            json!({}),
            json!({"clone": {"templateVmid": 9000}}),
            Some("clone cannot be added or removed"),
        ),
        (
            "disk grows",
            json!({"disks": [disk("10Gi")]}),
            json!({"disks": [disk("12Gi")]}),
            None,
        ),
        (
            "disk grows across units",
            json!({"disks": [disk("1Gi")]}),
            json!({"disks": [disk("2000M")]}),
            None,
        ),
        (
            "disk shrinks",
            json!({"disks": [disk("10Gi")]}),
            json!({"disks": [disk("9Gi")]}),
            Some("disks can only grow"),
        ),
        (
            "unrelated change",
            json!({"vmid": 100, "node": "pve1", "memory": "1Gi"}),
            json!({"vmid": 100, "node": "pve1", "memory": "4Gi"}),
            None,
        ),
    ];
    for (name, old, new, want) in cases {
        let got = refusals(&schema, &vm(new), Some(&vm(old)));
        assert_verdict(name, &got, want);
    }
}

#[test]
fn proxmox_vm_firewall_rules() {
    let schema = schema_of(ProxmoxVM::crd());
    let fw = |rule: Value| json!({"firewall": {"policyIn": "DROP", "rules": [rule]}});
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("no rules", json!({"firewall": {}}), None),
        (
            "a rule",
            fw(
                json!({"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22,80:90",
                      "source": {"ipSet": "office"}, "iface": "net0"}),
            ),
            None,
        ),
        (
            "a group",
            fw(json!({"securityGroup": "web", "iface": "net1"})),
            None,
        ),
        (
            "both",
            fw(json!({"securityGroup": "web", "type": "in", "action": "ACCEPT"})),
            Some("exactly one of a rule (type and action) and securityGroup"),
        ),
        (
            "neither",
            fw(json!({"comment": "x"})),
            Some("exactly one of a rule (type and action) and securityGroup"),
        ),
        (
            "no action",
            fw(json!({"type": "in"})),
            Some("a rule needs type and action"),
        ),
        (
            "a group with ports",
            fw(json!({"securityGroup": "web", "proto": "tcp"})),
            Some("securityGroup: a security group reference takes only"),
        ),
        (
            "bad iface",
            fw(json!({"type": "in", "action": "DROP", "iface": "eth0"})),
            Some("iface must name a NIC of the guest"),
        ),
        (
            "bad ports",
            fw(json!({"type": "in", "action": "DROP", "proto": "tcp", "dport": "22-80"})),
            Some("must be a comma list of ports"),
        ),
        (
            "ports without a protocol that has them",
            fw(json!({"type": "in", "action": "DROP", "proto": "icmp", "dport": "22"})),
            Some("dport: the protocol has no ports"),
        ),
        (
            "bad proto",
            fw(json!({"type": "in", "action": "DROP", "proto": "TCP!"})),
            Some("proto must be a protocol name"),
        ),
        (
            "two addresses",
            fw(
                json!({"type": "in", "action": "DROP", "source": {"cidr": "10.0.0.0/8", "alias": "x1"}}),
            ),
            Some("exactly one of cidr, ipSet, alias, guestIpSet and guestAlias"),
        ),
        (
            "the guest's own alias and IP set, named by its rules",
            json!({"firewall": {
                "aliases": [{"name": "gw", "cidr": "10.0.0.1"}],
                "ipSets": [{"name": "peers", "entries": [{"cidr": "10.0.1.0/24", "nomatch": true}]}],
                "rules": [{"type": "in", "action": "ACCEPT", "source": {"guestIpSet": "peers"},
                           "dest": {"guestAlias": "gw"}}]}}),
            None,
        ),
        (
            "a guestIpSet the spec does not have",
            json!({"firewall": {"ipSets": [],
                "rules": [{"type": "in", "action": "ACCEPT", "dest": {"guestIpSet": "peers"}}]}}),
            Some("rules: a dest guestIpSet must name one of ipSets"),
        ),
        (
            "a guestAlias without aliases",
            fw(json!({"type": "in", "action": "ACCEPT", "source": {"guestAlias": "gw"}})),
            Some("rules: a source guestAlias must name one of aliases"),
        ),
        (
            "an alias name twice",
            json!({"firewall": {"aliases": [{"name": "gw", "cidr": "10.0.0.1"},
                                            {"name": "gw", "cidr": "10.0.0.2"}]}}),
            Some("aliases: each name once"),
        ),
        (
            "an upper-case set name",
            json!({"firewall": {"ipSets": [{"name": "Peers"}]}}),
            Some("name must be a lowercase letter"),
        ),
        (
            "an alias that is no address",
            json!({"firewall": {"aliases": [{"name": "gw", "cidr": "gateway"}]}}),
            Some("cidr must be an IP address or a CIDR network"),
        ),
        (
            "a zero prefix in a guest set",
            json!({"firewall": {"ipSets": [{"name": "all", "entries": [{"cidr": "0.0.0.0/0"}]}]}}),
            Some("a zero prefix is not allowed"),
        ),
    ];
    for (name, for_provider, want) in cases {
        let got = refusals(&schema, &vm(for_provider), None);
        assert_verdict(name, &got, want);
    }
}

#[test]
fn a_security_group_rule_cannot_name_a_guests_own_objects() {
    let schema = schema_of(crate::api::ProxmoxSecurityGroup::crd());
    let group = |source: Value| {
        json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxSecurityGroup",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"forProvider": {"rules": [
                {"type": "in", "action": "ACCEPT", "source": source}
            ]}},
        })
    };
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("a cluster set", json!({"ipSet": "office"}), None),
        (
            "a guest's set",
            json!({"guestIpSet": "peers"}),
            Some("source: guestIpSet and guestAlias name a guest's own objects"),
        ),
        (
            "a guest's alias",
            json!({"guestAlias": "gw"}),
            Some("source: guestIpSet and guestAlias name a guest's own objects"),
        ),
    ];
    for (name, source, want) in cases {
        let got = refusals(&schema, &group(source), None);
        assert_verdict(name, &got, want);
    }
}
