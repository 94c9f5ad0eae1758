//! Writes of HA configuration (synchronous: they start no task).

use pve_client::Client;

use crate::reconcile::vm::plan::HaCall;

/// Writes one piece of the VM's HA configuration.
pub(super) async fn write(client: &Client, call: &HaCall) -> Result<(), pve_client::Error> {
    tracing::info!(?call, "writing HA configuration");
    match call {
        HaCall::AddResource(r) => client.create_ha_resource(r).await,
        HaCall::SetResource(r) => client.update_ha_resource(r).await,
        HaCall::RemoveResource { sid } => client.delete_ha_resource(sid).await,
        HaCall::AddRule(a) => client.create_ha_node_affinity(a).await,
        HaCall::SetRule(a) => client.update_ha_node_affinity(a).await,
        HaCall::AddGroup(a) => client.create_ha_group(a).await,
        HaCall::SetGroup(a) => client.update_ha_group(a).await,
        HaCall::RemoveGroup { id } => client.delete_ha_group(id).await,
    }
}
