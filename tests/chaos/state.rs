//! The simulator's own state, read through the Proxmox API with the
//! checker's token: its VMs (node, lock, owner marker) and its create and
//! clone tasks with their outcomes.

use serde_json::Value;

use super::sim::Sim;

/// What starts the provider's owner marker line in a VM's notes
/// (docs/api.md, "Ownership"); parsed here independently of the provider.
const MARKER: &str = "Managed by crossplane-provider-proxmox:";

/// A VM as Proxmox has it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimVm {
    pub vmid: u32,
    pub node: String,
    pub template: bool,
    pub lock: Option<String>,
    /// From the owner marker: (`namespace/name`, uid).
    pub owner: Option<(String, String)>,
}

impl SimVm {
    pub fn describe(&self) -> String {
        let owner = match &self.owner {
            Some((resource, uid)) => format!("marker of {resource} (uid {uid})"),
            None => "no owner marker".into(),
        };
        let lock = self
            .lock
            .as_ref()
            .map(|l| format!(", lock {l}"))
            .unwrap_or_default();
        format!("VM {} on {} ({owner}{lock})", self.vmid, self.node)
    }
}

/// The owner marker of a description: `ProxmoxVM <ns>/<name> uid=<uid>`.
pub fn marker(description: &str) -> Option<(String, String)> {
    description.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(MARKER)?;
        let mut words = rest.split_whitespace();
        if words.next()? != "ProxmoxVM" {
            return None;
        }
        let resource = words.next()?.to_owned();
        let uid = words.find_map(|w| w.strip_prefix("uid="))?.to_owned();
        Some((resource, uid))
    })
}

/// Every VM of the cluster, with its config's lock and marker.
pub async fn vms(sim: &Sim) -> Vec<SimVm> {
    let listed = sim.api_get_retrying("/cluster/resources?type=vm").await;
    let mut vms = Vec::new();
    for entry in listed.as_array().cloned().unwrap_or_default() {
        let Some(vmid) = entry["vmid"].as_u64().and_then(|v| u32::try_from(v).ok()) else {
            continue;
        };
        // Containers are listed too (`lxc`); they have no qemu config.
        if entry["type"].as_str() == Some("lxc") {
            continue;
        }
        let node = entry["node"].as_str().unwrap_or_default().to_owned();
        let config = sim
            .api_get_retrying(&format!("/nodes/{node}/qemu/{vmid}/config"))
            .await;
        vms.push(SimVm {
            vmid,
            template: entry["template"].as_u64() == Some(1) || config["template"] == 1,
            lock: config["lock"].as_str().map(str::to_owned),
            owner: config["description"].as_str().and_then(marker),
            node,
        });
    }
    vms.sort_by_key(|v| v.vmid);
    vms
}

/// A create (`qmcreate`) or clone (`qmclone`) task.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateTask {
    pub upid: String,
    pub node: String,
    pub kind: String,
    /// The VMID it creates: the task's id for a create; for a clone (whose
    /// id is the template) from its log or its lock error.
    pub vmid: Option<u32>,
    /// The exit status; `None` while it runs.
    pub exit: Option<String>,
    /// When it started and (once archived) ended, in seconds since the epoch.
    pub start: f64,
    pub end: Option<f64>,
}

impl CreateTask {
    /// Whether it failed for a reason other than the VM existing already
    /// (which is what a second dispatch for one VM runs into).
    pub fn failed_on_its_own(&self) -> bool {
        self.exit.as_deref().is_some_and(|e| {
            e != "OK" && !e.starts_with("WARNINGS") && !e.contains("already exists")
        })
    }

    pub fn describe(&self) -> String {
        format!(
            "{} on {}: {}",
            self.upid,
            self.node,
            self.exit.as_deref().unwrap_or("running")
        )
    }
}

