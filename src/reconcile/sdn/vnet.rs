//! The VNet as a CRUD kind, its subnets with it: what it wants (its zone
//! resolved to the zone's Proxmox ID), its calls, who uses it, its status.
//!
//! Requests per pass: `GET /cluster/sdn/vnets?pending=1` and, when the
//! VNet is there, `GET .../vnets/{vnet}/subnets?pending=1`; then at most
//! one correction (the VNet's options, then each subnet's; a VNet is
//! deleted after its subnets, as PVE requires). None while its zone is on
//! its way to Proxmox: it waits, and is woken when the zone is written.

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::plan::{self, SubnetChange, Vnet, VnetPatch};
use super::zone::{coming, record, shown_state, zone_id};
use super::{Shared, condition_for};
use crate::api::condition::Condition;
use crate::api::sdn::{ProxmoxVNetStatus, VNetAtProvider};
use crate::api::{ProxmoxSDNZone, ProxmoxVNet};
use crate::reconcile::managed::crud::pass::{Kind, Wanted};
use crate::reconcile::managed::crud::{Call, Diff, External, Observed};
use crate::reconcile::managed::selector::of_namespace;

/// The VNet's Proxmox ID.
pub fn vnet_id(namespace: &str, name: &str) -> String {
    plan::sdn_id('v', namespace, name)
}

pub(super) fn id_of(vnet: &ProxmoxVNet) -> String {
    vnet_id(&vnet.namespace().unwrap_or_default(), &vnet.name_any())
}

impl ProxmoxVNet {
    fn zone(&self, extra: &Shared) -> Option<std::sync::Arc<ProxmoxSDNZone>> {
        let name = &self.spec.for_provider.zone_ref.name;
        extra
            .zones
            .get(&ObjectRef::new(name).within(&self.namespace().unwrap_or_default()))
    }

    /// Whether its zone is still on its way to Proxmox (see [`coming`]).
    fn zone_coming(&self, extra: &Shared) -> bool {
        self.zone(extra).is_some_and(|z| coming(&z))
    }
}

impl Kind for ProxmoxVNet {
    type External = VnetCalls;
    type Status = ProxmoxVNetStatus;
    type Extra = Shared;

    fn managed(&self) -> &crate::api::managed::ManagedSpec {
        &self.spec.managed
    }

    fn want(&self, extra: &Shared) -> Wanted<Self> {
        let namespace = self.namespace().unwrap_or_default();
        let zone_name = &self.spec.for_provider.zone_ref.name;
        let want = plan::vnet_want(&self.spec.for_provider, &zone_id(&namespace, zone_name));
        let Some(zone) = self.zone(extra) else {
            let why = format!(
                "spec.forProvider.zoneRef: no ProxmoxSDNZone {zone_name} in namespace {namespace}"
            );
            return Err((why, want));
        };
        let zone_type = zone.spec.for_provider.zone_type.as_str();
        match plan::tag_refusal(zone_type, self.spec.for_provider.tag) {
            Some(why) => Err((why, want)),
            None => Ok(want),
        }
    }

    /// Its zone is on its way to Proxmox: PVE refuses a VNet of a zone it
    /// does not have, and the VNet's create joins the zone's apply when it
    /// is written while the zone's change is pending. The zone's watch
    /// wakes it once the zone is written (see [`super::wake::ZoneWaker`]).
    fn waiting_for(&self, extra: &Shared) -> Option<String> {
        self.zone_coming(extra).then(|| {
            format!(
                "spec.forProvider.zoneRef: waiting for ProxmoxSDNZone {} to be written to Proxmox",
                self.spec.for_provider.zone_ref.name
            )
        })
    }

    fn external(&self, client: pve_client::Client, _: &Self::Extra) -> VnetCalls {
        VnetCalls {
            client,
            id: id_of(self),
        }
    }

