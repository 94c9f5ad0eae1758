//! Which task of its file, found in a node's task list, is an image's own.
//!
//! A status write lost after a dispatch leaves a download running (or
//! ended) that the image must find again instead of sending it twice. The
//! node's list shows the task's type, its ID (PVE names `download` and
//! `ociregistrypull` tasks after the file they write), the Proxmox user
//! and the start second: nothing there tells two images apart that name the
//! same file, since every team's image is dispatched by the provider's one
//! user. So an image writes down `locations[].sending` before it sends
//! anything there, and only such a location looks for its own task: one
//! of its file, of the provider's user, started since that write (less the
//! nodes' clock skew) and, for a download, whose log names the image's URL
//! (PVE's `download_file_from_url` first prints `downloading <url> to
//! <dest>`; an OCI pull's log does not name its reference). An image that
//! never sent anything owns nothing, however close in time another's
//! download of the same file started; and where more than one task fits,
//! none is taken.

use std::collections::BTreeMap;

use crate::api::image::ImageLocation;
use crate::reconcile::common::tasks::ActiveTask;

/// How far behind the provider's clock a node's may be (seconds) for a
/// task started after `sending` still to count as the image's.
pub const CLOCK_SKEW: u32 = 120;

/// What tells an image's own dispatch at one location from another's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The task type that writes the file (`download`, `ociregistrypull`).
    pub task_type: &'static str,
    /// The task ID: the file name.
    pub id: String,
    /// The URL a download's log must name; `None` for a pull.
    pub url: Option<String>,
    /// The Proxmox user the provider dispatches as.
    pub user: String,
    /// The second the image wrote down it was about to send here; `None`:
    /// it never did, and no task is its own.
    pub sending: Option<u32>,
}

impl Claim {
    /// The claim of the location `loc` (as the status has it) for a file
    /// fetched by a task of `task_type` and `id`.
    pub fn new(
        task_type: &'static str,
        id: String,
        url: Option<String>,
        user: &str,
        loc: Option<&ImageLocation>,
    ) -> Self {
        let sending = loc
            .and_then(|l| l.sending.as_ref())
            .map(|t| u32::try_from(t.0.as_second()).unwrap_or(u32::MAX));
        Claim {
            task_type,
            id,
            url,
            user: user.to_owned(),
            sending,
        }
    }

    /// Whether `t` fetches this file (whoever started it).
    pub fn same_file(&self, t: &ActiveTask) -> bool {
        t.task_type() == self.task_type && t.id() == self.id
    }

    /// The earliest start second a task of the image's may have, or `None`
    /// when the image never sent anything here (nothing is listed then).
    pub fn since(&self) -> Option<u32> {
        self.sending.map(|s| s.saturating_sub(CLOCK_SKEW))
    }

    /// Whether `t` may be the image's own before its log is read: its
    /// file, the provider's user, started since the image wrote `sending`.
    /// Only for these is a download's log read.
    pub fn candidate(&self, t: &ActiveTask) -> bool {
        self.since().is_some_and(|since| {
            self.same_file(t) && t.user() == self.user && t.starttime() >= since
        })
    }

    /// Whether the log of candidate `t` (its `downloading …` line, by
    /// UPID, in `logs`) names this image's URL and file; a pull's log is
    /// not read.
    fn log_fits(&self, t: &ActiveTask, logs: &BTreeMap<String, String>) -> bool {
        match &self.url {
            None => true,
            Some(url) => logs
                .get(&t.to_string())
                .is_some_and(|line| names_download(line, url, &self.id)),
        }
    }

    /// The one task among `tasks` that is the image's own, or `None`: no
    /// candidate whose log fits, or more than one (two images naming the
    /// same file and URL that both sent in the same window cannot be told
    /// apart, so neither takes either).
    pub fn own<'t>(
        &self,
        tasks: &'t [ActiveTask],
        logs: &BTreeMap<String, String>,
    ) -> Option<&'t ActiveTask> {
        let mut fitting = tasks
            .iter()
            .filter(|t| self.candidate(t) && self.log_fits(t, logs));
        let one = fitting.next()?;
        fitting.next().is_none().then_some(one)
    }
}

/// The line of a `download` task's log that says what it fetches: PVE's
/// `download_file_from_url` prints `downloading <url> to <dest>` first.
pub fn download_line<'l>(lines: impl IntoIterator<Item = &'l str>) -> Option<&'l str> {
    lines.into_iter().find(|l| l.starts_with("downloading "))
}

