//! Table tests of the plan: named cases, input → expected step and
//! conditions. Fixtures build one "world" (resource + provider + Proxmox
//! observation) per case.

mod adopt;
pub(super) mod converge;
pub(super) mod create;
mod delete;
mod firewall;
mod fleet;
mod flow;
mod gate;
mod ha;
mod images;
mod lifecycle;
mod limits;
mod motion;
mod pool;
mod races;
mod restore;
mod seed;
mod status;
mod tasks;
mod tenancy;

use std::collections::BTreeMap;

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
    jiff::Timestamp,
};
use serde_json::json;

use super::*;
use crate::api::{
    ConditionStatus, ProxmoxVMSpec, ProxmoxVMStatus,
    condition::{ConditionType, find},
    meta,
    vm::{InFlightTask, TaskAction, TaskFailure, VmParameters},
};

pub(super) const UID: &str = "0b9f5c1e-7d3a-4c2b-9e8f-1a2b3c4d5e6f";
const T0: i64 = 1_800_000_000;

/// `T0 + secs`.
pub(super) fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(T0 + secs).expect("in range")
}

/// The spec most cases use: a cloud image disk, a NIC, cloud-init, agent.
pub(super) fn base_spec() -> VmParameters {
    serde_json::from_value(json!({
        "memory": "2Gi",
        "cpu": {"cores": 2},
        "disks": [{
            "slot": "scsi0",
            "storage": "local-lvm",
            "size": "20Gi",
            "image": {
                "url": "https://images.example/jammy.img",
                "checksum": "ab".repeat(32),
                "checksumAlgorithm": "sha256",
            },
        }],
        "networks": [{"slot": "net0", "bridge": "vmbr0"}],
        "cloudInit": {
            "user": "ubuntu",
            "sshKeys": ["ssh-ed25519 AAAAkey me@laptop"],
            "ipConfigs": [{"interface": "net0", "ip": "dhcp"}],
        },
        "agent": {"enabled": true},
        "tags": ["web", "prod"],
    }))
    .expect("valid spec")
}

/// Settings as they are sent (values as Proxmox reads them, the password
/// exposed), by key.
pub(super) fn sent(settings: &pve_client::vm::VmParams) -> BTreeMap<String, String> {
    settings.to_params().pairs().iter().cloned().collect()
}

/// The image volume of [`base_spec`].
pub(super) fn image_volume() -> String {
    base_spec().disks[0]
        .image
        .as_ref()
        .unwrap()
        .volume()
        .unwrap()
}

