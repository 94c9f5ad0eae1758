//! Proxmox calls that start a task, from the plan's steps.

use super::super::plan::{ConfigChanges, Param, Params, PveCall};
use pve_client::vm::{
    CloneVm, ConfigUpdate, CreateVm, DeleteOptions, DiskSize, ShutdownOptions, VmParams,
};
use pve_client::{self, Checksum, Client, DownloadContent, DownloadUrl, Secret as PveSecret, Upid};

/// The only secret parameter the plan produces.
const PASSWORD: &str = "cipassword";

/// Starts the task of a Proxmox call and returns its UPID.
pub(super) async fn start(client: &Client, call: &PveCall) -> Result<Upid, pve_client::Error> {
    tracing::info!(step = call.name(), "starting a Proxmox task");
    match call {
        PveCall::DownloadImage {
            node,
            storage,
            url,
            file_name,
            checksum,
            algorithm,
        } => {
            let req = DownloadUrl {
                url: url.clone(),
                content: DownloadContent::Import,
                filename: file_name.clone(),
                checksum: Some(Checksum {
                    value: checksum.clone(),
                    algorithm: algorithm.as_str().to_owned(),
                }),
                verify_certificates: None,
            };
            client.download_url(node, storage, &req).await
        }
        PveCall::CreateVm { node, vmid, params } => {
            let mut params = params.clone();
            let pool = params.remove("pool").map(|p| p.expose().to_owned());
            let create = CreateVm {
                vmid: *vmid,
                params: vm_params(params)?,
                pool,
                start: None,
            };
            client.create_vm(node, &create).await
        }
        PveCall::CloneVm {
            source_node,
            template,
            vmid,
            target_node,
            full,
            storage,
            name,
            description,
            pool,
        } => {
            let clone = CloneVm {
                newid: *vmid,
                name: Some(name.clone()),
                description: Some(description.clone()),
                full: Some(*full),
                storage: storage.clone(),
                target: target_node.clone(),
                pool: pool.clone(),
                ..CloneVm::default()
            };
            client.clone_vm(source_node, *template, &clone).await
        }
        PveCall::Configure {
            node,
            vmid,
            changes,
        } => {
            client
                .update_vm_config(node, *vmid, &config_update(changes)?)
                .await
        }
        PveCall::ResizeDisk {
            node,
            vmid,
            slot,
            bytes,
        } => {
            client
                .resize_disk(node, *vmid, slot, DiskSize::To(*bytes))
                .await
        }
        PveCall::Start { node, vmid } => client.start_vm(node, *vmid).await,
        PveCall::Shutdown {
            node,
            vmid,
            timeout,
        } => {
            let opts = ShutdownOptions {
                timeout: Some(u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX)),
                force_stop: None,
            };
            client.shutdown_vm(node, *vmid, opts).await
        }
        PveCall::Stop { node, vmid } => client.stop_vm(node, *vmid).await,
        PveCall::Destroy { node, vmid } => {
            let opts = DeleteOptions {
                purge: true,
                destroy_unreferenced_disks: true,
            };
            client.delete_vm(node, *vmid, opts).await
        }
    }
}

/// The plan's parameters as the client's: every value already in Proxmox's
/// form goes as is; the password as a secret.
fn vm_params(params: Params) -> Result<VmParams, pve_client::Error> {
    let mut out = VmParams::default();
    for (key, value) in params {
        match value {
            Param::Plain(v) => {
                out.extra.insert(key, v);
            }
            Param::Secret(s) if key == PASSWORD => {
                out.cipassword = Some(PveSecret::new(s.expose()));
            }
            Param::Secret(_) => {
                return Err(pve_client::Error::Config {
                    message: format!("unexpected secret parameter {key}"),
                });
            }
        }
    }
    Ok(out)
}

fn config_update(changes: &ConfigChanges) -> Result<ConfigUpdate, pve_client::Error> {
    Ok(ConfigUpdate {
        set: vm_params(changes.set.clone())?,
        delete: changes.delete.clone(),
        digest: changes.digest.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::plan::Sensitive;
    use super::*;

    #[test]
    fn plan_params_go_out_as_given_and_the_password_as_a_secret() {
        let params: Params = [
            ("memory".to_owned(), Param::Plain("2048".into())),
            (
                "sshkeys".to_owned(),
                Param::Plain("ssh-ed25519%20AAAA".into()),
            ),
            (
                PASSWORD.to_owned(),
                Param::Secret(Sensitive::new("hunter2")),
            ),
        ]
        .into();
        let p = vm_params(params).unwrap();
        assert_eq!(p.extra["memory"], "2048");
        assert_eq!(p.extra["sshkeys"], "ssh-ed25519%20AAAA");
        assert_eq!(p.cipassword.as_ref().map(|s| s.expose()), Some("hunter2"));
        assert!(!format!("{p:?}").contains("hunter2"));
        let odd: Params = [("x".to_owned(), Param::Secret(Sensitive::new("s")))].into();
        assert!(vm_params(odd).is_err());
    }
}
