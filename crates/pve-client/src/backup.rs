//! Scheduled backup jobs (`/cluster/backup`, vzdump jobs in jobs.cfg):
//! plain calls that answer at once. The listing carries each job's
//! options and `next-run`, so one `GET` observes every job.

use std::collections::BTreeMap;

use reqwest::Method;
use serde::{Deserialize, Deserializer};

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;

/// A job as `GET /cluster/backup` lists it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct BackupJob {
    pub id: String,
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub schedule: Option<String>,
    #[serde(default)]
    pub storage: Option<String>,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default, deserialize_with = "opt_text")]
    pub compress: Option<String>,
    /// `keep-last` → 3, ...: an object in the listing.
    #[serde(default, rename = "prune-backups", deserialize_with = "keep")]
    pub prune_backups: BTreeMap<String, u64>,
    #[serde(default, rename = "notes-template")]
    pub notes_template: Option<String>,
    /// Absent means enabled (PVE's default).
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub enabled: Option<bool>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub protected: Option<bool>,
    #[serde(default)]
    pub node: Option<String>,
    /// The guests, `100,101` (a `pve-vmid-list`).
    #[serde(default, deserialize_with = "opt_text")]
    pub vmid: Option<String>,
    #[serde(default)]
    pub pool: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub all: Option<bool>,
    /// Seconds since the epoch of its next start.
    #[serde(default, rename = "next-run", deserialize_with = "lenient::opt_u64")]
    pub next_run: Option<u64>,
}

fn opt_text<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(lenient::scalar_to_string))
}

/// `prune-backups`: an object in the listing, a property string in
/// older answers.
fn keep<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<BTreeMap<String, u64>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(match v {
        Some(serde_json::Value::Object(map)) => map
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), lenient::value_u64(v)?)))
            .collect(),
        Some(serde_json::Value::String(s)) => s
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, n)| Some((k.to_owned(), n.parse().ok()?)))
            .collect(),
        Some(_) | None => BTreeMap::new(),
    })
}

/// The options this provider writes on a job. `None`: not sent (not
/// managed: an update leaves what the job has).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupJobOptions {
    pub comment: String,
    pub schedule: String,
    pub storage: Option<String>,
    pub mode: Option<String>,
    pub compress: Option<String>,
    /// `keep-last=3,keep-daily=7`.
    pub prune_backups: Option<String>,
    pub notes_template: Option<String>,
    pub enabled: bool,
    pub protected: Option<bool>,
    pub node: Option<String>,
    /// The guests by VMID (`vmid`), or a pool (`pool`): one of them.
    pub vmid: Option<String>,
    pub pool: Option<String>,
}

impl BackupJobOptions {
    fn params(&self) -> Params {
        Params::new()
            .text("comment", &self.comment)
            .text("schedule", &self.schedule)
            .opt("storage", self.storage.as_ref())
            .opt("mode", self.mode.as_ref())
            .opt("compress", self.compress.as_ref())
            .opt("prune-backups", self.prune_backups.as_ref())
            .opt("notes-template", self.notes_template.as_ref())
            .flag("enabled", self.enabled)
            .opt_flag("protected", self.protected)
            .opt("node", self.node.as_ref())
            .opt("vmid", self.vmid.as_ref())
            .opt("pool", self.pool.as_ref())
    }
}

impl Client {
    /// `GET /cluster/backup`: every job with its options and `next-run`.
    pub async fn backup_jobs(&self) -> Result<Vec<BackupJob>> {
        self.get(ApiPath::new("/cluster/backup", &[]), Params::new())
            .await
    }

    /// `POST /cluster/backup` with the job's `id`.
    pub async fn create_backup_job(&self, id: &str, options: &BackupJobOptions) -> Result<()> {
        let params = Params::new().text("id", id).extend(options.params());
        self.write_null(Method::POST, ApiPath::new("/cluster/backup", &[]), params)
            .await
    }

    /// `PUT /cluster/backup/{id}`: sets `options` (naming the guests by
    /// `vmid` drops a `pool`, and the other way round, as PVE does).
    pub async fn update_backup_job(&self, id: &str, options: &BackupJobOptions) -> Result<()> {
        let params = options.params();
        let path = ApiPath::new("/cluster/backup/{id}", &[id]);
        self.write_null(Method::PUT, path, params).await
    }

    /// `DELETE /cluster/backup/{id}`.
    pub async fn delete_backup_job(&self, id: &str) -> Result<()> {
        let path = ApiPath::new("/cluster/backup/{id}", &[id]);
        self.write_null(Method::DELETE, path, Params::new()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_job_reads_as_pve_lists_it() {
        let job: BackupJob = serde_json::from_value(serde_json::json!({
            "id": "backup-1", "type": "vzdump", "schedule": "mon..fri 02:00",
            "enabled": 1, "vmid": "100,101", "compress": "zstd", "storage": "local",
            "prune-backups": {"keep-last": 3, "keep-daily": "7"}, "next-run": 1_700_000_000,
        }))
        .unwrap();
        assert_eq!(job.vmid.as_deref(), Some("100,101"));
        assert_eq!(job.enabled, Some(true));
        assert_eq!(job.next_run, Some(1_700_000_000));
        assert_eq!(
            job.prune_backups,
            BTreeMap::from([("keep-daily".into(), 7), ("keep-last".into(), 3)])
        );
    }
}
