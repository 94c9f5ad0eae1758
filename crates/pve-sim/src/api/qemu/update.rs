//! Applying a config update under the flock: sets, deletes and reverts,
//! kept pending on a running VM where PVE cannot hot-plug them (see
//! `hotplug`).

use super::config::Update;
use super::disks;
use super::hotplug::applies_now;
use super::{complete_net, task_lock_check, unique_tags};
use crate::schema::{propstr, qemu};
use crate::state::Vm;
use crate::tasks::TaskCtx;

pub(super) async fn run(ctx: &TaskCtx, u: Update, in_task: bool) -> Result<(), String> {
    let vmid = u.vmid;
    let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
    task_lock_check(ctx, vmid, u.skiplock)?;
    ctx.checkpoint()?;
    ctx.log(format!("update VM {vmid}: {}", u.summary));
    if in_task {
        ctx.sleep(ctx.inst.durations.config).await;
    }
    let mut created = Vec::new();
    let mut values = u.set;
    for op in u.disks {
        match disks::execute(ctx, vmid, op, &mut created).await {
            Ok(kv) => values.push(kv),
            Err(e) => {
                let mut cluster = ctx.inst.cluster();
                for volid in created {
                    cluster.free_volume(&ctx.node, &volid);
                }
                return Err(e);
            }
        }
    }
    let mut cluster = ctx.inst.cluster();
    let node = ctx.node.clone();
    let mut freed = Vec::new();
    let vm = cluster.vm_mut(&node, vmid)?;
    for key in u.delete {
        delete_key(ctx, vm, key, &mut freed);
    }
    for (key, value) in values {
        set_key(ctx, vm, key, value, &mut freed);
    }
    for key in u.revert {
        vm.pending.remove(&key);
        vm.pending_delete.remove(&key);
    }
    for volid in freed {
        cluster.free_volume(&node, &volid);
    }
    Ok(())
}

fn set_key(ctx: &TaskCtx, vm: &mut Vm, key: String, value: String, freed: &mut Vec<String>) {
    let value = normalize(ctx, &key, value);
    vm.pending_delete.remove(&key);
    if vm.is_running()
        && !applies_now(&vm.config, &key, Some(&value))
        && !medium_change(vm, &key, &value)
    {
        vm.pending.insert(key, value);
        return;
    }
    if let Some(old) = vm.config.get(&key).cloned()
        && qemu::is_drive(&key)
        && volume_of(&old) != volume_of(&value)
    {
        detach(vm, &key, &old, freed);
    }
    vm.pending.remove(&key);
    vm.config.insert(key, value);
}

/// A CD-ROM given another medium: a running VM swaps it at once
/// (qemu-server's `vmconfig_update_disk` changes the medium); a new drive
/// on an IDE or SATA slot waits for the next start.
fn medium_change(vm: &Vm, key: &str, value: &str) -> bool {
    let cdrom = |v: &str| v.split(',').any(|o| o == "media=cdrom");
    qemu::is_drive(key) && cdrom(value) && vm.config.get(key).is_some_and(|old| cdrom(old))
}

fn delete_key(ctx: &TaskCtx, vm: &mut Vm, key: String, freed: &mut Vec<String>) {
    if !vm.config.contains_key(&key) && !vm.pending.contains_key(&key) {
        ctx.log(format!(
            "cannot delete '{key}' - not set in current configuration!"
        ));
        return;
    }
    remove_from_boot_order(vm, &key);
    vm.pending.remove(&key);
    if vm.is_running() && !applies_now(&vm.config, &key, None) {
        vm.pending_delete.insert(key);
    } else if let Some(old) = vm.config.remove(&key) {
        detach(vm, &key, &old, freed);
    }
}

/// A new value as PVE stores it. A NIC given without `macaddr` gets a new
/// random MAC (PVE's `parse_net` does not keep the old one), tags are
/// de-duplicated and sorted, a plain `cipassword` is hashed.
fn normalize(ctx: &TaskCtx, key: &str, value: String) -> String {
    if key.starts_with("net") {
        return complete_net(&ctx.inst, key, &value);
    }
    if key == "tags" {
        return unique_tags(&value);
    }
    if key == "cipassword"
        && !["$1$", "$5$", "$6$", "$2a$", "$2y$"]
            .iter()
            .any(|p| value.starts_with(p))
    {
        use sha2::{Digest, Sha256};
        let hash: String = Sha256::digest(value.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        return format!("$5$pvesim${hash}");
    }
    value
}

/// Deleting a device also removes it from `boot: order=...`.
fn remove_from_boot_order(vm: &mut Vm, key: &str) {
    let Some(boot) = vm.config.get("boot").cloned() else {
        return;
    };
    let Ok(parsed) = propstr::BOOT.parse("boot", &boot) else {
        return;
    };
    let Some(order) = parsed.get("order") else {
        return;
    };
    let devices: Vec<&str> = order.split(';').collect();
    if devices.contains(&key) {
        let kept: Vec<&str> = devices.into_iter().filter(|d| *d != key).collect();
        vm.config
            .insert("boot".into(), format!("order={}", kept.join(";")));
    }
}

fn volume_of(drive: &str) -> Option<String> {
    drive
        .split(',')
        .next()
        .filter(|f| f.contains(':'))
        .map(str::to_owned)
}

/// Removing a drive: disks become `unusedN`, the cloud-init volume and
/// `unusedN` volumes are destroyed, CD-ROMs just go away.
fn detach(vm: &mut Vm, key: &str, old: &str, freed: &mut Vec<String>) {
    let Some(volid) = volume_of(old) else { return };
    if key.starts_with("unused") || volid.contains("-cloudinit") {
        freed.push(volid);
    } else if qemu::is_drive(key) && !old.contains("media=cdrom") {
        let slot = (0..256)
            .map(|i| format!("unused{i}"))
            .find(|k| !vm.config.contains_key(k))
            .unwrap_or_default();
        vm.config.insert(slot, volid);
    }
}