/// A config that matches [`base_spec`] exactly, owned by [`UID`].
pub(super) fn matching_config() -> VmConfig {
    let marker = marker_line("default", "web", UID);
    let current: BTreeMap<String, String> = [
        ("name", "web"),
        ("cores", "2"),
        ("memory", "2048"),
        ("agent", "1"),
        ("tags", "prod;web"),
        ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
        ("ciuser", "ubuntu"),
        ("sshkeys", "ssh-ed25519%20AAAAkey%20me%40laptop"),
        ("ipconfig0", "ip=dhcp"),
        ("ide2", "local-lvm:vm-100-cloudinit,media=cdrom"),
        ("scsi0", "local-lvm:vm-100-disk-0,size=20G"),
        ("scsihw", "virtio-scsi-single"),
        ("boot", "order=scsi0"),
        ("description", marker.as_str()),
        ("digest", "d1g3st"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    VmConfig {
        current,
        pending: BTreeMap::new(),
    }
}

/// Our VM, matching the spec, in the given power state.
pub(super) fn our_vm(power: Power) -> ObservedVm {
    ObservedVm {
        node: "pve1".into(),
        power,
        lock: None,
        template: false,
        config: Some(matching_config()),
        agent: AgentState::NotAsked,
    }
}

/// One case's world.
#[derive(Clone)]
pub(super) struct World {
    pub vm: ProxmoxVM,
    pub provider: ProviderState,
    pub obs: Observation,
    pub now: Timestamp,
    pub observe_error: Option<ObserveError>,
    pub forbidden: Option<Forbidden>,
}

impl World {
    /// A fresh resource: no VMID, no finalizer, no status.
    pub fn new() -> Self {
        let spec = ProxmoxVMSpec {
            for_provider: base_spec(),
            managed: Default::default(),
            write_connection_secret_to_ref: None,
        };
        let mut vm = ProxmoxVM::new("web", spec);
        vm.metadata = ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some(UID.into()),
            generation: Some(3),
            ..ObjectMeta::default()
        };
        Self {
            vm,
            provider: ProviderState::Ready {
                timing: Default::default(),
                limits: Default::default(),
                clones: None,
                downloads: None,
                endpoint_host: String::new(),
            },
            // The scheduler reserves VMID 100 whenever asked to.
            obs: Observation {
                allocated_vmid: Some(VmidGrant::Reserved(100)),
                ..Observation::default()
            },
            now: at(100),
            observe_error: None,
            forbidden: None,
        }
    }

    pub fn spec(mut self, f: impl FnOnce(&mut VmParameters)) -> Self {
        f(&mut self.vm.spec.for_provider);
        self
    }

    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.vm
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
        self
    }

    pub fn vmid(self, vmid: u32) -> Self {
        self.annotate(meta::EXTERNAL_NAME, &vmid.to_string())
    }

    /// VMID 100 recorded and a create marked pending at T0.
    pub fn pending(self) -> Self {
        self.vmid(100)
            .annotate(meta::EXTERNAL_CREATE_PENDING, &at(0).to_string())
    }

    /// [`Self::pending`], then the create recorded as succeeded at T0+50.
    pub fn created(self) -> Self {
        self.pending()
            .annotate(meta::EXTERNAL_CREATE_SUCCEEDED, &at(50).to_string())
            .finalizer()
    }

    pub fn finalizer(mut self) -> Self {
        self.vm.metadata.finalizers = Some(vec![meta::FINALIZER.into()]);
        self
    }

    pub fn deleting(mut self) -> Self {
        self.vm.metadata.deletion_timestamp = Some(Time(at(60)));
        self
    }

    pub fn policies(mut self, policies: &[ManagementPolicy]) -> Self {
        self.vm.spec.managed.management_policies = policies.to_vec();
        self
    }

    pub fn status(mut self, f: impl FnOnce(&mut ProxmoxVMStatus)) -> Self {
        f(self.vm.status.get_or_insert_with(Default::default));
        self
    }

    pub fn node(self, node: &str) -> Self {
        self.status(|s| s.at_provider.node = Some(node.into()))
    }

    /// A task of `action` recorded in the status, started at T0+`started`.
    pub fn task(self, action: TaskAction, started: i64) -> Self {
        let task = InFlightTask {
            upid: format!(
                "UPID:pve1:00001234:00ABCDEF:6B49D200:{}:100:root@pam:",
                action.pve_type()
            ),
            action,
            type_: action.pve_type().into(),
            node: "pve1".into(),
            target: None,
            started_at: Time(at(started)),
            deadline: Time(at(started + 600)),
            progress: None,
            summary: action.pve_type().into(),
        };
        self.status(|s| s.at_provider.task = Some(task))
    }

    pub fn failed(self, action: TaskAction, count: u32, when: i64) -> Self {
        self.status(|s| {
            s.at_provider.last_failure = Some(TaskFailure {
                action,
                message: "boom".into(),
                at: Time(at(when)),
                count,
                vmid_taken: false,
            })
        })
    }

    pub fn observe(mut self, f: impl FnOnce(&mut Observation)) -> Self {
        f(&mut self.obs);
        self
    }

    pub fn vm_state(self, state: VmState) -> Self {
        self.observe(|o| o.vm = state)
    }

    pub fn present(self, vm: ObservedVm) -> Self {
        self.vm_state(VmState::Present(vm))
    }

    pub fn absent(self) -> Self {
        self.vm_state(VmState::Absent)
    }

    pub fn task_state(self, state: TaskState) -> Self {
        self.observe(|o| o.task = Some(state))
    }

    pub fn image(self, present: bool) -> Self {
        self.observe(|o| {
            o.images.insert(image_volume(), present);
        })
    }

    pub fn active(self, type_: &str, id: &str) -> Self {
        self.observe(|o| {
            // Started at(90).
            let started = u32::try_from(at(90).as_second()).unwrap();
            o.active_tasks.push(
                Upid::encode("pve1", 0x9999, 0xABCDEF, started, type_, id, "root@pam").unwrap(),
            )
        })
    }

    pub fn password(self, version: &str) -> Self {
        self.spec(|s| {
            s.cloud_init.as_mut().unwrap().password_secret_ref =
                Some(crate::api::meta::LocalSecretKeySelector {
                    name: "web-pw".into(),
                    key: "password".into(),
                });
        })
        .observe(|o| {
            o.password = Some(PasswordState::Available {
                value: Sensitive::new("hunter2"),
                version: version.into(),
            })
        })
    }

    /// Placement chose `node` this pass.
    pub fn placed(self, node: &str) -> Self {
        self.observe(|o| {
            o.placement = Some(Placement::Chosen {
                node: node.into(),
                why: "most free memory".into(),
            })
        })
    }

    /// The import or clone slot on `node` was taken for this pass.
    pub fn slot_granted(self, node: &str) -> Self {
        self.observe(|o| o.slot = Some(SlotGrant::Granted { node: node.into() }))
    }

    /// Every slot on `node` is in use; this resource has waited `secs`,
    /// first in line.
    pub fn slot_busy(self, node: &str, secs: u64) -> Self {
        self.slot_busy_behind(node, secs, 0)
    }

    /// [`Self::slot_busy`] with `ahead` resources waiting before it.
    pub fn slot_busy_behind(self, node: &str, secs: u64, ahead: u32) -> Self {
        self.observe(|o| {
            o.slot = Some(SlotGrant::Busy {
                node: node.into(),
                in_use: 2,
                limit: 2,
                stalled: std::time::Duration::from_secs(secs),
                ahead,
            })
        })
    }

    /// Proxmox could not be observed this pass.
    pub fn observe_failed(mut self, message: &str) -> Self {
        self.observe_error = Some(ObserveError {
            message: message.into(),
            retry_in: std::time::Duration::from_secs(4),
        });
        self
    }

    /// The API server refused a request of this pass (RBAC).
    pub fn forbidden(mut self, message: &str) -> Self {
        self.forbidden = Some(Forbidden {
            message: message.into(),
            retry_in: std::time::Duration::from_secs(4),
        });
        self
    }

    pub fn with_provider(mut self, provider: ProviderState) -> Self {
        self.provider = provider;
        self
    }

    pub fn at(mut self, secs: i64) -> Self {
        self.now = at(secs);
        self
    }

    /// The plan's input for this world.
    pub fn input(&self) -> PlanInput<'_> {
        PlanInput {
            vm: &self.vm,
            provider: Some(self.provider.clone()),
            observed: self.obs.clone(),
            now: self.now,
            observe_error: self.observe_error.clone(),
            forbidden: self.forbidden.clone(),
        }
    }

    pub fn run(&self) -> Plan {
        plan(&self.input())
    }
}

