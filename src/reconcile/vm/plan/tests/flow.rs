//! Whole flows: the plan run pass after pass against a tiny model of
//! Kubernetes and Proxmox, until the VM is Ready (or gone). Catches what
//! single cases cannot: loops (a config Proxmox echoes differently from what
//! was sent would be "corrected" forever), steps dispatched twice after a
//! lost status write, flows that never finish.

use super::*;

/// Proxmox as far as the plan can tell: one VM, one image, one task.
#[derive(Default)]
struct Pve {
    vm: Option<ObservedVm>,
    image: bool,
    /// The running task and what it does when it ends.
    task: Option<(Upid, TaskAction)>,
    /// Every Proxmox step sent, in order.
    sent: Vec<String>,
}

/// How Proxmox stores what a create sent: imported disks get their volume
/// and the image's size, the cloud-init drive its volume, NICs a MAC.
fn stored(key: &str, value: &str) -> String {
    if value.contains("import-from=") {
        let storage = value.split(':').next().unwrap_or_default();
        return format!("{storage}:vm-100-disk-0,size=2252M");
    }
    if let Some(storage) = value.strip_suffix(":cloudinit") {
        return format!("{storage}:vm-100-cloudinit,media=cdrom");
    }
    if key.starts_with("net") && !value.split(',').next().unwrap_or_default().contains('=') {
        let (model, rest) = value.split_once(',').unwrap_or((value, ""));
        return format!("{model}=BC:24:11:00:00:01,{rest}");
    }
    value.to_owned()
}

