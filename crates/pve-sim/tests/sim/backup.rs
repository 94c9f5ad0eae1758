//! `/cluster/backup` over HTTP, as pve-manager answers: jobs with their
//! options and `next-run`, the calendar event checked with PVE's text,
//! guests named one way only, and the privileges.

use serde_json::Value;

use crate::common::{start, start_with};

const JOBS: &str = "/cluster/backup";

fn job<'a>(list: &'a Value, id: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .unwrap_or_else(|| panic!("no job {id} in {list}"))
}

#[tokio::test]
async fn a_job_is_listed_with_its_options_and_next_run() {
    let sim = start().await;
    let created = sim
        .post(
            JOBS,
            &[
                ("id", "nightly-1"),
                ("schedule", "mon..fri 02:00"),
                ("vmid", "100,101"),
                ("storage", "local"),
                ("mode", "snapshot"),
                ("compress", "zstd"),
                ("prune-backups", "keep-last=3,keep-daily=7"),
                ("comment", "marker"),
            ],
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let list = sim.get(JOBS).await.data();
    let j = job(&list, "nightly-1");
    assert_eq!(j["vmid"], "100,101");
    assert_eq!(j["enabled"], 1, "enabled by default");
    assert_eq!(j["prune-backups"]["keep-last"], 3);
    assert_eq!(j["prune-backups"]["keep-daily"], 7);
    let next = j["next-run"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        next > now && next <= now + 4 * 86_400,
        "next weekday 02:00: {next}"
    );
    assert_eq!(next % 86_400, 2 * 3600, "at 02:00 UTC");
    let again = sim
        .post(
            JOBS,
            &[("id", "nightly-1"), ("schedule", "daily"), ("vmid", "100")],
        )
        .await;
    assert_eq!(again.status, 500);
    assert!(
        again.reason.contains("Job 'nightly-1' already exists"),
        "{}",
        again.reason
    );
}

#[tokio::test]
async fn a_schedule_pve_refuses_is_refused_with_its_text() {
    let sim = start().await;
    for (schedule, text) in [
        (
            "25:00",
            "invalid calendar event '25:00' - value '25' out of range",
        ),
        (
            "every night",
            "invalid calendar event 'every night' - unable to parse calendar event - unused parts",
        ),
        (
            "*/61",
            "invalid calendar event '*/61' - repetition '61' out of range",
        ),
    ] {
        let r = sim
            .post(
                JOBS,
                &[("id", "bad"), ("schedule", schedule), ("vmid", "100")],
            )
            .await;
        assert_eq!(r.status, 400, "{schedule}: {}", r.body);
        assert_eq!(r.errors()["schedule"], text);
    }
    for good in [
        "daily",
        "weekly",
        "sat",
        "*/15",
        "*-*-* 03:30",
        "mon..fri 02:00",
    ] {
        let id = format!("ok{}", good.len());
        let r = sim
            .post(JOBS, &[("id", &id), ("schedule", good), ("vmid", "100")])
            .await;
        assert_eq!(r.status, 200, "{good}: {}", r.body);
        sim.delete(&format!("{JOBS}/{id}"), &[]).await.data();
    }
    assert_eq!(sim.get(JOBS).await.data(), serde_json::json!([]));
}

#[tokio::test]
async fn guests_are_named_one_way_and_an_update_switches_them() {
    let sim = start().await;
    let missing = sim
        .post(JOBS, &[("id", "job"), ("schedule", "daily")])
        .await;
    assert_eq!(
        missing.errors()["vmid"],
        "property is missing",
        "{}",
        missing.body
    );
    let both = sim
        .post(
            JOBS,
            &[
                ("id", "job"),
                ("schedule", "daily"),
                ("vmid", "100"),
                ("all", "1"),
            ],
        )
        .await;
    assert_eq!(both.errors()["all"], "option conflicts with option 'vmid'");
    sim.post(
        JOBS,
        &[("id", "job"), ("schedule", "daily"), ("vmid", "100")],
    )
    .await
    .data();
    let path = format!("{JOBS}/job");
    sim.put(&path, &[("vmid", "100,102"), ("enabled", "0")])
        .await
        .data();
    let j = sim.get(&path).await.data();
    assert_eq!(
        (j["vmid"].clone(), j["enabled"].clone()),
        ("100,102".into(), 0.into())
    );
    let no_pool = sim.put(&path, &[("pool", "nope")]).await;
    assert_eq!(no_pool.status, 403, "{}", no_pool.body);
    let bad_keep = sim
        .put(&path, &[("prune-backups", "keep-all=1,keep-last=2")])
        .await;
    assert_eq!(
        bad_keep.errors()["prune-backups"],
        "keep-all cannot be set together with other options."
    );
    sim.delete(&path, &[]).await.data();
    let gone = sim.delete(&path, &[]).await;
    assert_eq!(gone.errors()["id"], "No such job 'job'");
}

#[tokio::test]
async fn jobs_need_sys_modify_on_the_root() {
    let sim = start_with(|c| {
        c.api_tokens.push("ro@pve!audit=s3cret".parse().unwrap());
        c.grants.push("ro@pve!audit:/:PVEAuditor".parse().unwrap());
        c.grants.push("ro@pve:/:PVEAuditor".parse().unwrap());
    })
    .await;
    let as_auditor = |method: reqwest::Method| {
        sim.client
            .request(method, sim.url(JOBS))
            .header("Authorization", "PVEAPIToken=ro@pve!audit=s3cret")
    };
    let read = sim.send(as_auditor(reqwest::Method::GET)).await;
    assert_eq!(read.status, 200, "Sys.Audit reads: {}", read.body);
    let write = sim
        .send(as_auditor(reqwest::Method::POST).form(&[("schedule", "daily"), ("vmid", "100")]))
        .await;
    assert_eq!(write.status, 403, "{}", write.body);
}
