//! `POST /nodes/{node}/storage/{storage}/download-url`: an async `download`
//! task that never touches the network. What a URL yields comes from the
//! URL registry (`/_sim/urls`) or its fixed rule.

use std::sync::Arc;
use std::time::Duration;

use super::storage::STORAGE;
use crate::clock::Clock;
use crate::control::urls::host_of;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::qemu::NODE;
use crate::schema::{Named, Param, regex_matches};
use crate::state::{Storage, Volume};
use crate::tasks::{self, TaskCtx};
use crate::upid::encode_task_id;

const ALGORITHMS: &[&str] = &["md5", "sha1", "sha224", "sha256", "sha384", "sha512"];

pub const PARAMS: &[Param] = &[
    NODE,
    STORAGE,
    Param::string("url").pattern("https?://.*"),
    Param::string("content")
        .format(Named::PveStorageContent)
        .enums(&["iso", "vztmpl", "import"]),
    Param::string("filename").max_len(255),
    Param::string("checksum")
        .requires("checksum-algorithm")
        .opt(),
    Param::string("checksum-algorithm")
        .enums(ALGORITHMS)
        .requires("checksum")
        .opt(),
    Param::boolean("verify-certificates").opt(),
];

/// `PVE::Storage::normalize_content_filename`.
pub(super) fn normalize(filename: &str) -> String {
    let base = filename
        .trim_end_matches('\n')
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default();
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub async fn download_url(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node().to_owned();
    let storage_id = p.get("storage").unwrap_or_default().to_owned();
    let id = &call.identity;
    inst.auth.check(
        id,
        &format!("/storage/{storage_id}"),
        &["Datastore.AllocateTemplate"],
    )?;
    may_access_network(&inst, id, &node)?;
    let content = p.get("content").unwrap_or_default().to_owned();
    let url = p.get("url").unwrap_or_default().to_owned();
    let (path, format) = file_target(
        &inst,
        &node,
        &storage_id,
        &content,
        p.get("filename").unwrap_or_default(),
    )?;
    let checksum = p.get("checksum").map(|c| {
        (
            p.get("checksum-algorithm").unwrap_or_default().to_owned(),
            c.to_ascii_lowercase(),
        )
    });
    let filename = path.rsplit('/').next().unwrap_or_default().to_owned();
    let task_id = encode_task_id(&filename);
    let job = Job {
        storage: storage_id,
        volname: path,
        content,
        format,
        url,
        checksum,
    };
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "download",
        &task_id,
        move |ctx| async move { run(&ctx, job).await },
    );
    Ok(Reply::data(upid))
}

/// The network half of download-url's and query-url-metadata's check:
/// `Sys.Audit` and `Sys.Modify` on `/`, or `Sys.AccessNetwork` on the node.
pub(super) fn may_access_network(
    inst: &Instance,
    id: &crate::auth::Identity,
    node: &str,
) -> Result<(), ApiError> {
    let net_ok = (inst.auth.has(id, "/", "Sys.Audit") && inst.auth.has(id, "/", "Sys.Modify"))
        || inst
            .auth
            .has(id, &format!("/nodes/{node}"), "Sys.AccessNetwork");
    if net_ok {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            &format!("/nodes/{node}"),
            "Sys.AccessNetwork",
        ))
    }
}

struct Job {
    storage: String,
    volname: String,
    content: String,
    format: String,
    url: String,
    checksum: Option<(String, String)>,
}

