//! The pass's context: what every phase reads, and what to observe.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::decision::Decision;
use super::input::{
    Heavy, ImageRef, Needs, Observation, PlacementRequest, PlanInput, ProviderState, SlotRequest,
    TemplateRef,
};
use crate::api::{
    ConditionType, ProxmoxVM, ProxmoxVMStatus, Reason,
    meta::{self, Capabilities, PolicyMode},
    provider_config::{Timing, go_duration},
    vm::{InFlightTask, PowerState, VmParameters},
};
use crate::reconcile::identity::Identity;
use pve_client::{InvalidUpid, Upid};

/// What every phase reads.
pub(super) struct Ctx<'a> {
    pub vm: &'a ProxmoxVM,
    /// Who the resource is, resolved once.
    pub id: Identity,
    /// The provider config; `None` in preflight.
    pub provider: Option<&'a ProviderState>,
    pub spec: &'a VmParameters,
    /// The current status (empty when the resource has none yet).
    pub status: ProxmoxVMStatus,
    pub caps: Capabilities,
    pub timing: Timing,
    pub obs: &'a Observation,
    /// Why Proxmox could not be observed, if it could not.
    pub observe_error: Option<&'a super::input::ObserveError>,
    /// A Kubernetes request the pass needed that RBAC refused.
    pub forbidden: Option<&'a super::input::Forbidden>,
    pub now: Timestamp,
}

impl<'a> Ctx<'a> {
    pub fn new(input: &'a PlanInput<'a>) -> Self {
        let caps = match input.vm.spec.managed.mode(&input.vm.metadata) {
            PolicyMode::Active(caps) => caps,
            PolicyMode::Paused | PolicyMode::Invalid(_) => Capabilities {
                create: false,
                update: false,
                delete: false,
            },
        };
        let timing = match &input.provider {
            Some(ProviderState::Ready { timing, .. }) => *timing,
            Some(
                ProviderState::NotFound { .. }
                | ProviderState::Unusable { .. }
                | ProviderState::Forbidden { .. },
            )
            | None => Timing::default(),
        };
        Self {
            vm: input.vm,
            id: Identity::of(&input.vm.metadata).unwrap_or_else(Identity::nobody),
            provider: input.provider.as_ref(),
            spec: &input.vm.spec.for_provider,
            status: input.vm.status.clone().unwrap_or_default(),
            caps,
            timing,
            obs: &input.observed,
            observe_error: input.observe_error.as_ref(),
            forbidden: input.forbidden.as_ref(),
            now: input.now,
        }
    }

    /// The external name, parsed as a VMID.
    pub fn external_name(&self) -> Option<Result<u32, String>> {
        let text = self.vm.external_name()?;
        Some(
            text.parse::<u32>()
                .ok()
                .filter(|id| (100..=999_999_999).contains(id))
                .ok_or_else(|| text.to_owned()),
        )
    }

    /// The VMID, once recorded.
    pub fn vmid(&self) -> Option<u32> {
        self.external_name()?.ok()
    }

    pub fn vmid_text(&self) -> String {
        self.vmid()
            .map_or_else(|| "(no VMID yet)".into(), |id| id.to_string())
    }

    fn annotation_time(&self, key: &str) -> Option<Timestamp> {
        // An unreadable time still counts as set, as early as possible.
        self.vm
            .annotation(key)
            .map(|t| t.parse().unwrap_or(Timestamp::MIN))
    }

    /// A create may have been sent and its success is not recorded:
    /// `external-create-pending` is set and newer than `-succeeded`.
    pub fn create_pending(&self) -> bool {
        match (
            self.annotation_time(meta::EXTERNAL_CREATE_PENDING),
            self.annotation_time(meta::EXTERNAL_CREATE_SUCCEEDED),
        ) {
            (Some(pending), Some(succeeded)) => pending > succeeded,
            (pending, _) => pending.is_some(),
        }
    }

    /// The create task is known to have succeeded (and no create was
    /// attempted since).
    pub fn create_succeeded(&self) -> bool {
        self.vm
            .annotation(meta::EXTERNAL_CREATE_SUCCEEDED)
            .is_some()
            && !self.create_pending()
    }

    pub fn deleting(&self) -> bool {
        self.vm.metadata.deletion_timestamp.is_some()
    }

    pub fn deletion_time(&self) -> Option<Timestamp> {
        self.vm.metadata.deletion_timestamp.as_ref().map(|t| t.0)
    }

    pub fn has_finalizer(&self) -> bool {
        crate::reconcile::common::finalizer::has_finalizer(&self.vm.metadata)
    }