/// Whether a `downloading <url> to <dest>` line names `url` and a
/// destination whose file name is `file`.
fn names_download(line: &str, url: &str, file: &str) -> bool {
    line.strip_prefix("downloading ")
        .and_then(|rest| rest.strip_prefix(url))
        .and_then(|rest| rest.strip_prefix(" to "))
        .is_some_and(|dest| dest.rsplit('/').next() == Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use pve_client::Upid;

    const SENT: u32 = 0x6B49_D200;

    fn task(user: &str, start: u32, id: &str) -> Upid {
        Upid::parse(&format!(
            "UPID:pve1:00001234:00005678:{start:08X}:download:{id}:{user}:"
        ))
        .unwrap()
    }

    fn claim(sending: Option<u32>) -> Claim {
        let loc = sending.map(|s| ImageLocation {
            node: "pve1".into(),
            storage: "local".into(),
            shared: false,
            phase: crate::api::image::LocationPhase::Downloading,
            task: None,
            size: None,
            message: None,
            failures: None,
            failed_at: None,
            sending: Some(Time(Timestamp::from_second(i64::from(s)).unwrap())),
            made: vec![],
        });
        Claim::new(
            "download",
            "noble.qcow2".into(),
            Some("https://a.example/noble.qcow2".into()),
            "root@pam",
            loc.as_ref(),
        )
    }

    fn log(t: &Upid, url: &str) -> (String, String) {
        (
            t.to_string(),
            format!("downloading {url} to /var/lib/vz/import/noble.qcow2"),
        )
    }

    /// Table: which task of the file an image takes as its own after a
    /// lost status write. Each row fails if that rule is dropped.
    #[test]
    fn only_the_one_task_an_image_sent_is_its_own() {
        let url = "https://a.example/noble.qcow2";
        let mine = task("root@pam", SENT, "noble.qcow2");
        let theirs_same_second = task("root@pam", SENT, "noble.qcow2");
        // (row, claim, tasks on the node, their logs, one of them is its own)
        type Row = (&'static str, Claim, Vec<Upid>, Vec<(String, String)>, bool);
        let rows: Vec<Row> = vec![
            (
                "never sent: another's download of the file in the same second is not its own",
                claim(None),
                vec![theirs_same_second.clone()],
                vec![log(&theirs_same_second, "https://b.example/evil.qcow2")],
                false,
            ),
            (
                "never sent: not even one naming the same URL",
                claim(None),
                vec![mine.clone()],
                vec![log(&mine, url)],
                false,
            ),
            (
                "sent: its download, its URL in the log",
                claim(Some(SENT)),
                vec![mine.clone()],
                vec![log(&mine, url)],
                true,
            ),
            (
                "sent: a node clock a minute behind",
                claim(Some(SENT + 60)),
                vec![mine.clone()],
                vec![log(&mine, url)],
                true,
            ),
            (
                "sent: another URL in the log is another image's",
                claim(Some(SENT)),
                vec![mine.clone()],
                vec![log(&mine, "https://b.example/evil.qcow2")],
                false,
            ),
            (
                "sent: a log not read (or not written yet) proves nothing",
                claim(Some(SENT)),
                vec![mine.clone()],
                vec![],
                false,
            ),
            (
                "sent: another user's task",
                claim(Some(SENT)),
                vec![task("alice@pve", SENT, "noble.qcow2")],
                vec![log(&task("alice@pve", SENT, "noble.qcow2"), url)],
                false,
            ),
            (
                "sent: a task from before the write, beyond the clock skew",
                claim(Some(SENT + CLOCK_SKEW + 1)),
                vec![mine.clone()],
                vec![log(&mine, url)],
                false,
            ),
            (
                "sent: another file",
                claim(Some(SENT)),
                vec![task("root@pam", SENT, "other.qcow2")],
                vec![log(&task("root@pam", SENT, "other.qcow2"), url)],
                false,
            ),
            (
                "sent: two that fit cannot be told apart",
                claim(Some(SENT)),
                vec![mine.clone(), task("root@pam", SENT + 1, "noble.qcow2")],
                vec![
                    log(&mine, url),
                    log(&task("root@pam", SENT + 1, "noble.qcow2"), url),
                ],
                false,
            ),
        ];
        for (row, claim, tasks, logs, own) in rows {
            let logs: BTreeMap<String, String> = logs.into_iter().collect();
            assert_eq!(claim.own(&tasks, &logs).is_some(), own, "{row}");
        }
    }

    #[test]
    fn the_download_line_is_found_and_read_exactly() {
        let lines = [
            "starting",
            "downloading https://a.example/x.qcow2 to /d/x.qcow2",
        ];
        assert_eq!(download_line(lines), Some(lines[1]));
        assert!(names_download(
            lines[1],
            "https://a.example/x.qcow2",
            "x.qcow2"
        ));
        // A URL that only starts like the image's is another.
        assert!(!names_download(
            "downloading https://a.example/x.qcow2.evil to /d/x.qcow2",
            "https://a.example/x.qcow2",
            "x.qcow2"
        ));
        assert!(!names_download(
            lines[1],
            "https://a.example/x.qcow2",
            "y.qcow2"
        ));
    }
}
