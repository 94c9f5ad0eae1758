//! `LateInitialize` for a container: the `spec.forProvider` fields the user
//! left unset (`hostname`, `networks` when every interface has a bridge,
//! `tags`, `description`, `dns`), filled from what the container shows, as a merge
//! patch written with [`crate::api::managed::LATE_INIT_MANAGER`]. A set
//! field is never overwritten; fields the schema defaults (`cpu`,
//! `memory`, `swap`, `startOnBoot`, ...) count as set. Pure.

use serde_json::{Map, Value, json};

use crate::api::container::{ContainerObserved, ContainerParameters};

/// The unset fields of `spec` that `seen` can fill; `None` when there is
/// none.
pub fn fields(spec: &ContainerParameters, seen: &ContainerObserved) -> Option<Value> {
    let mut patch = Map::new();
    if let (None, Some(hostname)) = (&spec.hostname, &seen.hostname) {
        patch.insert("hostname".into(), json!(hostname));
    }
    if spec.networks.is_empty()
        && !seen.networks.is_empty()
        && seen.networks.iter().all(|n| n.bridge.is_some())
    {
        patch.insert("networks".into(), json!(seen.networks));
    }
    if spec.tags.is_empty() && !seen.tags.is_empty() {
        patch.insert("tags".into(), json!(seen.tags));
    }
    if let (None, Some(description)) = (&spec.description, &seen.description) {
        patch.insert("description".into(), json!(description));
    }
    if let (None, Some(dns)) = (&spec.dns, &seen.dns) {
        patch.insert("dns".into(), json!(dns));
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::container::{ObservedContainerDns, ObservedContainerNetwork};

    fn spec(more: Value) -> ContainerParameters {
        let mut fp = json!({
            "template": {"volume": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"},
            "rootfs": {"storage": "local-lvm", "size": "4Gi"},
        });
        for (k, v) in more.as_object().unwrap() {
            fp[k] = v.clone();
        }
        serde_json::from_value(fp).unwrap()
    }

    fn seen() -> ContainerObserved {
        ContainerObserved {
            hostname: Some("cache".into()),
            networks: vec![ObservedContainerNetwork {
                slot: "net0".into(),
                name: "eth0".into(),
                bridge: Some("vmbr0".into()),
                ip: Some("dhcp".into()),
                ..ObservedContainerNetwork::default()
            }],
            tags: vec!["legacy".into()],
            description: Some("hand made".into()),
            memory: Some("2Gi".into()),
            dns: Some(ObservedContainerDns {
                nameservers: vec!["10.0.0.53".into()],
                search_domain: None,
            }),
            ..ContainerObserved::default()
        }
    }

    #[test]
    fn only_unset_fields_are_filled() {
        let cases = [
            (
                "an empty spec takes what the container shows",
                spec(json!({})),
                seen(),
                Some(json!({
                    "hostname": "cache",
                    "networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr0", "ip": "dhcp", "firewall": false}],
                    "tags": ["legacy"],
                    "description": "hand made",
                    "dns": {"nameservers": ["10.0.0.53"]},
                })),
            ),
            (
                "set fields are kept, memory is a schema default",
                spec(json!({
                    "hostname": "mine", "tags": ["t"], "description": "d",
                    "networks": [{"slot": "net0", "name": "eth1", "bridge": "vmbr1"}],
                    "dns": {"searchDomain": "lab.example"},
                })),
                seen(),
                None,
            ),
            (
                "an interface without a bridge: the list is left out",
                spec(json!({"hostname": "h", "tags": ["t"], "description": "d", "dns": {}})),
                ContainerObserved {
                    networks: vec![ObservedContainerNetwork {
                        slot: "net0".into(),
                        name: "eth0".into(),
                        ..ObservedContainerNetwork::default()
                    }],
                    ..seen()
                },
                None,
            ),
        ];
        for (name, spec, seen, want) in cases {
            assert_eq!(fields(&spec, &seen), want, "{name}");
        }
    }
}
