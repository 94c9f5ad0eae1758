//! The SDN kinds' CEL rules, evaluated client-side on the generated schemas.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::{ProxmoxSDNZone, ProxmoxVNet};
use crate::api::validation_tests::{assert_verdict, refusals, schema_of};

fn object(kind: &str, for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "net", "namespace": "default"},
        "spec": {"forProvider": for_provider},
    })
}

#[test]
fn proxmox_sdn_zone_rules() {
    let schema = schema_of(ProxmoxSDNZone::crd());
    let zone = |p: Value| object("ProxmoxSDNZone", p);
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "simple",
            zone(json!({"type": "simple", "dhcp": "dnsmasq", "ipam": "pve"})),
            None,
        ),
        (
            "vlan",
            zone(json!({"type": "vlan", "bridge": "vmbr0", "mtu": 1500})),
            None,
        ),
        (
            "qinq",
            zone(json!({"type": "qinq", "bridge": "vmbr0", "tag": 100, "vlanProtocol": "802.1ad"})),
            None,
        ),
        (
            "vxlan",
            zone(json!({"type": "vxlan", "peers": ["192.0.2.1", "fd00::2"]})),
            None,
        ),
        (
            "vlan without a bridge",
            zone(json!({"type": "vlan"})),
            Some("bridge is required for vlan and qinq zones"),
        ),
        (
            "a bridge on a simple zone",
            zone(json!({"type": "simple", "bridge": "vmbr0"})),
            Some("bridge is only for vlan and qinq zones"),
        ),
        (
            "qinq without its tag",
            zone(json!({"type": "qinq", "bridge": "vmbr0"})),
            Some("tag (the service VLAN) is required for qinq zones"),
        ),
        (
            "vxlan without peers",
            zone(json!({"type": "vxlan", "peers": []})),
            Some("peers are required for vxlan zones"),
        ),
        (
            "a peer that is no address",
            zone(json!({"type": "vxlan", "peers": ["node1"]})),
            Some("peers must be IP addresses"),
        ),
        (
            "dhcp on a vlan zone",
            zone(json!({"type": "vlan", "bridge": "vmbr0", "dhcp": "dnsmasq"})),
            Some("dhcp is only for simple zones"),
        ),
    ];
    for (name, object, want) in cases {
        assert_verdict(name, &refusals(&schema, &object, None), want);
    }
    let old = zone(json!({"type": "simple"}));
    let changed = zone(json!({"type": "vlan", "bridge": "vmbr0"}));
    assert_verdict(
        "type changed",
        &refusals(&schema, &changed, Some(&old)),
        Some("type cannot be changed"),
    );
}

#[test]
fn proxmox_vnet_rules() {
    let schema = schema_of(ProxmoxVNet::crd());
    let vnet = |p: Value| object("ProxmoxVNet", p);
    let subnet = |s: Value| vnet(json!({"zoneRef": {"name": "z"}, "subnets": [s]}));
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "a VNet with a subnet",
            vnet(
                json!({"zoneRef": {"name": "z"}, "tag": 100, "alias": "web (prod)",
                "subnets": [{"cidr": "10.0.0.0/24", "gateway": "10.0.0.1", "snat": true,
                    "dhcpRanges": [{"start": "10.0.0.100", "end": "10.0.0.200"}]},
                    {"cidr": "fd00:1::/64", "gateway": "fd00:1::1"}]}),
            ),
            None,
        ),
        (
            "VLAN-aware with subnets",
            vnet(json!({"zoneRef": {"name": "z"}, "vlanAware": true,
                "subnets": [{"cidr": "10.0.0.0/24"}]})),
            Some("a VLAN-aware VNet cannot have subnets"),
        ),
        (
            "a CIDR twice",
            vnet(json!({"zoneRef": {"name": "z"},
                "subnets": [{"cidr": "10.0.0.0/24"}, {"cidr": "10.0.0.0/24"}]})),
            Some("each subnet's cidr must be unique"),
        ),
        (
            "a CIDR without its length",
            subnet(json!({"cidr": "10.0.0.0"})),
            Some("cidr must be a network"),
        ),
        (
            "a gateway that is no address",
            subnet(json!({"cidr": "10.0.0.0/24", "gateway": "gw"})),
            Some("must be an IPv4 or IPv6 address"),
        ),
        (
            "an alias with a newline",
            vnet(json!({"zoneRef": {"name": "z"}, "alias": "a\nb"})),
            Some("alias may hold only"),
        ),
    ];
    for (name, object, want) in cases {
        assert_verdict(name, &refusals(&schema, &object, None), want);
    }
}