    pub fn uid(&self) -> &str {
        &self.id.uid
    }

    /// This resource's owner marker line (see [`super::owner`]).
    pub fn marker_line(&self) -> String {
        super::owner::marker_line(&self.id.namespace, &self.id.name, self.uid())
    }

    /// The VM's name on Proxmox: the spec's, else the resource's.
    pub fn vm_name(&self) -> String {
        self.spec
            .name
            .clone()
            .or_else(|| self.vm.metadata.name.clone())
            .unwrap_or_default()
    }

    /// The UPID of the task recorded in the status, parsed.
    pub fn recorded_upid(&self) -> Option<Result<Upid, InvalidUpid>> {
        self.task().map(|t| Upid::parse(&t.upid))
    }

    pub fn task(&self) -> Option<&InFlightTask> {
        self.status.at_provider.task.as_ref()
    }

    /// Whether the spec lets the VM be on `node`: it is `node`, or one of
    /// `allowedNodes` (any node when neither is set).
    pub fn allowed(&self, node: &str) -> bool {
        match &self.spec.node {
            Some(wanted) => wanted == node,
            None => {
                self.spec.allowed_nodes.is_empty()
                    || self.spec.allowed_nodes.iter().any(|n| n == node)
            }
        }
    }

    /// Whether a VM found on `node` is where the spec lets it be: on `node`
    /// or one of `allowedNodes` (HA or its load balancer may move it among
    /// them even when `node` names one).
    pub fn tolerates(&self, node: &str) -> bool {
        self.allowed(node) || self.spec.allowed_nodes.iter().any(|n| n == node)
    }

    /// The node the VM is to be created on, once known: `spec.node`, else
    /// the placement recorded in the status when the spec allows it (a
    /// node recorded before `allowedNodes` changed is placed again).
    pub fn placed_node(&self) -> Option<String> {
        self.spec.node.clone().or_else(|| {
            self.status
                .at_provider
                .node
                .clone()
                .filter(|n| self.allowed(n))
        })
    }

    /// Whether a create may follow its placement in the same pass: nothing
    /// it needs is looked up on the node before (no image volume to find
    /// or download there, no seed ISO to upload, neither a clone nor a
    /// restore). The pass that places the VM then also takes its import
    /// slot and creates it, or waits for the slot, and one status write
    /// records the placement with what came of it: a status write and a
    /// pass per VM fewer on a bulk apply (docs/scaling.md). Otherwise the
    /// placement is recorded first and the next pass looks on the node.
    pub fn creates_where_placed(&self) -> bool {
        self.spec.clone.is_none()
            && self.spec.restore.is_none()
            && self.spec.custom_cloud_init.is_none()
            && self
                .spec
                .disks
                .iter()
                .filter_map(|d| d.image.as_ref())
                .all(|image| image.volume().is_none())
    }

    /// The Synced reason the resource had before this pass.
    pub fn previous_synced_reason(&self) -> Option<&str> {
        crate::api::condition::find(&self.status.conditions, ConditionType::Synced)
            .map(|c| c.reason.as_str())
    }

    /// Adds a Warning event to `d` when the Synced reason changes to
    /// `reason` (once per change, not once per pass).
    pub fn event_on_change(
        &self,
        d: Decision,
        reason: Reason,
        event: &'static str,
        note: String,
    ) -> Decision {
        if self.previous_synced_reason() == Some(reason.as_str()) {
            d
        } else {
            d.event(true, event, note)
        }
    }

    /// The VM's memory in bytes (for placement).
    pub fn memory_bytes(&self) -> u64 {
        self.spec.memory.bytes().unwrap_or_default()
    }

    /// The VM's vCPUs: sockets × cores (qemu-server's `maxcpus`).
    pub fn vcpus(&self) -> u32 {
        self.spec.cpu.sockets.saturating_mul(self.spec.cpu.cores)
    }

    /// Whether the create imports disks (and so counts against the node's
    /// import limit).
    pub fn imports(&self) -> bool {
        self.spec
            .disks
            .iter()
            .any(|d| d.image.is_some() || d.import_from.is_some())
    }

    /// How long an up-to-date VM waits before the next drift check.
    pub fn resync_interval(&self) -> Duration {
        self.vm
            .annotation(meta::POLL_INTERVAL)
            .and_then(go_duration)
            .map_or(self.timing.resync_interval, |d| {
                d.max(super::limits::MIN_POLL_INTERVAL)
            })
    }

    /// Whether the observed power state is what the spec asks for.
    pub fn wants_running(&self) -> bool {
        self.spec.power_state == PowerState::Running
    }

