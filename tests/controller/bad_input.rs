//! Bad input, on the real control plane: every row of the tables is an
//! invalid object. The API server refuses what it can check, with a message
//! a person can act on; what only the provider can know (Secrets, CA
//! bundles, Proxmox) or what was written around the schema is reported as a
//! condition on the object. Meanwhile a valid VM in the same namespace
//! converges, and the controller neither panics nor stalls.

mod cases;
mod crd;
mod refused;
mod reported;

use serde_json::json;

use crate::reconcile::{Env, Options, manifests, schema};
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_invalid_objects_with_actionable_messages() {
    // Before installing: the CRDs may be swapped for loose copies meanwhile.
    let _strict = schema::strict().await;
    support::install_crds(support::repo_root().join("crds")).await;
    let ns = support::namespace("refused").await;
    let rows = refused::rows();
    let mut wrong = vec![];
    for row in &rows {
        match refused::dry_run(&row.object, ns.name()).await {
            Ok(()) => wrong.push(format!("{}: accepted", row.what)),
            Err(message) if !message.contains(row.message) => wrong.push(format!(
                "{}: want {:?} in the message, got: {message}",
                row.what, row.message
            )),
            Err(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );
    assert!(rows.len() >= 40, "{} rows", rows.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_objects_are_reported_while_a_valid_vm_converges() {
    let mut env = Env::without_controller("badinput", Options::default()).await;
    let (around, mut expects) = cases::around_the_schema(&env.sim);
    crd::write_around_the_schema(&mut env, &around).await;
    env.start_controller().await;

    let (objects, more) = cases::provider_knows(&env.sim);
    for object in &objects {
        env.apply(object).await;
    }
    expects.extend(more);
    // An annotation no schema checks, which once panicked the controller.
    let mut odd_poll = manifests::vm("odd-poll-interval", manifests::imported(json!({})));
    odd_poll["metadata"]["annotations"] = json!({"crossplane.io/poll-interval": "1s-1s"});
    env.apply(&odd_poll).await;
    // Applied last, behind every bad object in the queue.
    env.apply(&manifests::vm("good", manifests::imported(json!({}))))
        .await;

    env.wait_ready("good").await;
    env.wait_ready("odd-poll-interval").await;
    reported::wait_all(env.ns.name(), &expects).await;
    assert!(expects.len() >= 40, "{} rows", expects.len());
    let limited: Vec<&str> = cases::limit_rows().iter().map(|r| r.0).collect();
    reported::nothing_created(env.ns.name(), &env.sim, &limited).await;
    env.wait_ready("poll-banana").await;
    env.wait_ready("poll-zero").await;
    // Still running, never panicked, stops cleanly.
    env.stop_controller().await;
}
