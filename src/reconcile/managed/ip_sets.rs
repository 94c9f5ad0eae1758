//! One correction of an IP set sent to Proxmox, the cluster's
//! (ProxmoxIPSet) and a guest's own alike
//! ([`crate::reconcile::common::ip_set`] decides it).

use pve_client::Client;
use pve_client::ipset::Scope;

use crate::reconcile::common::ip_set::SetPatch;

/// Sends `patch` to the set `name` of `scope`.
pub async fn send(
    client: &Client,
    scope: Scope<'_>,
    name: &str,
    patch: &SetPatch,
) -> Result<(), pve_client::Error> {
    match patch {
        SetPatch::Comment(comment) => client.set_ip_set_comment(scope, name, comment).await,
        SetPatch::Add(entries) => {
            for e in entries {
                let comment = e.comment.as_deref();
                client
                    .add_ip_set_entry(scope, name, &e.cidr, e.nomatch, comment)
                    .await?;
            }
            Ok(())
        }
        SetPatch::Change { entry, digest } => {
            let digest = digest.as_deref().unwrap_or_default();
            let comment = entry.comment.as_deref();
            client
                .set_ip_set_entry(scope, name, &entry.cidr, entry.nomatch, comment, digest)
                .await
        }
        SetPatch::Remove { cidr, digest } => {
            let digest = digest.as_deref().unwrap_or_default();
            client.delete_ip_set_entry(scope, name, cidr, digest).await
        }
    }
}
