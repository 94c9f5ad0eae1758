//! Bad input, on the real control plane: every row of the tables is an
//! invalid object. The API server refuses what it can check, with a message
//! a person can act on; what only the provider can know (Secrets, CA
//! bundles, Proxmox) or what was written around the schema is reported as a
//! condition on the object. Meanwhile a valid VM in the same namespace
//! converges, and the controller neither panics nor stalls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reconcile;
mod support;

#[path = "bad_input/refused.rs"]
mod refused;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_invalid_objects_with_actionable_messages() {
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