use crate::api::ManagementPolicy;

/// A task that ended with `OK`.
pub(super) fn task_ok() -> TaskState {
    TaskState::Finished(TaskOutcome::Succeeded {
        warnings: 0,
        warning_lines: vec![],
    })
}

/// A task that failed with `exit_status`.
pub(super) fn task_failed(exit_status: &str, log_tail: Vec<String>) -> TaskState {
    TaskState::Finished(TaskOutcome::Failed {
        exit_status: exit_status.into(),
        log_tail,
    })
}

/// What a case expects: the step, and Synced / Ready as (status, reason).
pub(super) struct Expect {
    pub step: &'static str,
    pub synced: (ConditionStatus, Reason),
    pub ready: Option<(ConditionStatus, Reason)>,
}

pub(super) const T: ConditionStatus = ConditionStatus::True;
pub(super) const F: ConditionStatus = ConditionStatus::False;

pub(super) fn expect(
    step: &'static str,
    synced: (ConditionStatus, Reason),
    ready: Option<(ConditionStatus, Reason)>,
) -> Expect {
    Expect {
        step,
        synced,
        ready,
    }
}

/// Runs a table: every case's plan must match its expectation.
pub(super) fn run_table(cases: Vec<(&str, World, Expect)>) {
    let mut failures = vec![];
    for (name, world, want) in cases {
        let plan = world.run();
        if let Err(why) = check(&plan, &want) {
            failures.push(format!("{name}: {why}\n    plan: {:?}", plan.step));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

pub(super) fn check(plan: &Plan, want: &Expect) -> Result<(), String> {
    let got = plan.step.name();
    if got != want.step {
        return Err(format!(
            "step {got}, want {} (synced: {:?})",
            want.step,
            condition(plan, ConditionType::Synced)
        ));
    }
    let synced = condition(plan, ConditionType::Synced).ok_or("no Synced condition")?;
    if (synced.0, synced.1.as_str()) != (want.synced.0, want.synced.1.as_str()) {
        return Err(format!("Synced {synced:?}, want {:?}", want.synced));
    }
    if let Some((status, reason)) = want.ready {
        let ready = condition(plan, ConditionType::Ready).ok_or("no Ready condition")?;
        if (ready.0, ready.1.as_str()) != (status, reason.as_str()) {
            return Err(format!("Ready {ready:?}, want {:?}", (status, reason)));
        }
    }
    Ok(())
}

/// A condition as (status, reason, message).
pub(super) fn condition(
    plan: &Plan,
    type_: ConditionType,
) -> Option<(ConditionStatus, String, String)> {
    find(&plan.status.conditions, type_).map(|c| {
        (
            c.status,
            c.reason.clone(),
            c.message.clone().unwrap_or_default(),
        )
    })
}

/// The Synced message of a plan.
pub(super) fn synced_message(plan: &Plan) -> String {
    condition(plan, ConditionType::Synced)
        .map(|c| c.2)
        .unwrap_or_default()
}