async fn run(ctx: &TaskCtx, job: Job) -> Result<(), String> {
    let (dest, existing) = {
        let cluster = ctx.inst.cluster();
        let s = cluster
            .storage(&ctx.node, &job.storage)
            .ok_or_else(|| format!("storage '{}' does not exist", job.storage))?;
        (
            s.path(&job.volname),
            s.volumes.get(&job.volname).map(|v| v.checksums.clone()),
        )
    };
    let resolved = ctx.inst.urls().resolve(&job.url);
    ctx.log(format!("downloading {} to {dest}", job.url));
    if let Some(have) = existing {
        let Some((algo, want)) = &job.checksum else {
            return Err(format!("refusing to override existing file '{dest}'"));
        };
        ctx.log("calculating checksum of existing file...");
        match have.get(algo) {
            Some(got) if got == want => {
                ctx.append("OK, got correct file already, no need to download");
                return Ok(());
            }
            got => {
                return Err(format!(
                    "checksum mismatch: got '{}' != expect '{want}', aborting",
                    got.cloned().unwrap_or_default()
                ));
            }
        }
    }
    let tmp = format!("{dest}.tmp_dwnl.{}", 4000 + ctx.upid.len());
    let host = host_of(&job.url);
    ctx.log(format!("--{}--  {}", wget_time(), job.url));
    if let Some(err) = &resolved.error {
        ctx.log(format!(
            "Resolving {host} ({host})... failed: Name or service not known."
        ));
        ctx.log(format!("wget: {err}"));
        return Err(format!(
            "download failed: command '/usr/bin/wget --progress=dot:giga -O {tmp} {}' failed: exit code 4",
            job.url
        ));
    }
    ctx.log(format!("Resolving {host} ({host})... 203.0.113.10"));
    ctx.log(format!(
        "Connecting to {host} ({host})|203.0.113.10|:443... connected."
    ));
    ctx.log("HTTP request sent, awaiting response... 200 OK");
    ctx.log(format!(
        "Length: {} ({}M) [application/octet-stream]",
        resolved.size,
        resolved.size >> 20
    ));
    ctx.log(format!("Saving to: '{tmp}'"));
    // The file takes its size of the storage (`used` sums the volumes), so
    // one that does not fit fails as wget does when the disk fills.
    let avail = ctx
        .inst
        .cluster()
        .storage(&ctx.node, &job.storage)
        .map_or(0, |s| s.total.saturating_sub(s.used()));
    if resolved.size > avail {
        ctx.log(format!(
            "Cannot write to '{tmp}' (No space left on device)."
        ));
        return Err(format!(
            "download failed: command '/usr/bin/wget --progress=dot:giga -O {tmp} {}' failed: exit code 3",
            job.url
        ));
    }
    let rate = ctx.inst.durations.download_bytes_per_sec.max(1);
    let line = 32u64 << 20;
    let lines = resolved.size.div_ceil(line).max(1);
    let per_line = Duration::from_secs_f64(line.min(resolved.size) as f64 / rate as f64);
    for i in 0..lines {
        ctx.sleep(per_line).await;
        let done = ((i + 1) * line).min(resolved.size);
        let pct = done * 100 / resolved.size.max(1);
        ctx.log(format!(
            "{:>7}K ........ ........ ........ ........ {pct:>3}% {:.1}M 0s",
            i * (line >> 10),
            rate as f64 / (1 << 20) as f64
        ));
    }
    ctx.log(format!(
        "{} ({:.1} MB/s) - '{tmp}' saved [{}/{}]",
        wget_time(),
        rate as f64 / 1e6,
        resolved.size,
        resolved.size
    ));
    if let Some((algo, want)) = &job.checksum {
        ctx.log("calculating checksum...");
        match resolved.checksums.get(algo) {
            Some(got) if got == want => ctx.append("OK, checksum verified"),
            got => {
                let got = got
                    .cloned()
                    .unwrap_or_else(|| format!("<pve-sim: no {algo} known for this URL>"));
                return Err(format!("checksum mismatch: got '{got}' != expect '{want}'"));
            }
        }
    }
    ctx.checkpoint()?;
    let virtual_size = match job.format.as_str() {
        "qcow2" | "vmdk" => resolved.virtual_size.unwrap_or(3584 << 20),
        _ => resolved.virtual_size.unwrap_or(resolved.size),
    };
    let content: &'static str = match job.content.as_str() {
        "iso" => "iso",
        "vztmpl" => "vztmpl",
        _ => "import",
    };
    let mut cluster = ctx.inst.cluster();
    let s = cluster
        .storage_mut(&ctx.node, &job.storage)
        .ok_or_else(|| format!("storage '{}' does not exist", job.storage))?;
    s.volumes.insert(
        job.volname.clone(),
        Volume {
            volname: job.volname,
            content,
            format: job.format,
            size: resolved.size,
            virtual_size,
            vmid: None,
            ctime: Clock::epoch_secs(),
            corrupt: resolved.corrupt,
            checksums: resolved.checksums,
            base: None,
            contents: None,
            backup: None,
        },
    );
    drop(cluster);
    ctx.log(format!("download of '{}' to '{dest}' finished", job.url));
    Ok(())
}

pub fn wget_time() -> String {
    let secs = Clock::epoch_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The checks download-url and upload share: a file-based storage that
/// holds `content`, and a file name with the right extension. Returns the
/// volume name and format.
pub fn file_target(
    inst: &Instance,
    node: &str,
    storage_id: &str,
    content: &str,
    filename: &str,
) -> Result<(String, String), ApiError> {
    let cluster = inst.cluster();
    let s = cluster
        .storage(node, storage_id)
        .ok_or_else(|| ApiError::internal(format!("storage '{storage_id}' does not exist")))?;
    if !s.is_file_based() {
        return Err(ApiError::internal(format!(
            "can't upload to storage type '{}', not a file based storage!",
            s.type_name()
        )));
    }
    if !s.supports(content) {
        return Err(ApiError::internal(format!(
            "storage '{storage_id}' is not configured for content-type '{content}'"
        )));
    }
    let filename = normalize(filename);
    let format = match content {
        "iso" if regex_matches(r"(?i)[^/]+\.(?:iso|img)", &filename) => "iso".to_owned(),
        // `$VZTMPL_EXT_RE_1` (case-insensitive): compressed tarballs, and
        // plain `.tar` since pve-storage 9.0.15 (PVE 9).
        "vztmpl"
            if regex_matches(r"(?i)[^/]+\.tar\.(gz|xz|zst|bz2)", &filename)
                || (inst.pve_version >= 9 && regex_matches(r"(?i)[^/]+\.tar", &filename)) =>
        {
            "tgz".to_owned()
        }
        "import" => match filename.rsplit_once('.') {
            Some((stem, ext))
                if ["ova", "qcow2", "raw", "vmdk"].contains(&ext)
                    && regex_matches(r"[a-zA-Z0-9\-.+=_]+", stem) =>
            {
                ext.to_owned()
            }
            _ => {
                return Err(ApiError::param(
                    "filename",
                    "invalid filename or wrong extension",
                ));
            }
        },
        _ => return Err(ApiError::param("filename", "wrong file extension")),
    };
    Ok((Storage::download_volname(content, &filename), format))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames_are_normalized_like_pve() {
        assert_eq!(normalize("../x/ubuntu 24.04.qcow2"), "ubuntu_24.04.qcow2");
        assert_eq!(normalize("a:b.iso"), "a_b.iso");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_000), (2024, 10, 4));
    }
}
