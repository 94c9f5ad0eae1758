//! A guest's resource pool, for kinds that keep `pool` in place (VMs,
//! containers): read from the shared cluster view (no request), checked
//! against the wanted pool's member list when the view disagrees (the view
//! lags a move by up to the poll interval), so a move is sent once.

/// The pool guest `vmid` (of member type `kind`: `qemu`, `lxc`) is in, given
/// the pool the cluster view `listed` for it and the pool the spec
/// `wanted`.
pub async fn member_of(
    client: &pve_client::Client,
    (kind, vmid): (&str, u32),
    listed: Option<String>,
    wanted: &str,
) -> Result<Option<String>, pve_client::Error> {
    if listed.as_deref() == Some(wanted) {
        return Ok(listed);
    }
    let member = client.pool(wanted).await?.is_some_and(|pool| {
        pool.members
            .iter()
            .any(|m| m.kind == kind && m.vmid == Some(u64::from(vmid)))
    });
    Ok(if member {
        Some(wanted.to_owned())
    } else {
        listed
    })
}
