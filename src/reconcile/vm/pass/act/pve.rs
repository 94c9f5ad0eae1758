//! Proxmox calls that start a task, from the plan's steps.

use super::proxmox_failure;
use crate::reconcile::vm::plan::{ActFailure, Params, PveCall};
use pve_client::vm::{CloneVm, CreateVm, DeleteOptions, DiskSize, ShutdownOptions};
use pve_client::vzdump::Restore;
use pve_client::{self, Checksum, Client, DownloadContent, DownloadUrl, ErrorClass, Upid};

/// Starts the task of a Proxmox call and returns its UPID.
pub(super) async fn start(client: &Client, call: &PveCall) -> Result<Upid, ActFailure> {
    tracing::info!(step = call.name(), "starting a Proxmox task");
    let sent = match call {
        PveCall::UploadSeed {
            node,
            storage,
            filename,
            files,
        } => return super::seed::upload(client, node, storage, filename, files).await,
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
            client.create_vm(node, &create_request(*vmid, params)).await
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
        PveCall::RestoreVm {
            node,
            vmid,
            archive,
            storage,
            pool,
            name,
            description,
        } => {
            let restore = Restore {
                vmid: *vmid,
                archive: archive.clone(),
                storage: storage.clone(),
                pool: pool.clone(),
                // New MAC addresses: the source VM may still run.
                unique: true,
                name: Some(name.clone()),
                description: Some(description.clone()),
                ..Restore::default()
            };
            client.restore_vm(node, &restore).await
        }
        PveCall::Configure {
            node,
            vmid,
            changes,
        } => client.update_vm_config(node, *vmid, changes).await,
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
        PveCall::Migrate {
            node,
            vmid,
            target,
            online,
        } => super::motion::migrate(client, node, *vmid, target, *online).await,
        PveCall::MoveDisk {
            node,
            vmid,
            slot,
            storage,
            digest,
        } => super::motion::move_disk(client, node, *vmid, slot, storage, digest.as_deref()).await,
        PveCall::DeleteVolume {
            node,
            storage,
            volume,
        } => client.delete_volume(node, storage, volume).await,
        PveCall::ConvertToTemplate { node, vmid } => client.convert_to_template(node, *vmid).await,
    };
    sent.map_err(|e| failure(call, e))
}

/// A refused create or clone whose VMID exists is [`ActFailure::Taken`].
fn failure(call: &PveCall, e: pve_client::Error) -> ActFailure {
    let creates = matches!(
        call,
        PveCall::CreateVm { .. } | PveCall::CloneVm { .. } | PveCall::RestoreVm { .. }
    );
    if creates && e.class() == ErrorClass::AlreadyExists {
        ActFailure::Taken(e.to_string())
    } else {
        proxmox_failure(e)
    }
}

/// The create request: the plan's typed settings as they are (disks with
/// `import-from` as `Drive::import`, the password as a secret), and the pool.
fn create_request(vmid: u32, params: &Params) -> CreateVm {
    CreateVm {
        vmid,
        params: params.settings.clone(),
        pool: params.pool.clone(),
        start: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pve_client::Secret;
    use pve_client::vm::{Drive, VmParams};

    #[test]
    fn the_create_goes_out_typed_with_the_password_as_a_secret() {
        let mut settings = VmParams {
            memory: Some(2048),
            cipassword: Some(Secret::new("hunter2")),
            ..VmParams::default()
        };
        let import = Drive::import("local-lvm", "local:import/jammy.qcow2");
        settings
            .disks
            .insert("scsi0".parse().unwrap(), import.clone());
        let params = Params {
            settings,
            pool: Some("web".into()),
        };
        let create = create_request(150, &params);
        assert_eq!((create.vmid, create.pool.as_deref()), (150, Some("web")));
        assert_eq!(create.params.disks.values().next(), Some(&import));
        assert_eq!(
            create.params.cipassword.as_ref().map(Secret::expose),
            Some("hunter2")
        );
        assert!(!format!("{create:?}").contains("hunter2"));
        let sent = create.params.to_params();
        assert_eq!(
            sent.get("scsi0"),
            Some("local-lvm:0,import-from=local:import/jammy.qcow2")
        );
        assert!(!format!("{sent:?}").contains("hunter2"));
    }
}
