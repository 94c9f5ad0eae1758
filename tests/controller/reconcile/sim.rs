//! The in-process pve-sim, its control API (`/_sim/`) and a Proxmox client
//! for changing things "behind the provider's back".

use std::time::Duration;

use pve_client::{
    Client, ClientConfig, Credentials, ResourceType, RetryPolicy,
    vm::{ConfigUpdate, VmConfig, VmParams},
};
use pve_sim::{SimConfig, SimHandle, Simulator};
use serde_json::Value;

/// A running simulator.
pub struct Sim {
    pub handle: SimHandle,
    control: reqwest::Client,
}

impl Sim {
    pub async fn start(time_scale: f64) -> Self {
        Self::start_on(time_scale, vec!["pve".into()]).await
    }

    /// A simulator with these nodes.
    pub async fn start_on(time_scale: f64, nodes: Vec<String>) -> Self {
        Self::start_with(SimConfig {
            time_scale,
            nodes,
            ..SimConfig::default()
        })
        .await
    }

    /// A simulator as `config` says (a state file, a PVE version, ...).
    pub async fn start_with(config: SimConfig) -> Self {
        let handle = Simulator::start(config)
            .await
            .expect("pve-sim starts on a loopback port");
        let ca = reqwest::Certificate::from_pem(handle.ca_pem().as_bytes()).expect("CA PEM");
        let control = reqwest::Client::builder()
            .tls_certs_only([ca])
            .timeout(Duration::from_secs(30))
            .build()
            .expect("control client");
        Self { handle, control }
    }

    /// A Proxmox client of our own (the default token, pinned).
    pub fn client(&self) -> Client {
        let mut c = ClientConfig::new(
            &self.handle.base_url(),
            Credentials::token_from_str(pve_sim::DEFAULT_API_TOKEN).unwrap(),
        )
        .unwrap();
        c.tls.pinned_fingerprints = vec![self.handle.fingerprint().parse().unwrap()];
        c.retry = RetryPolicy::none();
        c.tasks.poll_interval = Duration::from_millis(50);
        Client::new(c).unwrap()
    }

    fn url(&self, path: &str) -> String {
        format!("{}/_sim/{path}", self.handle.base_url())
    }

    /// `GET /_sim/requests`: every API request so far.
    pub async fn requests(&self) -> Vec<Value> {
        let v = self.control_get("requests").await;
        v["requests"].as_array().cloned().unwrap_or_default()
    }

    /// `GET /_sim/state`: the simulator's state (nodes, storages, volumes
    /// with the base of each linked clone, guests).
    pub async fn state(&self) -> Value {
        self.control_get("state").await
    }

    /// `GET /_sim/<path>`, as JSON.
    async fn control_get(&self, path: &str) -> Value {
        self.control
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Requests matching a method and route template (any status).
    pub async fn requests_to(&self, method: &str, route: &str) -> Vec<Value> {
        self.requests()
            .await
            .into_iter()
            .filter(|r| r["method"] == method && r["route"] == route)
            .collect()
    }

    /// How many requests matched a method and route template.
    pub async fn count(&self, method: &str, route: &str) -> usize {
        self.requests_to(method, route).await.len()
    }

    /// Changes a VM's config directly on Proxmox (behind the provider's back).
    pub async fn edit(&self, vmid: u32, set: VmParams) {
        let update = ConfigUpdate {
            set,
            ..ConfigUpdate::default()
        };
        self.client()
            .update_vm_config_sync("pve", vmid, &update)
            .await
            .unwrap();
    }

    /// Requests to one VM's paths other than reads.
    pub async fn writes_to_vm(&self, vmid: u32) -> Vec<Value> {
        let prefix = format!("/nodes/pve/qemu/{vmid}");
        self.requests()
            .await
            .into_iter()
            .filter(|r| r["method"] != "GET")
            .filter(|r| r["path"].as_str().is_some_and(|p| p.starts_with(&prefix)))
            .collect()
    }

    /// `POST /_sim/faults`.
    pub async fn fault(&self, rule: Value) -> u64 {
        let r = self
            .control
            .post(self.url("faults"))
            .json(&rule)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "fault {rule} refused");
        r.json::<Value>().await.unwrap()["id"].as_u64().unwrap()
    }

