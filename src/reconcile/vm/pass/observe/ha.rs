//! The VM's HA configuration: its resource, and its node-affinity rule
//! (PVE 9) or group (PVE 8).

use pve_client::{Client, ha_nodes};

use crate::reconcile::vm::plan::{AffinityView, HaResourceView, HaView, affinity_id};

/// Reads the HA configuration of VM `vmid` (three requests: the version,
/// the resources, the rules or groups).
pub(super) async fn ha_view(client: &Client, vmid: u32) -> Result<HaView, pve_client::Error> {
    let version = client.version().await?;
    let major: u32 = version
        .version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let rules = major >= 9;
    let sid = format!("vm:{vmid}");
    let resource = client
        .ha_resources()
        .await?
        .into_iter()
        .find(|r| r.sid == sid)
        .map(|r| HaResourceView {
            state: r.state.unwrap_or_else(|| "started".into()),
            group: r.group,
        });
    let id = affinity_id(vmid);
    let affinity = if rules {
        client
            .ha_rules()
            .await?
            .into_iter()
            .find(|r| r.rule == id)
            .map(|r| AffinityView {
                nodes: ha_nodes(r.nodes.as_deref().unwrap_or_default()),
                strict: r.strict,
            })
    } else {
        client
            .ha_groups()
            .await?
            .into_iter()
            .find(|g| g.group == id)
            .map(|g| AffinityView {
                nodes: ha_nodes(g.nodes.as_deref().unwrap_or_default()),
                strict: g.restricted,
            })
    };
    Ok(HaView {
        rules,
        resource,
        affinity,
    })
}
