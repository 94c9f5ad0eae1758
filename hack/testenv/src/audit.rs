//! An optional audit log of the kube-apiserver (`--audit-policy-file`,
//! `--audit-log-path`): one JSON event per line, for tools that must count
//! the requests of one client exactly (`make bench` counts the provider's
//! requests by verb and resource this way).

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::pki::write_file;

/// The file names in the run directory.
const POLICY_FILE: &str = "audit-policy.yaml";
const LOG_FILE: &str = "audit.log";

/// An audit policy (`audit.k8s.io/v1` `Policy`, YAML or JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPolicy(pub String);

impl AuditPolicy {
    /// One `Metadata`-level event per request of `users` (user, verb,
    /// resource, subresource, namespace, name, time of arrival) at stage
    /// `RequestReceived` only, so a watch counts once like any other
    /// request; nothing for anyone else.
    pub fn requests_of(users: &[&str]) -> Self {
        let users = quoted(users);
        Self::received("users", &users)
    }

    /// The same for every member of `groups` (e.g. `system:serviceaccounts`:
    /// every ServiceAccount, whatever its namespace and name).
    pub fn requests_of_groups(groups: &[&str]) -> Self {
        Self::received("userGroups", &quoted(groups))
    }

    fn received(field: &str, list: &str) -> Self {
        Self(format!(
            "apiVersion: audit.k8s.io/v1\n\
             kind: Policy\n\
             omitStages: [ResponseStarted, ResponseComplete, Panic]\n\
             rules:\n\
             - level: Metadata\n  {field}: [{list}]\n\
             - level: None\n"
        ))
    }
}

/// `"a", "b"`: each item a JSON (so YAML) string.
fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|u| serde_json::Value::String((*u).to_owned()).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where the apiserver reads the policy and writes the log.
#[derive(Debug, Clone)]
pub struct AuditFiles {
    pub policy: PathBuf,
    pub log: PathBuf,
}

impl AuditFiles {
    /// Writes the policy into `dir`.
    pub fn write(dir: &Path, policy: &AuditPolicy) -> Result<Self, Error> {
        let files = Self {
            policy: dir.join(POLICY_FILE),
            log: dir.join(LOG_FILE),
        };
        write_file(&files.policy, &policy.0, 0o644)?;
        Ok(files)
    }

    /// The apiserver flags. No rotation: readers need every line.
    pub fn flags(&self) -> [String; 3] {
        [
            format!("--audit-policy-file={}", self.policy.display()),
            format!("--audit-log-path={}", self.log.display()),
            "--audit-log-maxsize=0".into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_exactly_the_given_users() {
        let AuditPolicy(text) = AuditPolicy::requests_of(&["system:serviceaccount:a:b", "x\"y"]);
        assert!(
            text.contains(r#"users: ["system:serviceaccount:a:b", "x\"y"]"#),
            "{text}"
        );
        assert!(text.contains("- level: None"), "{text}");
        let AuditPolicy(text) = AuditPolicy::requests_of_groups(&["system:serviceaccounts"]);
        assert!(
            text.contains(r#"userGroups: ["system:serviceaccounts"]"#),
            "{text}"
        );
    }
}