    /// `DELETE /_sim/faults/<id>`: ends a rule without a count, which holds
    /// the world in a state (a refusal, an error) until the test has seen
    /// it; panics unless the rule was there.
    pub async fn remove_fault(&self, id: u64) {
        let r = self
            .control
            .delete(self.url(&format!("faults/{id}")))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "fault {id} was not there");
    }

    /// `GET /_sim/tasks`: every task with its exact start and end (seconds
    /// since the epoch, the request log's clock), finished ones included.
    pub async fn tasks(&self) -> Vec<Value> {
        let v = self.control_get("tasks").await;
        v["tasks"].as_array().cloned().unwrap_or_default()
    }

    /// Releases the tasks a `task-held` fault holds under `hold`.
    pub async fn release(&self, hold: &str) {
        let r = self
            .control
            .post(self.url("release"))
            .json(&serde_json::json!({"hold": hold}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "release {hold} refused");
    }

    /// VMIDs of the VMs on the sim (the seeded template 9000 included).
    pub async fn vmids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .client()
            .cluster_resources(Some(ResourceType::Vm))
            .await
            .unwrap()
            .into_iter()
            .filter_map(|r| r.vmid.map(|v| v as u32))
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The VM's config with pending changes merged (what it will run with),
    /// wherever the VM is.
    pub async fn config(&self, vmid: u32) -> VmConfig {
        let node = self
            .placement()
            .await
            .remove(&vmid)
            .unwrap_or_else(|| panic!("VM {vmid} exists"));
        self.client().vm_config(&node, vmid).await.unwrap()
    }

    /// Creates an empty VM by hand (no owner marker), as a person would with
    /// the web UI, and returns once Proxmox accepted it.
    pub async fn create_by_hand(&self, node: &str, vmid: u32) {
        self.post_by_hand(
            &format!("/nodes/{node}/qemu"),
            &[("vmid", &vmid.to_string()), ("name", "hand-made")],
        )
        .await;
    }

    /// Creates a cluster resource mapping (`kind` `pci` or `usb`), as an
    /// administrator does under Datacenter -> Resource Mappings.
    pub async fn create_mapping(&self, kind: &str, id: &str, map: &[&str]) {
        let mut form = vec![("id", id)];
        form.extend(map.iter().map(|m| ("map", *m)));
        self.post_by_hand(&format!("/cluster/mapping/{kind}"), &form)
            .await;
    }

    /// A POST with the default token, outside the provider's client;
    /// panics unless Proxmox accepts it.
    async fn post_by_hand(&self, path: &str, form: &[(&str, &str)]) {
        let url = format!("{}/api2/json{path}", self.handle.base_url());
        let answer = self
            .control
            .post(url)
            .header(
                "Authorization",
                format!("PVEAPIToken={}", pve_sim::DEFAULT_API_TOKEN),
            )
            .form(form)
            .send()
            .await
            .unwrap();
        assert!(
            answer.status().is_success(),
            "POST {path} by hand: {}",
            answer.text().await.unwrap_or_default()
        );
    }

    /// `POST /_sim/migrate`: the VM moves as HA's load balancer moves it,
    /// and this returns once it is there.
    pub async fn balance(&self, vmid: u32, node: &str) {
        let answer = self
            .control
            .post(format!("{}/_sim/migrate", self.handle.base_url()))
            .json(&serde_json::json!({"vmid": vmid, "node": node}))
            .send()
            .await
            .unwrap();
        assert!(
            answer.status().is_success(),
            "{}",
            answer.text().await.unwrap_or_default()
        );
        crate::support::poll("the balancer's migration", super::DEADLINE, || async {
            let at = self.placement().await.remove(&vmid);
            (at.as_deref() == Some(node))
                .then_some(())
                .ok_or(format!("{at:?}"))
        })
        .await;
    }

    /// `POST /_sim/backup-jobs/{id}/run`: the job runs now, as the
    /// scheduler runs it; the UPIDs of its `vzdump` tasks.
    pub async fn run_backup_job(&self, id: &str) -> Vec<String> {
        let answer = self
            .control
            .post(format!(
                "{}/_sim/backup-jobs/{id}/run",
                self.handle.base_url()
            ))
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "running job {id} refused");
        let v: Value = answer.json().await.unwrap();
        v["upids"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|u| u.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Where each VM is: VMID → node (the seeded template included).
    pub async fn placement(&self) -> std::collections::BTreeMap<u32, String> {
        self.client()
            .cluster_resources(Some(ResourceType::Vm))
            .await
            .unwrap()
            .into_iter()
            .filter_map(|r| Some((r.vmid? as u32, r.node?)))
            .collect()
    }

    /// `running` or `stopped`.
    pub async fn power(&self, vmid: u32) -> String {
        self.client().vm_status("pve", vmid).await.unwrap().status
    }

    /// Waits until [`Sim::power`] says `want`.
    pub async fn wait_power(&self, vmid: u32, want: &str) {
        crate::support::poll(
            &format!("VM {vmid} to be {want}"),
            super::DEADLINE,
            || async {
                match self.power(vmid).await {
                    now if now == want => Ok(()),
                    other => Err(other),
                }
            },
        )
        .await;
    }
}
