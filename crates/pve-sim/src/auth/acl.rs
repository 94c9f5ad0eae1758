//! Roles, privileges and ACL resolution, simplified from pve-access-control:
//! the most specific path with an entry for a subject decides its roles
//! (entries propagate to sub-paths); API tokens with their own entries are
//! privilege-separated (user ∩ token), others act with the user's rights.

use std::collections::BTreeSet;

use crate::config::Grant;

pub const ALL_PRIVILEGES: &[&str] = &[
    "Datastore.Allocate",
    "Datastore.AllocateSpace",
    "Datastore.AllocateTemplate",
    "Datastore.Audit",
    "Group.Allocate",
    "Mapping.Audit",
    "Mapping.Modify",
    "Mapping.Use",
    "Permissions.Modify",
    "Pool.Allocate",
    "Pool.Audit",
    "Realm.Allocate",
    "Realm.AllocateUser",
    "SDN.Allocate",
    "SDN.Audit",
    "SDN.Use",
    "Sys.AccessNetwork",
    "Sys.Audit",
    "Sys.Console",
    "Sys.Incoming",
    "Sys.Modify",
    "Sys.PowerMgmt",
    "Sys.Syslog",
    "User.Modify",
    "VM.Allocate",
    "VM.Audit",
    "VM.Backup",
    "VM.Clone",
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Cloudinit",
    "VM.Config.Disk",
    "VM.Config.HWType",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.Options",
    "VM.Console",
    "VM.GuestAgent.Audit",
    "VM.GuestAgent.FileRead",
    "VM.GuestAgent.FileSystemMgmt",
    "VM.GuestAgent.FileWrite",
    "VM.GuestAgent.Unrestricted",
    "VM.Migrate",
    "VM.PowerMgmt",
    "VM.Replicate",
    "VM.Snapshot",
    "VM.Snapshot.Rollback",
];

/// The privileges of a built-in role, or of a single privilege name.
pub fn role_privileges(role: &str) -> Option<Vec<&'static str>> {
    let pick = |pred: &dyn Fn(&str) -> bool| {
        ALL_PRIVILEGES
            .iter()
            .copied()
            .filter(|p| pred(p))
            .collect::<Vec<_>>()
    };
    Some(match role {
        "Administrator" => ALL_PRIVILEGES.to_vec(),
        "PVEAdmin" => pick(&|p| {
            !matches!(
                p,
                "Permissions.Modify" | "Realm.Allocate" | "Sys.PowerMgmt" | "Sys.Modify"
            )
        }),
        "PVEVMAdmin" => pick(&|p| p.starts_with("VM.")),
        "PVEVMUser" => vec![
            "VM.Audit",
            "VM.Backup",
            "VM.Config.CDROM",
            "VM.Config.Cloudinit",
            "VM.Console",
            "VM.PowerMgmt",
            "VM.GuestAgent.Audit",
        ],
        "PVETemplateUser" => vec!["VM.Audit", "VM.Clone"],
        "PVEDatastoreAdmin" => pick(&|p| p.starts_with("Datastore.")),
        "PVEDatastoreUser" => vec!["Datastore.AllocateSpace", "Datastore.Audit"],
        "PVESDNUser" => vec!["SDN.Audit", "SDN.Use"],
        "PVEMappingAdmin" => pick(&|p| p.starts_with("Mapping.")),
        "PVEMappingUser" => vec!["Mapping.Audit", "Mapping.Use"],
        "PVEAuditor" => pick(&|p| p.ends_with(".Audit")),
        "NoAccess" => Vec::new(),
        privilege => vec![*ALL_PRIVILEGES.iter().find(|p| **p == privilege)?],
    })
}

pub struct Acl {
    grants: Vec<Grant>,
}

impl Acl {
    pub fn new(grants: Vec<Grant>) -> Result<Self, String> {
        for g in &grants {
            for r in &g.roles {
                if role_privileges(r).is_none() {
                    return Err(format!(
                        "unknown role or privilege '{r}' in grant for {}",
                        g.subject
                    ));
                }
            }
        }
        Ok(Self { grants })
    }

    /// Does any entry name this subject (a token is then privilege-separated)?
    pub fn names(&self, subject: &str) -> bool {
        self.grants.iter().any(|g| g.subject == subject)
    }

    /// The privileges of `subject` on `path` from its own entries.
    pub fn privileges(&self, subject: &str, path: &str) -> BTreeSet<&'static str> {
        let covering = self
            .grants
            .iter()
            .filter(|g| g.subject == subject && covers(&g.path, path));
        let Some(depth) = covering.clone().map(|g| depth_of(&g.path)).max() else {
            return BTreeSet::new();
        };
        covering
            .filter(|g| depth_of(&g.path) == depth)
            .flat_map(|g| g.roles.iter())
            .flat_map(|r| role_privileges(r).unwrap_or_default())
            .collect()
    }
}

fn covers(grant_path: &str, path: &str) -> bool {
    grant_path == "/"
        || path == grant_path
        || path
            .strip_prefix(grant_path)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn depth_of(path: &str) -> usize {
    path.split('/').filter(|s| !s.is_empty()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_specific_path_wins() {
        let acl = Acl::new(vec![
            "ci@pve:/:PVEVMAdmin".parse().unwrap(),
            "ci@pve:/vms/200:NoAccess".parse().unwrap(),
        ])
        .unwrap();
        assert!(acl.privileges("ci@pve", "/vms/100").contains("VM.Allocate"));
        assert!(acl.privileges("ci@pve", "/vms/200").is_empty());
        assert!(acl.privileges("other@pve", "/vms/100").is_empty());
        assert!(Acl::new(vec!["ci@pve:/:Bogus".parse().unwrap()]).is_err());
    }
}
