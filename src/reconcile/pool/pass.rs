//! The pool as a CRUD kind for [`managed::crud::pass`]: what it wants
//! (its comment with the owner marker, its access entries), its calls,
//! the refusal that names an access entry, and its status (the members
//! Proxmox lists, the entries it manages). The shared pass does the
//! envelope, the gate, the finalizer, the policies and the requeue.
//!
//! What it asks Proxmox, per pass: `GET /pools/{poolid}` (comment and
//! members; "does not exist" is `NotFound`), and only for a pool carrying
//! this resource's marker `GET /access/acl` (the entries on
//! `/pool/<poolId>`): a pool that is not ours is not looked at further.
//! Then at most one call: the create (`POST /pools`, then one
//! `PUT /access/acl` per entry: each refusal names its entry), the
//! correction (`PUT /pools/{poolid}` for the comment, one
//! `PUT /access/acl` per entry added or revoked) or the delete
//! (`DELETE /pools/{poolid}`, never while Proxmox lists members; it takes
//! the pool's ACL entries with it).
//!
//! [`managed::crud::pass`]: crate::reconcile::managed::crud::pass

use kube::ResourceExt;
use pve_client::{AclEntry, Client};

use super::plan::{self, Grant, Owner, PoolObject};
use crate::api::condition::{Condition, Reason};
use crate::api::pool::PoolAccess;
use crate::api::{ProxmoxPool, ProxmoxPoolStatus};
use crate::reconcile::managed::crud::pass::{Kind, Wanted};
use crate::reconcile::managed::crud::{Call, External, Observed};

impl Kind for ProxmoxPool {
    type External = Proxmox;
    type Status = ProxmoxPoolStatus;
    type Extra = ();

    fn managed(&self) -> &crate::api::managed::ManagedSpec {
        &self.spec.managed
    }

    fn want(&self, (): &()) -> Wanted<Self> {
        let (namespace, name, uid) = (
            self.namespace().unwrap_or_default(),
            self.name_any(),
            self.uid().unwrap_or_default(),
        );
        let owner = Owner {
            namespace: &namespace,
            name: &name,
            uid: &uid,
        };
        let spec = &self.spec.for_provider;
        let applied = self
            .status
            .as_ref()
            .map(|s| s.at_provider.access.as_slice());
        Ok(plan::want(
            owner,
            spec.comment.as_deref(),
            &spec.access,
            applied.unwrap_or_default(),
        ))
    }

    fn external(&self, client: Client, (): &()) -> Proxmox {
        Proxmox {
            client,
            poolid: self.spec.for_provider.pool_id.clone(),
            uid: self.uid().unwrap_or_default(),
            access: self.spec.for_provider.access.clone(),
        }
    }

    fn users(&self, (): &()) -> Vec<String> {
        // What holds a pool is on Proxmox (its members: `Diff::in_use`).
        vec![]
    }

    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }

    fn status(
        &self,
        (): &(),
        conditions: Vec<Condition>,
        observed: Option<&Observed<PoolObject>>,
    ) -> ProxmoxPoolStatus {
        let previous = self.status.clone().unwrap_or_default();
        // What could not be read (or was not asked) keeps what was seen last.
        let at_provider = match observed {
            None | Some(Observed::Unknown(_)) => previous.at_provider,
            Some(observed) => {
                let want = match self.want(&()) {
                    Ok(want) | Err((_, want)) => want,
                };
                plan::at_provider(&self.spec.for_provider.pool_id, &want, observed)
            }
        };
        ProxmoxPoolStatus {
            at_provider,
            conditions,
            observed_generation: self.metadata.generation,
            ..Default::default()
        }
    }

    fn refusal(&self, why: &str) -> Option<Reason> {
        plan::refusal(why)
    }

    fn object_name(&self) -> String {
        format!("pool {}", self.spec.for_provider.pool_id)
    }
}

/// The pool's calls on Proxmox.
pub struct Proxmox {
    client: Client,
    poolid: String,
    uid: String,
    /// The spec's entries, to name the one Proxmox refuses.
    access: Vec<PoolAccess>,
}

impl Proxmox {
    fn entry(&self, grant: &Grant) -> AclEntry {
        AclEntry {
            path: plan::acl_path(&self.poolid),
            subject: grant.subject.clone(),
            role: grant.role.clone(),
            propagate: grant.propagate,
        }
    }

    /// Adds `grant`; a refusal names the spec's entry.
    async fn grant(&self, grant: &Grant) -> Result<(), String> {
        self.client.grant(&self.entry(grant)).await.map_err(|e| {
            let index = self
                .access
                .iter()
                .position(|a| Grant::of(a).as_ref() == Some(grant))
                .unwrap_or_default();
            format!("{}{index}] ({}): {e}", plan::ACCESS_FIELD, grant.describe())
        })
    }
}

impl External for Proxmox {
    type Object = PoolObject;

    async fn observe(&self) -> Observed<PoolObject> {
        let pool = match self.client.pool(&self.poolid).await {
            Ok(Some(pool)) => pool,
            Ok(None) => return Observed::NotFound,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        let comment = pool.comment.clone().unwrap_or_default();
        let members = plan::guests(&pool.members);
        if !plan::ours(&comment, &self.uid) {
            // Never touched: its ACL is not this resource's to read.
            let object = PoolObject {
                comment,
                members,
                ..PoolObject::default()
            };
            return Observed::Found {
                object,
                ours: false,
            };
        }
        let acl = match self.client.acl().await {
            Ok(acl) => acl,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        Observed::Found {
            object: PoolObject {
                comment,
                access: plan::on_path(&acl, &plan::acl_path(&self.poolid)),
                members,
                applied: Default::default(),
            },
            ours: true,
        }
    }

    async fn call(&self, call: &Call<PoolObject>) -> Result<(), String> {
        match call {
            Call::Create(pool) => {
                self.client
                    .create_pool(&self.poolid, &pool.comment)
                    .await
                    .map_err(|e| e.to_string())?;
                for grant in &pool.access {
                    self.grant(grant).await?;
                }
                Ok(())
            }
            Call::Update(patch) => {
                if let Some(comment) = &patch.comment {
                    self.client
                        .set_pool_comment(&self.poolid, comment)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                for grant in &patch.grant {
                    self.grant(grant).await?;
                }
                for gone in &patch.revoke {
                    self.client
                        .revoke(&self.entry(gone))
                        .await
                        .map_err(|e| format!("revoking {}: {e}", gone.describe()))?;
                }
                Ok(())
            }
            Call::Delete => self
                .client
                .delete_pool(&self.poolid)
                .await
                .map_err(|e| e.to_string()),
        }
    }
}
