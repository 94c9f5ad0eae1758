//! The end state, judged from the simulator's VMs, tasks and request log
//! (the provider's status is only compared against them, never trusted).

use std::collections::BTreeSet;

use serde_json::Value;

use super::fleet::{Placement, TEMPLATE_VMID};
use super::k8s;
use super::state::{CreateTask, SimVm};
use super::traffic;
use super::verdict::{Kind, Violation};

/// A ProxmoxVM as the check needs it.
#[derive(Clone, Debug)]
pub struct Resource {
    /// `namespace/name`, as the owner marker names it.
    pub key: String,
    pub uid: String,
    pub placement: Placement,
    pub ready: bool,
    /// Its status in one line.
    pub brief: String,
    pub status_vmid: Option<u32>,
    pub status_node: Option<String>,
}

impl Resource {
    /// From the ProxmoxVM's JSON and the placement its spec asked for.
    pub fn new(object: &Value, placement: Placement) -> Self {
        let at = &object["status"]["atProvider"];
        Self {
            key: format!(
                "{}/{}",
                object["metadata"]["namespace"].as_str().unwrap_or_default(),
                k8s::name(object)
            ),
            uid: object["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            placement,
            ready: k8s::is_ready(object),
            brief: k8s::brief(object),
            status_vmid: at["vmid"].as_u64().and_then(|v| u32::try_from(v).ok()),
            status_node: at["node"].as_str().map(str::to_owned),
        }
    }
}

/// The create and clone requests for `vmid` that started a task.
fn dispatches(log: &[Value], vmid: u32) -> Vec<&Value> {
    log.iter()
        .filter(|e| traffic::create_dispatch(e) == Some(vmid))
        .collect()
}

fn evidence(log: &[Value], vmid: u32) -> String {
    let lines: Vec<String> = dispatches(log, vmid)
        .into_iter()
        .map(|e| format!("\n      sim log {}", traffic::describe(e)))
        .collect();
    if lines.is_empty() {
        format!("\n      sim log: no create or clone of VM {vmid} started a task")
    } else {
        lines.concat()
    }
}

/// After every ProxmoxVM should be Ready.
pub fn created(
    resources: &[Resource],
    vms: &[SimVm],
    log: &[Value],
    tasks: &[CreateTask],
) -> Vec<Violation> {
    let mut found = Vec::new();
    let uids: BTreeSet<&str> = resources.iter().map(|r| r.uid.as_str()).collect();
    for resource in resources {
        if !resource.ready {
            found.push(Violation::new(
                Kind::NotReady,
                format!("{}: {}", resource.key, resource.brief),
            ));
        }
        let own: Vec<&SimVm> = vms
            .iter()
            .filter(|vm| {
                vm.owner
                    .as_ref()
                    .is_some_and(|(_, uid)| *uid == resource.uid)
            })
            .collect();
        match own.as_slice() {
            [] => {
                let recorded = resource
                    .status_vmid
                    .map(|vmid| evidence(log, vmid))
                    .unwrap_or_default();
                found.push(Violation::new(
                    Kind::Lost,
                    format!(
                        "{}: no VM on Proxmox carries its marker (uid {}); status: {}{recorded}",
                        resource.key, resource.uid, resource.brief
                    ),
                ));
            }
            [vm] => {
                if resource.status_vmid != Some(vm.vmid)
                    || resource.status_node.as_deref() != Some(vm.node.as_str())
                {
                    found.push(Violation::new(
                        Kind::StatusDisagrees,
                        format!(
                            "{}: status says VM {:?} on {:?}, Proxmox has its VM {} on {}",
                            resource.key,
                            resource.status_vmid,
                            resource.status_node,
                            vm.vmid,
                            vm.node
                        ),
                    ));
                }
            }
            several => {
                let listed: Vec<String> = several
                    .iter()
                    .map(|vm| format!("{}{}", vm.describe(), evidence(log, vm.vmid)))
                    .collect();
                found.push(Violation::new(
                    Kind::Duplicated,
                    format!(
                        "{}: {} VMs carry its marker:\n    {}",
                        resource.key,
                        several.len(),
                        listed.join("\n    ")
                    ),
                ));
            }
        }
        for vm in own.iter().filter(|vm| !resource.placement.allows(&vm.node)) {
            found.push(Violation::new(
                Kind::Misplaced,
                format!(
                    "{}: {} but the spec says {}; status: {}{}",
                    resource.key,
                    vm.describe(),
                    resource.placement.label(),
                    resource.brief,
                    evidence(log, vm.vmid)
                ),
            ));
        }
    }
    for vm in vms {
        if let Some(lock) = &vm.lock {
            found.push(Violation::new(
                Kind::LockLeft,
                format!("{} still has lock `{lock}`", vm.describe()),
            ));
        }
        let owned = vm
            .owner
            .as_ref()
            .is_some_and(|(_, uid)| uids.contains(uid.as_str()));
        if !owned && vm.vmid != TEMPLATE_VMID {
            found.push(Violation::new(
                Kind::Stray,
                format!("{}{}", vm.describe(), evidence(log, vm.vmid)),
            ));
        }
    }
    found.extend(template(vms));
    found.extend(dispatch_counts(vms, &uids, log, tasks));
    found
}

/// Each VM that exists was created by one dispatch, plus one for every
/// earlier create of that VMID whose task failed on its own (a failed
/// create removes its VM, so trying again is right).
fn dispatch_counts(
    vms: &[SimVm],
    uids: &BTreeSet<&str>,
    log: &[Value],
    tasks: &[CreateTask],
) -> Vec<Violation> {
    let mut found = Vec::new();
    for vm in vms {
        let owned = vm
            .owner
            .as_ref()
            .is_some_and(|(_, uid)| uids.contains(uid.as_str()));
        if !owned {
            continue;
        }
        let sent = dispatches(log, vm.vmid).len();
        let its_tasks: Vec<&CreateTask> =
            tasks.iter().filter(|t| t.vmid == Some(vm.vmid)).collect();
        let excused = its_tasks.iter().filter(|t| t.failed_on_its_own()).count();
        if sent != 1 + excused {
            let task_lines: Vec<String> = its_tasks
                .iter()
                .map(|t| format!("\n      task {}", t.describe()))
                .collect();
            found.push(Violation::new(
                Kind::DispatchCount,
                format!(
                    "{}: {sent} creates/clones started a task, expected {} (1 + {excused} that failed on their own){}{}",
                    vm.describe(),
                    1 + excused,
                    evidence(log, vm.vmid),
                    task_lines.concat()
                ),
            ));
        }
    }
    found
}

/// The template must still be there, a template, and unlocked.
fn template(vms: &[SimVm]) -> Option<Violation> {
    match vms.iter().find(|vm| vm.vmid == TEMPLATE_VMID) {
        None => Some(Violation::new(
            Kind::TemplateBroken,
            format!("template {TEMPLATE_VMID} is gone"),
        )),
        Some(vm) if !vm.template => Some(Violation::new(
            Kind::TemplateBroken,
            format!("{} is no longer a template", vm.describe()),
        )),
        Some(_) => None,
    }
}

/// After every ProxmoxVM and then every ProviderConfig was deleted.
pub fn deleted(vms: &[SimVm], vms_left: &[Value], configs_left: &[Value]) -> Vec<Violation> {
    let mut found: Vec<Violation> = vms
        .iter()
        .filter(|vm| vm.vmid != TEMPLATE_VMID)
        .map(|vm| Violation::new(Kind::Orphaned, vm.describe()))
        .collect();
    found.extend(template(vms));
    for vm in vms_left {
        found.push(Violation::new(
            Kind::FinalizerLeft,
            format!(
                "{}: finalizers {}; status: {}",
                k8s::name(vm),
                vm["metadata"]["finalizers"],
                k8s::brief(vm)
            ),
        ));
    }
    for config in configs_left {
        found.push(Violation::new(
            Kind::ConfigNotDeletable,
            format!(
                "{}: finalizers {}; status {}",
                k8s::name(config),
                config["metadata"]["finalizers"],
                config["status"]
            ),
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(name: &str, placement: Placement, vmid: u32, node: &str) -> Resource {
        Resource {
            key: format!("ns/{name}"),
            uid: format!("uid-{name}"),
            placement,
            ready: true,
            brief: "Ready".into(),
            status_vmid: Some(vmid),
            status_node: Some(node.into()),
        }
    }

    fn vm(vmid: u32, node: &str, owner: Option<&str>) -> SimVm {
        SimVm {
            vmid,
            node: node.into(),
            template: false,
            lock: None,
            owner: owner.map(|o| (format!("ns/{o}"), format!("uid-{o}"))),
        }
    }

    fn template_vm() -> SimVm {
        SimVm {
            template: true,
            ..vm(TEMPLATE_VMID, "pve", None)
        }
    }

    fn create(vmid: u32, node: &str, status: u16, seq: u64) -> Value {
        json!({"seq": seq, "time": 1.0, "method": "POST", "path": format!("/nodes/{node}/qemu"),
               "route": "/nodes/{node}/qemu", "params": {"vmid": vmid.to_string(), "node": node},
               "status": status})
    }

    fn task(vmid: u32, exit: &str) -> CreateTask {
        CreateTask {
            upid: format!("UPID:pve:1:2:3:qmcreate:{vmid}:root@pam!chaos:"),
            node: "pve".into(),
            kind: "qmcreate".into(),
            vmid: Some(vmid),
            exit: Some(exit.into()),
            start: 0.0,
            end: None,
        }
    }

    fn kinds(violations: &[Violation]) -> Vec<Kind> {
        violations.iter().map(|v| v.kind).collect()
    }

    #[test]
    fn a_clean_run_has_no_violation() {
        let resources = [resource("a", Placement::Node("pve2".into()), 100, "pve2")];
        let vms = [template_vm(), vm(100, "pve2", Some("a"))];
        let log = [create(100, "pve2", 200, 1)];
        let tasks = [task(100, "OK")];
        assert!(created(&resources, &vms, &log, &tasks).is_empty());
    }

    #[test]
    fn a_vm_outside_the_allowed_nodes_is_misplaced_with_the_create_as_evidence() {
        let allowed = Placement::Allowed(vec!["pve2".into(), "pve3".into()]);
        let resources = [resource("a", allowed, 100, "pve")];
        let vms = [template_vm(), vm(100, "pve", Some("a"))];
        let log = [create(100, "pve", 200, 7)];
        let found = created(&resources, &vms, &log, &[task(100, "OK")]);
        assert_eq!(kinds(&found), [Kind::Misplaced]);
        assert!(
            found[0].account.contains("POST /nodes/pve/qemu"),
            "{}",
            found[0]
        );
        assert!(
            found[0].account.contains("allowedNodes pve2,pve3"),
            "{}",
            found[0]
        );
    }

    #[test]
    fn two_vms_with_one_marker_are_a_duplicate_and_none_is_lost() {
        let resources = [
            resource("a", Placement::Anywhere, 100, "pve"),
            resource("b", Placement::Anywhere, 101, "pve"),
        ];
        let vms = [
            template_vm(),
            vm(100, "pve", Some("a")),
            vm(101, "pve", Some("a")),
        ];
        let log = [create(100, "pve", 200, 1), create(101, "pve", 200, 2)];
        let tasks = [task(100, "OK"), task(101, "OK")];
        let found = kinds(&created(&resources, &vms, &log, &tasks));
        assert_eq!(found, [Kind::Duplicated, Kind::Lost]);
    }

    #[test]
    fn a_second_create_is_excused_only_by_a_failed_first_task() {
        let resources = [resource("a", Placement::Anywhere, 100, "pve")];
        let vms = [template_vm(), vm(100, "pve", Some("a"))];
        let log = [create(100, "pve", 200, 1), create(100, "pve", 200, 2)];
        let retried = [task(100, "pve-sim: injected task failure"), task(100, "OK")];
        assert!(created(&resources, &vms, &log, &retried).is_empty());
        let doubled = [
            task(100, "OK"),
            task(
                100,
                "unable to create VM 100 - VM 100 already exists on node 'pve'",
            ),
        ];
        assert_eq!(
            kinds(&created(&resources, &vms, &log, &doubled)),
            [Kind::DispatchCount]
        );
    }

    #[test]
    fn refused_creates_do_not_count_as_dispatches() {
        let resources = [resource("a", Placement::Anywhere, 100, "pve")];
        let vms = [template_vm(), vm(100, "pve", Some("a"))];
        let log = [
            create(100, "pve", 500, 1),
            create(100, "pve", 0, 2),
            create(100, "pve", 200, 3),
        ];
        assert!(created(&resources, &vms, &log, &[task(100, "OK")]).is_empty());
    }

    #[test]
    fn locks_strays_wrong_status_and_a_missing_template_are_reported() {
        let resources = [resource("a", Placement::Anywhere, 100, "pve2")];
        let mut locked = vm(100, "pve", Some("a"));
        locked.lock = Some("create".into());
        let vms = [locked, vm(105, "pve3", None)];
        let log = [create(100, "pve", 200, 1)];
        let found = kinds(&created(&resources, &vms, &log, &[task(100, "OK")]));
        assert_eq!(
            found,
            [
                Kind::StatusDisagrees,
                Kind::LockLeft,
                Kind::Stray,
                Kind::TemplateBroken
            ]
        );
    }

    #[test]
    fn after_deletion_every_vm_but_the_template_is_an_orphan() {
        let left = [json!({"metadata": {"name": "a", "finalizers": ["x"]}})];
        let found = kinds(&deleted(
            &[template_vm(), vm(100, "pve", Some("a"))],
            &left,
            &[],
        ));
        assert_eq!(found, [Kind::Orphaned, Kind::FinalizerLeft]);
    }
}