    /// The guests of its namespace with a NIC on it.
    fn users(&self, extra: &Shared) -> Vec<String> {
        let id = id_of(self);
        let namespace = self.namespace();
        let vms = of_namespace(&extra.vms, namespace.as_deref(), |vm| {
            let bridges = vm.spec.for_provider.networks.iter();
            Some((
                vm.name_any(),
                bridges.map(|n| n.bridge.clone()).collect::<Vec<String>>(),
            ))
        });
        let containers = of_namespace(&extra.containers, namespace.as_deref(), |ct| {
            let bridges = ct.spec.for_provider.networks.iter();
            Some((
                ct.name_any(),
                bridges.map(|n| n.bridge.clone()).collect::<Vec<String>>(),
            ))
        });
        let on = |(name, bridges): (String, Vec<String>), kind: &str| {
            bridges.contains(&id).then(|| format!("{kind} {name}"))
        };
        let vms = vms.into_iter().filter_map(|g| on(g, "ProxmoxVM"));
        let containers = containers
            .into_iter()
            .filter_map(|g| on(g, "ProxmoxContainer"));
        vms.chain(containers).collect()
    }

    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }

    fn status(
        &self,
        extra: &Shared,
        conditions: Vec<Condition>,
        observed: Option<&Observed<Vnet>>,
    ) -> ProxmoxVNetStatus {
        let seen = observed.and_then(Observed::found);
        let before = self.status.as_ref().map(|s| &s.at_provider);
        let want = self.want(extra);
        let written = match (&want, seen) {
            (Ok(want), Some(v)) => v.deleted || want.diff(v).is_none(),
            (Err(_), _) | (_, None) => false,
        };
        let mut shown = record(
            extra,
            self,
            observed,
            seen.map(|v| v.pending),
            written,
            &conditions,
        );
        // Waiting for its zone (see `waiting_for`; Proxmox was not asked):
        // not settled, so the zone's change waits for its create, unless
        // it is paused or its policies refuse (nothing will be written).
        let deleting = self.metadata.deletion_timestamp.is_some();
        let acting = observed.is_some() || self.spec.managed.capabilities(&self.metadata).is_ok();
        if acting && want.is_ok() && !deleting && self.zone_coming(extra) {
            let seen = super::apply::Seen {
                config: crate::reconcile::providers::ConfigKey::of(self),
                generation: self.metadata.generation,
                pending: false,
                settled: false,
            };
            shown = Some(extra.applier.record(&self.uid().unwrap_or_default(), seen));
        }
        let (state, task) = shown_state(
            shown.as_ref(),
            observed,
            (
                before.and_then(|b| b.state),
                before.and_then(|b| b.apply_task.clone()),
            ),
        );
        let namespace = self.namespace().unwrap_or_default();
        ProxmoxVNetStatus {
            at_provider: VNetAtProvider {
                id: Some(id_of(self)),
                zone: Some(zone_id(&namespace, &self.spec.for_provider.zone_ref.name)),
                subnets: seen
                    .map(|v| u32::try_from(v.subnets.len()).unwrap_or(u32::MAX))
                    .or_else(|| before.and_then(|b| b.subnets)),
                state,
                apply_task: task,
            },
            conditions: condition_for(conditions, shown.as_ref().filter(|_| seen.is_some())),
            observed_generation: self.metadata.generation,
            ..Default::default()
        }
    }

    fn object_name(&self) -> String {
        format!("SDN VNet {}", id_of(self))
    }
}

/// The calls for one VNet and its subnets.
pub struct VnetCalls {
    client: pve_client::Client,
    id: String,
}

impl VnetCalls {
    async fn subnet(&self, change: &SubnetChange) -> pve_client::Result<()> {
        let (c, id) = (&self.client, self.id.as_str());
        match change {
            SubnetChange::Create { cidr, options } => {
                c.create_sdn_subnet(id, cidr, &plan::pairs(options)).await
            }
            SubnetChange::Update { id: subnet, patch } => {
                c.update_sdn_subnet(id, subnet, &plan::pairs(&patch.set), &patch.delete)
                    .await
            }
            SubnetChange::Delete { id: subnet } => c.delete_sdn_subnet(id, subnet).await,
        }
    }
}

impl External for VnetCalls {
    type Object = Vnet;

    async fn observe(&self) -> Observed<Vnet> {
        let vnets = match self.client.sdn_vnets().await {
            Ok(vnets) => vnets,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        let Some(vnet) = vnets.iter().find(|v| v.id == self.id) else {
            return Observed::NotFound;
        };
        match self.client.sdn_subnets(&self.id).await {
            Ok(subnets) => Observed::Found {
                object: plan::vnet_seen(vnet, &subnets),
                // The ID only this resource derives.
                ours: true,
            },
            Err(e) => Observed::Unknown(e.to_string()),
        }
    }

    async fn call(&self, call: &Call<Vnet>) -> Result<(), String> {
        let c = &self.client;
        let id = self.id.as_str();
        match call {
            Call::Create(v) => {
                c.create_sdn_vnet(id, &plan::pairs(&v.options))
                    .await
                    .map_err(|e| e.to_string())?;
                for (cidr, options) in &v.subnets {
                    let change = SubnetChange::Create {
                        cidr: cidr.clone(),
                        options: options.clone(),
                    };
                    self.subnet(&change)
                        .await
                        .map_err(|e| format!("spec.forProvider.subnets[{cidr}]: {e}"))?;
                }
                Ok(())
            }
            Call::Update(VnetPatch { options, subnets }) => {
                if !options.set.is_empty() || !options.delete.is_empty() {
                    c.update_sdn_vnet(id, &plan::pairs(&options.set), &options.delete)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                for change in subnets {
                    self.subnet(change)
                        .await
                        .map_err(|e| format!("spec.forProvider.subnets: {e}"))?;
                }
                Ok(())
            }
            Call::Delete => {
                // PVE refuses to delete a VNet with subnets: they go first.
                for subnet in c.sdn_subnets(id).await.map_err(|e| e.to_string())? {
                    if subnet.state != Some(pve_client::SdnState::Deleted) {
                        c.delete_sdn_subnet(id, &subnet.id)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                }
                c.delete_sdn_vnet(id).await.map_err(|e| e.to_string())
            }
        }
    }
}