/// Every create and clone task of every node.
pub async fn create_tasks(sim: &Sim, nodes: &[&str]) -> Vec<CreateTask> {
    let mut tasks = Vec::new();
    for node in nodes {
        for kind in ["qmcreate", "qmclone"] {
            let listed = sim
                .api_get_retrying(&format!(
                    "/nodes/{node}/tasks?source=all&typefilter={kind}&limit=100000"
                ))
                .await;
            for entry in listed.as_array().cloned().unwrap_or_default() {
                let upid = entry["upid"].as_str().unwrap_or_default().to_owned();
                tasks.push(task(sim, node, kind, &entry, upid).await);
            }
        }
    }
    tasks
}

async fn task(sim: &Sim, node: &str, kind: &str, entry: &Value, upid: String) -> CreateTask {
    // `:`, `!` and `@` may stand in a URL path as they are.
    let escaped = &upid;
    let status = sim
        .api_get_retrying(&format!("/nodes/{node}/tasks/{escaped}/status"))
        .await;
    let exit = status["exitstatus"].as_str().map(str::to_owned);
    let vmid = if kind == "qmcreate" {
        entry["id"].as_str().and_then(|id| id.parse().ok())
    } else {
        let log = sim
            .api_get_retrying(&format!("/nodes/{node}/tasks/{escaped}/log?limit=0"))
            .await;
        let lines: Vec<String> = log
            .as_array()
            .map(|ls| {
                ls.iter()
                    .filter_map(|l| l["t"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        clone_target(&lines, exit.as_deref())
    };
    let start = upid
        .split(':')
        .nth(4)
        .and_then(|t| i64::from_str_radix(t, 16).ok())
        .map_or(0.0, |t| t as f64);
    CreateTask {
        node: node.to_owned(),
        kind: kind.to_owned(),
        vmid,
        exit,
        start,
        end: entry["endtime"].as_f64(),
        upid,
    }
}

/// The VMID a clone task creates: `creating a clone of VM 9000 with ID N`
/// in its log, or `.../lock-N.conf' - got timeout` when it never got the
/// new VM's lock.
pub fn clone_target(log: &[String], exit: Option<&str>) -> Option<u32> {
    let from_log = log.iter().find_map(|line| {
        line.split_once(" with ID ")
            .and_then(|(_, id)| id.trim().parse().ok())
    });
    from_log.or_else(|| {
        let (_, rest) = exit?.split_once("/lock-")?;
        rest.split_once(".conf")?.0.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_owner_marker_among_the_users_notes() {
        let notes = "web server\n\nManaged by crossplane-provider-proxmox: ProxmoxVM ns-1/web uid=1234-abcd\n";
        assert_eq!(
            marker(notes),
            Some(("ns-1/web".to_owned(), "1234-abcd".to_owned()))
        );
        assert_eq!(marker("just notes"), None);
        assert_eq!(
            marker("Managed by crossplane-provider-proxmox: something else"),
            None
        );
    }

    #[test]
    fn a_clone_task_names_its_new_vmid_in_its_log_or_its_lock_error() {
        let log = vec![
            "trying to acquire lock... OK".to_owned(),
            "creating a clone of VM 9000 with ID 104".to_owned(),
        ];
        assert_eq!(clone_target(&log, Some("OK")), Some(104));
        let timeout = "can't lock file '/var/lock/qemu-server/lock-2003.conf' - got timeout";
        assert_eq!(
            clone_target(&["trying to acquire lock...".to_owned()], Some(timeout)),
            Some(2003)
        );
        assert_eq!(clone_target(&[], None), None);
    }

    #[test]
    fn a_failure_because_the_vm_exists_excuses_nothing() {
        let task = |exit: &str| CreateTask {
            upid: "UPID:pve:1:2:3:qmclone:9000:root@pam!chaos:".into(),
            node: "pve".into(),
            kind: "qmclone".into(),
            vmid: Some(100),
            exit: Some(exit.into()),
            start: 0.0,
            end: None,
        };
        assert!(task("pve-sim: injected task failure").failed_on_its_own());
        assert!(!task("OK").failed_on_its_own());
        assert!(!task("WARNINGS: 1").failed_on_its_own());
        assert!(!task("unable to create VM 100: config file already exists").failed_on_its_own());
    }
}