    fn on_create_path(&self) -> bool {
        self.caps.create && !self.deleting() && !self.create_succeeded()
    }

    /// What to observe for [`super::plan`].
    pub fn needs(&self) -> Needs {
        let creating = self.on_create_path();
        let node = self.placed_node();
        let images = match (&node, creating && self.spec.clone.is_none()) {
            (Some(node), true) => self
                .spec
                .disks
                .iter()
                .filter_map(|d| d.image.as_ref())
                .filter_map(|image| {
                    Some(ImageRef {
                        node: node.clone(),
                        storage: image.storage.clone(),
                        volume: image.volume()?,
                    })
                })
                .collect(),
            (Some(_), false) | (None, _) => vec![],
        };
        let template = self.spec.clone.as_ref().filter(|_| creating).and_then(|c| {
            match (c.template_vmid, &c.template_name, &c.image) {
                (Some(vmid), _, _) => Some(TemplateRef::Vmid(vmid)),
                (None, Some(name), _) => Some(TemplateRef::Name(name.clone())),
                (None, None, Some(image)) => Some(TemplateRef::Image {
                    name: image.clone(),
                    node: node.clone(),
                }),
                (None, None, None) => None,
            }
        });
        let heavy = if self.spec.clone.is_some() {
            Some(Heavy::Clone)
        } else if self.imports() {
            Some(Heavy::Import)
        } else {
            None
        };
        let placement = (creating && node.is_none()).then(|| PlacementRequest {
            allowed: self.spec.allowed_nodes.clone(),
            memory: self.memory_bytes(),
            cpus: self.vcpus(),
            policy: self.spec.placement.policy,
            spread_by: self.spec.placement.label_key.as_ref().map(|key| {
                let value = self.vm.metadata.labels.as_ref().and_then(|l| l.get(key));
                (key.clone(), value.cloned().unwrap_or_default())
            }),
            prefer_template_node: self.spec.clone.is_some(),
        });
        let slot = heavy.filter(|_| creating).map(|kind| SlotRequest {
            // A clone's task runs on the template's node.
            node: match kind {
                Heavy::Clone => None,
                Heavy::Import => node.clone(),
            },
            kind,
        });
        let holds = |type_: ConditionType| {
            crate::api::condition::find(&self.status.conditions, type_)
                .is_some_and(|c| c.status == crate::api::ConditionStatus::True)
        };
        let idle = !creating
            && !self.deleting()
            && self.task().is_none()
            && self.status.observed_generation == self.vm.metadata.generation
            && self.status.at_provider.pending_changes.is_empty()
            && holds(ConditionType::Ready)
            && holds(ConditionType::Synced);
        Needs {
            idle,
            // No VMID recorded or named, and one may be created: the
            // scheduler reserves one before the plan records it.
            allocate_vmid: self.external_name().is_none()
                && self.spec.vmid.is_none()
                && self.caps.create
                && !self.deleting(),
            vmid: self.vmid(),
            task: self.recorded_upid().and_then(Result::ok),
            active_tasks_on: node.clone(),
            images,
            named_images: if creating && self.spec.clone.is_none() {
                self.spec
                    .disks
                    .iter()
                    .filter_map(|d| d.image.as_ref()?.name.clone())
                    .collect()
            } else {
                vec![]
            },
            backup: self
                .spec
                .restore
                .as_ref()
                .and_then(|r| r.backup_ref.as_ref())
                .filter(|_| creating && self.vmid().is_some())
                .map(|r| r.name.clone()),
            placement,
            template,
            import_sources: if self.deleting() {
                vec![]
            } else {
                super::tenancy::import_sources(self.spec)
            },
            password: self
                .spec
                .cloud_init
                .as_ref()
                .and_then(|ci| ci.password_secret_ref.as_ref())
                .filter(|_| !self.deleting())
                .map(|r| (r.name.clone(), r.key.clone())),
            // An import takes its slot on its node: recorded, or placed
            // this pass when the create may follow at once.
            slot: slot.filter(|s| {
                s.kind == Heavy::Clone || s.node.is_some() || self.creates_where_placed()
            }),
            ha: self.spec.ha.is_some() && self.vmid().is_some(),
            firewall: self.spec.firewall.is_some() && self.vmid().is_some() && !self.deleting(),
            pool: self.spec.pool.is_some() && self.vmid().is_some() && !self.deleting(),
            seed: self.spec.custom_cloud_init.is_some() && self.vmid().is_some(),
            linked_clones: self.deleting(),
            host: !self.deleting() && self.vmid().is_some(),
        }
    }
}
