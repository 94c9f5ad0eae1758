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
        "PVEPoolAdmin" => vec!["Pool.Allocate", "Pool.Audit"],
        "PVEPoolUser" => vec!["Pool.Audit"],
        "PVEAuditor" => pick(&|p| p.ends_with(".Audit")),
        "NoAccess" => Vec::new(),
        privilege => vec![*ALL_PRIVILEGES.iter().find(|p| **p == privilege)?],
    })
}

/// Who an ACL entry is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    User,
    Group,
    Token,
}

impl Kind {
    /// The `type` of `GET /access/acl`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Group => "group",
            Self::Token => "token",
        }
    }
}

/// One role given to one user, group or token on one path, as user.cfg
/// keeps it (`acl:<propagate>:<path>:<ugid>:<role>:`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub path: String,
    pub kind: Kind,
    pub ugid: String,
    pub role: String,
    /// The entry counts on the paths below `path` too.
    pub propagate: bool,
}

/// Whether `role` names a role (a built-in one; the simulator has no custom
/// roles), not a single privilege.
pub fn is_role(role: &str) -> bool {
    !ALL_PRIVILEGES.contains(&role) && role_privileges(role).is_some()
}

pub struct Acl {
    entries: Vec<Entry>,
}

impl Acl {
    /// The ACL of the configured grants: each role an entry that propagates
    /// (a grant's "role" may also be a single privilege, a simulator
    /// convenience).
    pub fn new(grants: Vec<Grant>) -> Result<Self, String> {
        let mut entries = vec![];
        for g in grants {
            let kind = if g.subject.contains('!') {
                Kind::Token
            } else {
                Kind::User
            };
            for r in g.roles {
                if role_privileges(&r).is_none() {
                    return Err(format!(
                        "unknown role or privilege '{r}' in grant for {}",
                        g.subject
                    ));
                }
                entries.push(Entry {
                    path: g.path.clone(),
                    kind,
                    ugid: g.subject.clone(),
                    role: r,
                    propagate: true,
                });
            }
        }
        Ok(Self { entries })
    }

    /// Every entry, sorted by path.
    pub fn entries(&self) -> Vec<Entry> {
        let mut all = self.entries.clone();
        all.sort();
        all
    }

    /// Adds `entry`, or changes the propagation of the same role given to
    /// the same subject on the same path (as `PUT /access/acl` does).
    pub fn set(&mut self, entry: Entry) {
        self.remove(&entry);
        self.entries.push(entry);
    }

    /// Removes the entry with `entry`'s path, subject and role.
    pub fn remove(&mut self, entry: &Entry) {
        self.entries.retain(|e| {
            (&e.path, e.kind, &e.ugid, &e.role)
                != (&entry.path, entry.kind, &entry.ugid, &entry.role)
        });
    }

    /// Removes every entry on `path` (`delete_pool_acl`).
    pub fn drop_path(&mut self, path: &str) {
        self.entries.retain(|e| e.path != path);
    }

    /// Does any entry name this subject (a token is then privilege-separated)?
    pub fn names(&self, subject: &str) -> bool {
        self.entries
            .iter()
            .any(|e| e.kind != Kind::Group && e.ugid == subject)
    }

    /// The privileges of `subject` on `path` from its own entries (groups
    /// have no members in the simulator: their entries give nobody
    /// anything).
    pub fn privileges(&self, subject: &str, path: &str) -> BTreeSet<&'static str> {
        let covering = self.entries.iter().filter(|e| {
            e.kind != Kind::Group
                && e.ugid == subject
                && (e.path == path || (e.propagate && covers(&e.path, path)))
        });
        let Some(depth) = covering.clone().map(|e| depth_of(&e.path)).max() else {
            return BTreeSet::new();
        };
        covering
            .filter(|e| depth_of(&e.path) == depth)
            .flat_map(|e| role_privileges(&e.role).unwrap_or_default())
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

    #[test]
    fn an_entry_without_propagate_counts_on_its_path_only() {
        let mut acl = Acl::new(vec![]).unwrap();
        acl.set(Entry {
            path: "/pool/a".into(),
            kind: Kind::User,
            ugid: "ci@pve".into(),
            role: "PVEAuditor".into(),
            propagate: false,
        });
        assert!(acl.privileges("ci@pve", "/pool/a").contains("Pool.Audit"));
        assert!(acl.privileges("ci@pve", "/pool/a/b").is_empty());
        acl.drop_path("/pool/a");
        assert!(acl.entries().is_empty());
        assert!(is_role("PVEAuditor") && !is_role("VM.Audit") && !is_role("Bogus"));
    }
}