impl Pve {
    fn start(&mut self, step: &Step) -> Upid {
        let action = step.pve().expect("a Proxmox step").action();
        self.sent.push(step.name().to_owned());
        // A download's task ID is the file name; a VM task's, the VMID.
        let id = if action == TaskAction::DownloadImage {
            image_volume().rsplit('/').next().unwrap().to_owned()
        } else {
            "100".to_owned()
        };
        let pid = u32::try_from(self.sent.len()).unwrap();
        let started = u32::try_from(T0).unwrap();
        let upid =
            Upid::encode("pve1", pid, 1, started, action.pve_type(), &id, "root@pam").unwrap();
        match step {
            Step::Pve(PveCall::CreateVm { params, .. }) => {
                let config = VmConfig {
                    current: sent(&params.settings)
                        .iter()
                        .filter(|(k, _)| k.as_str() != "cipassword" && k.as_str() != "pool")
                        .map(|(k, v)| (k.clone(), stored(k, v)))
                        .chain([("digest".to_owned(), "d0".to_owned())])
                        .collect(),
                    pending: Default::default(),
                };
                self.vm = Some(ObservedVm {
                    node: "pve1".into(),
                    power: Power::Stopped,
                    lock: Some("create".into()),
                    template: false,
                    config: Some(config),
                    agent: AgentState::NotAsked,
                });
            }
            Step::Pve(PveCall::CloneVm {
                name, description, ..
            }) => {
                // A bare template: its own disk, one NIC, no cloud-init.
                let current = [
                    ("name", name.as_str()),
                    ("description", description.as_str()),
                    ("memory", "512"),
                    ("scsi0", "local-lvm:vm-100-disk-0,size=2252M"),
                    ("net0", "virtio=BC:24:11:00:00:02,bridge=vmbr0"),
                    ("digest", "c0"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
                self.vm = Some(ObservedVm {
                    node: "pve1".into(),
                    power: Power::Stopped,
                    lock: Some("clone".into()),
                    template: false,
                    config: Some(VmConfig {
                        current,
                        pending: Default::default(),
                    }),
                    agent: AgentState::NotAsked,
                });
            }
            Step::Pve(PveCall::RestoreVm {
                name, description, ..
            }) => {
                // The archive's config (another resource's VM, backed up),
                // the call's options over it, as qemu-server does.
                let current = [
                    ("name", name.as_str()),
                    ("description", description.as_str()),
                    ("memory", "1024"),
                    ("scsi0", "local-lvm:vm-100-disk-0,size=2252M"),
                    ("net0", "virtio=BC:24:11:00:00:03,bridge=vmbr0"),
                    ("digest", "r0"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
                self.vm = Some(ObservedVm {
                    node: "pve1".into(),
                    power: Power::Stopped,
                    lock: Some("create".into()),
                    template: false,
                    config: Some(VmConfig {
                        current,
                        pending: Default::default(),
                    }),
                    agent: AgentState::NotAsked,
                });
            }
            Step::Pve(PveCall::Configure { changes, .. }) => {
                let config = self.vm.as_mut().unwrap().config.as_mut().unwrap();
                for (k, v) in sent(&changes.set) {
                    config.current.insert(k.clone(), stored(&k, &v));
                }
            }
            Step::Pve(PveCall::ResizeDisk { slot, bytes, .. }) => {
                let config = self.vm.as_mut().unwrap().config.as_mut().unwrap();
                let value = config.current.get_mut(slot).unwrap();
                let base = value.split(",size=").next().unwrap().to_owned();
                *value = format!("{base},size={}M", bytes >> 20);
            }
            Step::Pve(PveCall::Migrate { target, .. }) => {
                self.vm.as_mut().unwrap().node = target.clone();
            }
            Step::Pve(PveCall::MoveDisk { slot, storage, .. }) => {
                let config = self.vm.as_mut().unwrap().config.as_mut().unwrap();
                let value = config.current.get_mut(slot).unwrap();
                let rest = value.split_once(':').map(|(_, r)| r.to_owned()).unwrap();
                *value = format!("{storage}:{rest}");
            }
            Step::Pve(
                PveCall::UploadSeed { .. }
                | PveCall::DeleteVolume { .. }
                | PveCall::DownloadImage { .. }
                | PveCall::Start { .. }
                | PveCall::Shutdown { .. }
                | PveCall::Stop { .. }
                | PveCall::Destroy { .. }
                | PveCall::ConvertToTemplate { .. },
            )
            | Step::Kube(_)
            | Step::Ha(_)
            | Step::Firewall(_)
            | Step::Pool(_)
            | Step::Idle(_) => {}
        }
        self.task = Some((upid.clone(), action));
        upid
    }

    /// The task ends: its effect lands.
    fn finish(&mut self) {
        let Some((_, action)) = self.task.take() else {
            return;
        };
        match action {
            TaskAction::DownloadImage => self.image = true,
            TaskAction::Create | TaskAction::Clone | TaskAction::Restore => {
                self.vm.as_mut().unwrap().lock = None
            }
            TaskAction::Start => self.vm.as_mut().unwrap().power = Power::Running,
            TaskAction::Shutdown | TaskAction::Stop => {
                self.vm.as_mut().unwrap().power = Power::Stopped
            }
            TaskAction::Destroy => self.vm = None,
            // The model shows nothing of these.
            TaskAction::Configure
            | TaskAction::ResizeDisk
            | TaskAction::Migrate
            | TaskAction::MoveDisk
            | TaskAction::ConfigureHa
            | TaskAction::ConfigureFirewall
            | TaskAction::MovePool
            | TaskAction::UploadSeed
            | TaskAction::DeleteVolume
            | TaskAction::Template => {}
        }
    }

    fn observe(&self, world: &World) -> Observation {
        let vm = match (&world.vm.external_name(), &self.vm) {
            (None, _) => VmState::Unknown,
            (Some(_), None) => VmState::Absent,
            (Some(_), Some(vm)) if vm.creation_locked() => VmState::Present(ObservedVm {
                config: None,
                ..vm.clone()
            }),
            (Some(_), Some(vm)) => VmState::Present(vm.clone()),
        };
        let recorded = world
            .vm
            .status
            .as_ref()
            .and_then(|s| s.at_provider.task.as_ref());
        let task = recorded.map(|t| match &self.task {
            Some((upid, _)) if upid.as_str() == t.upid => TaskState::Running { progress: Some(50) },
            Some(_) | None => task_ok(),
        });
        // The node's active task list, as the glue reads it on every pass.
        let active_tasks: Vec<ActiveTask> = self.task.iter().map(|(u, _)| u.clone()).collect();
        Observation {
            vm,
            task,
            active_tasks,
            images: [(image_volume(), self.image)].into(),
            template: Some(TemplateLookup::Found {
                vmid: 9000,
                node: "pve1".into(),
                template: true,
                pool: None,
                tags: vec![],
            }),
            placement: Some(Placement::Chosen {
                node: "pve1".into(),
                why: "most free memory".into(),
            }),
            // The model's node always has a free slot.
            slot: Some(SlotGrant::Granted {
                node: "pve1".into(),
            }),
            // And the scheduler's VMID is always 100.
            allocated_vmid: Some(VmidGrant::Reserved(100)),
            ..Observation::default()
        }
    }
}

/// Applies a Kubernetes step to the resource.
fn apply_kube(world: &mut World, step: &Step) {
    let now = world.now.to_string();
    let ann = |w: &mut World, k: &str, v: &str| {
        w.vm.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(k.into(), v.into());
    };
    match step {
        Step::Kube(KubeWrite::RecordExternalName {
            vmid,
            create_pending,
        }) => {
            ann(world, meta::EXTERNAL_NAME, &vmid.to_string());
            if *create_pending {
                ann(world, meta::EXTERNAL_CREATE_PENDING, &now);
            }
        }
        Step::Kube(KubeWrite::RecordCreateSucceeded) => {
            ann(world, meta::EXTERNAL_CREATE_SUCCEEDED, &now)
        }
        Step::Kube(KubeWrite::AddFinalizer) => {
            world.vm.metadata.finalizers = Some(vec![meta::FINALIZER.into()])
        }
        Step::Kube(KubeWrite::RemoveFinalizer) => world.vm.metadata.finalizers = Some(vec![]),
        Step::Kube(KubeWrite::ForgetExternalName) => {
            let annotations = world
                .vm
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            for key in [
                meta::EXTERNAL_NAME,
                meta::EXTERNAL_CREATE_PENDING,
                meta::EXTERNAL_CREATE_SUCCEEDED,
            ] {
                annotations.remove(key);
            }
        }
        Step::Kube(KubeWrite::LateInitialize(fields)) => {
            // A JSON merge patch of forProvider, as the API server applies it.
            let mut spec = serde_json::to_value(&world.vm.spec.for_provider).unwrap();
            merge(&mut spec, fields);
            world.vm.spec.for_provider = serde_json::from_value(spec).unwrap();
        }
        Step::Pve(_) | Step::Ha(_) | Step::Firewall(_) | Step::Pool(_) | Step::Idle(_) => {}
    }
}

/// RFC 7386: objects merged key by key, anything else replaced.
fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// Runs passes until `done` holds; `lose_status_after` drops the status
/// write that follows that Proxmox step (a crash between dispatch and write).
fn drive(
    mut world: World,
    pve: &mut Pve,
    lose_status_after: Option<&str>,
    done: impl Fn(&Plan) -> bool,
) -> Vec<String> {
    let mut lost = false;
    let mut steps = vec![];
    for _ in 0..60 {
        world.obs = pve.observe(&world);
        let mut plan = world.run();
        steps.push(plan.step.name().to_owned());
        if done(&plan) {
            return steps;
        }
        let mut write_status = true;
        if plan.step.pve().is_some() {
            let upid = pve.start(&plan.step);
            plan = settle(&world.input(), plan, Ok(Done::Started(upid)));
            if !lost && lose_status_after == Some(plan.step.name()) {
                lost = true;
                write_status = false;
            }
        } else {
            apply_kube(&mut world, &plan.step);
        }
        if write_status {
            world.vm.status = Some(plan.status.clone());
        }
        // Time passes; a task that was seen running ends.
        world.now = at((world.now.as_second() - T0) + 5);
        if matches!(
            plan.step,
            Step::Idle(Idle::ObserveTask) | Step::Idle(Idle::Wait)
        ) {
            pve.finish();
        }
    }
    panic!("no end after 60 passes: {steps:?}");
}

fn ready(plan: &Plan) -> bool {
    plan.step == Step::Idle(Idle::UpToDate)
        && condition(plan, ConditionType::Ready).is_some_and(|c| c.0 == T)
}

#[test]
fn image_flow_reaches_ready_with_each_step_once() {
    let mut pve = Pve::default();
    let steps = drive(World::new(), &mut pve, None, ready);
    assert_eq!(
        pve.sent,
        ["DownloadImage", "CreateVm", "ResizeDisk", "Start"],
        "passes: {steps:?}"
    );
    for k8s in [
        "RecordExternalName",
        "AddFinalizer",
        "RecordCreateSucceeded",
    ] {
        assert_eq!(
            steps.iter().filter(|s| **s == k8s).count(),
            1,
            "{k8s} in {steps:?}"
        );
    }
    let vm = pve.vm.unwrap();
    assert_eq!(
        vm.config.unwrap().current["scsi0"],
        "local-lvm:vm-100-disk-0,size=20480M"
    );
}

#[test]
fn a_crash_after_each_dispatch_never_sends_it_twice() {
    for step in ["DownloadImage", "CreateVm", "ResizeDisk", "Start"] {
        let mut pve = Pve::default();
        let passes = drive(World::new(), &mut pve, Some(step), ready);
        assert_eq!(
            pve.sent,
            ["DownloadImage", "CreateVm", "ResizeDisk", "Start"],
            "status lost after {step}: passes {passes:?}"
        );
    }
}

#[test]
fn clone_flow_configures_grows_and_starts() {
    let world = World::new().spec(|s| {
        s.disks[0].image = None;
        s.clone = Some(serde_json::from_value(json!({"templateName": "jammy"})).unwrap());
    });
    let mut pve = Pve::default();
    let steps = drive(world, &mut pve, None, ready);
    assert_eq!(
        pve.sent,
        ["CloneVm", "Configure", "ResizeDisk", "Start"],
        "passes: {steps:?}"
    );
    let config = pve.vm.unwrap().config.unwrap().current;
    assert_eq!(config["ide2"], "local-lvm:vm-100-cloudinit,media=cdrom");
    assert_eq!(config["memory"], "2048");
}

#[test]
fn restore_flow_is_marked_by_the_call_even_if_its_status_write_is_lost() {
    let world = World::new().spec(|s| {
        s.disks[0].image = None;
        s.restore = Some(
            serde_json::from_value(json!({
                "archive": "local:backup/vzdump-qemu-300-2026_12_05-01_00_00.vma.zst"
            }))
            .unwrap(),
        );
    });
    for lost in [None, Some("RestoreVm")] {
        let mut pve = Pve::default();
        let steps = drive(world.clone(), &mut pve, lost, ready);
        assert_eq!(
            pve.sent,
            ["RestoreVm", "Configure", "ResizeDisk", "Start"],
            "status lost after {lost:?}: passes: {steps:?}"
        );
        let config = pve.vm.unwrap().config.unwrap().current;
        assert_eq!(
            config["description"],
            marker_line("default", "web", UID),
            "the restore call marks the VM"
        );
        assert_eq!(config["memory"], "2048");
        assert_eq!(config["name"], "web");
    }
}

#[test]
fn delete_flow_destroys_then_lets_go() {
    let mut pve = Pve {
        vm: Some(our_vm(Power::Running)),
        image: true,
        ..Pve::default()
    };
    let steps = drive(World::new().created().deleting(), &mut pve, None, |p| {
        p.step == Step::Kube(KubeWrite::RemoveFinalizer)
    });
    assert_eq!(pve.sent, ["Shutdown", "Destroy"], "passes: {steps:?}");
    assert!(pve.vm.is_none());
}

#[test]
fn drift_is_corrected_once_and_stays_corrected() {
    let mut drifted = our_vm(Power::Running);
    let config = drifted.config.as_mut().unwrap();
    config.current.insert("memory".into(), "512".into());
    config
        .current
        .insert("net0".into(), "e1000=BC:24:11:00:00:07,bridge=vmbr1".into());
    let mut pve = Pve {
        vm: Some(drifted),
        image: true,
        ..Pve::default()
    };
    let steps = drive(World::new().created(), &mut pve, None, ready);
    assert_eq!(pve.sent, ["Configure"], "passes: {steps:?}");
    let net0 = &pve.vm.unwrap().config.unwrap().current["net0"];
    assert_eq!(net0, "virtio=BC:24:11:00:00:07,bridge=vmbr0", "MAC kept");
}
