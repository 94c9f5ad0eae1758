//! `network-get-interfaces`: the guest's interfaces with their MACs and
//! addresses (the static `ipconfig0` address, or a DHCP-like one from
//! 192.0.2.0/24, TEST-NET-1).

use serde_json::{Value, json};

use crate::schema::format::{parse_cidr4, parse_cidr6};
use crate::schema::propstr;
use crate::state::Vm;

pub fn interfaces(vm: &Vm) -> Vec<Value> {
    let mut out = vec![json!({
        "name": "lo",
        "hardware-address": "00:00:00:00:00:00",
        "ip-addresses": [
            {"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8},
            {"ip-address-type": "ipv6", "ip-address": "::1", "prefix": 128},
        ],
        "statistics": stats(0),
    })];
    let nets = vm.config.iter().filter(|(k, _)| k.starts_with("net"));
    for (i, (key, value)) in nets.enumerate() {
        let Ok(net) = propstr::NET.parse(key, value) else {
            continue;
        };
        let mac = net
            .get("macaddr")
            .cloned()
            .unwrap_or_default()
            .to_lowercase();
        let idx = key.trim_start_matches("net");
        let ipconfig = vm
            .config
            .get(&format!("ipconfig{idx}"))
            .and_then(|c| propstr::IPCONFIG.parse("ipconfig", c).ok())
            .unwrap_or_default();
        let mut addrs = Vec::new();
        match ipconfig.get("ip").and_then(|ip| parse_cidr4(ip)) {
            Some((ip, prefix)) => addrs.push(
                json!({"ip-address-type": "ipv4", "ip-address": ip.to_string(), "prefix": prefix}),
            ),
            None if ipconfig.get("ip").is_none_or(|ip| ip == "dhcp") => {
                let host = 10 + (vm.vmid as usize * 7 + i) % 240;
                addrs.push(json!({"ip-address-type": "ipv4", "ip-address": format!("192.0.2.{host}"), "prefix": 24}));
            }
            None => {}
        }
        if let Some((ip, prefix)) = ipconfig.get("ip6").and_then(|ip| parse_cidr6(ip)) {
            addrs.push(
                json!({"ip-address-type": "ipv6", "ip-address": ip.to_string(), "prefix": prefix}),
            );
        }
        addrs
            .push(json!({"ip-address-type": "ipv6", "ip-address": link_local(&mac), "prefix": 64}));
        out.push(json!({
            "name": format!("eth{i}"),
            "hardware-address": mac,
            "ip-addresses": addrs,
            "statistics": stats(vm.vmid as u64 + i as u64),
        }));
    }
    out
}

/// The EUI-64 link-local address of a MAC.
fn link_local(mac: &str) -> String {
    let b: Vec<u8> = mac
        .split(':')
        .filter_map(|h| u8::from_str_radix(h, 16).ok())
        .collect();
    if b.len() != 6 {
        return "fe80::1".into();
    }
    format!(
        "fe80::{:02x}{:02x}:{:02x}ff:fe{:02x}:{:02x}{:02x}",
        b[0] ^ 2,
        b[1],
        b[2],
        b[3],
        b[4],
        b[5]
    )
}

fn stats(seed: u64) -> Value {
    json!({
        "rx-bytes": 182_734 + seed * 97, "rx-dropped": 0, "rx-errs": 0, "rx-packets": 1_204 + seed,
        "tx-bytes": 40_213 + seed * 31, "tx-dropped": 0, "tx-errs": 0, "tx-packets": 397 + seed,
    })
}
