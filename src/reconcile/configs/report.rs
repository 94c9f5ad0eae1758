//! A provider config's status from a check: the `Ready` condition, the
//! Proxmox version and the number of users. Pure, so a check that finds
//! what the last one found gives back the same status (and nothing is
//! written). A config being deleted while in use says so instead
//! (Ready=False, `Deleting`, as Crossplane's configs do).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::probe::Outcome;
use crate::api::provider_config::{ConfigReason, ProviderConfigStatus, ProviderSettings};
use crate::api::{Condition, ConditionStatus, ConditionType, condition, set_condition};

/// What the Warning condition says about the settings' transport, if
/// anything: credentials in clear, or no certificate verification.
pub fn insecure(settings: &ProviderSettings) -> Option<String> {
    let mut problems = vec![];
    if settings.endpoint.starts_with("http://") && settings.tls.insecure_allow_plain_http {
        problems.push(
            "the endpoint is http:// (tls.insecureAllowPlainHTTP): every request carries the API token or password unencrypted, readable by anyone on the network path; use https://",
        );
    }
    if settings.tls.insecure_skip_tls_verify {
        problems.push(
            "tls.insecureSkipTLSVerify accepts any certificate: anyone on the network path can impersonate Proxmox and read the credentials; pin tls.fingerprint or give tls.caBundle",
        );
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The status after a check. Unchanged conditions keep their
/// `lastTransitionTime`; the version is shown only while Ready. `blocked`:
/// why the config, being deleted, stays.
pub fn status(
    old: Option<&ProviderConfigStatus>,
    outcome: &Outcome,
    users: usize,
    blocked: Option<&str>,
    (generation, insecure): (Option<i64>, Option<String>),
    now: Time,
    holder: Option<&str>,
) -> ProviderConfigStatus {
    let (status, reason, message) = match (blocked, outcome) {
        (Some(why), _) => (
            ConditionStatus::False,
            ConfigReason::Deleting,
            why.to_owned(),
        ),
        (None, Ok(version)) => (
            ConditionStatus::True,
            ConfigReason::Available,
            format!("Proxmox VE {version} answered"),
        ),
        (None, Err(problem)) => (
            ConditionStatus::False,
            problem.reason,
            problem.message.clone(),
        ),
    };
    let mut conditions = old.map(|s| s.conditions.clone()).unwrap_or_default();
    set_condition(
        &mut conditions,
        Condition {
            type_: ConditionType::Ready.as_str().into(),
            status,
            last_transition_time: now.clone(),
            reason: reason.as_str().into(),
            message: Some(message),
            observed_generation: generation,
        },
    );
    match insecure {
        Some(message) => set_condition(
            &mut conditions,
            Condition {
                type_: ConditionType::Warning.as_str().into(),
                status: ConditionStatus::True,
                last_transition_time: now,
                reason: ConfigReason::InsecureTransport.as_str().into(),
                message: Some(message),
                observed_generation: generation,
            },
        ),
        None => conditions.retain(|c| c.type_ != ConditionType::Warning.as_str()),
    }
    ProviderConfigStatus {
        observed_generation: generation,
        conditions,
        users: Some(i64::try_from(users).unwrap_or(i64::MAX)),
        version: outcome.as_ref().ok().filter(|_| blocked.is_none()).cloned(),
        holder: holder.map(str::to_owned),
    }
}

/// Whether `status` says Ready=True.
pub fn is_ready(status: Option<&ProviderConfigStatus>) -> bool {
    status
        .and_then(|s| condition::find(&s.conditions, ConditionType::Ready))
        .is_some_and(|c| c.status == ConditionStatus::True)
}

/// The `Ready` reason of `status`, if any.
pub fn reason(status: Option<&ProviderConfigStatus>) -> Option<&str> {
    status
        .and_then(|s| condition::find(&s.conditions, ConditionType::Ready))
        .map(|c| c.reason.as_str())
}

/// The `Ready` message of `status`, if any.
pub fn message(status: Option<&ProviderConfigStatus>) -> Option<&str> {
    status
        .and_then(|s| condition::find(&s.conditions, ConditionType::Ready))
        .and_then(|c| c.message.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::providers::Problem;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn unauthorized() -> Outcome {
        Err(Problem::new(ConfigReason::Unauthorized, "refused"))
    }

    fn settings(endpoint: &str, tls: serde_json::Value) -> ProviderSettings {
        serde_json::from_value(serde_json::json!({
            "endpoint": endpoint,
            "credentials": {"source": "Secret", "secretRef": {"name": "pve"}},
            "tls": tls,
        }))
        .unwrap()
    }

    #[test]
    fn insecure_transport_is_a_warning_while_it_is_set() {
        let http = settings(
            "http://127.0.0.1:8006",
            serde_json::json!({"insecureAllowPlainHTTP": true}),
        );
        let why = insecure(&http).unwrap();
        assert!(why.contains("the endpoint is http://"), "{why}");
        let s = status(
            None,
            &Ok("9.1.1".into()),
            0,
            None,
            (Some(1), Some(why)),
            at(10),
            None,
        );
        let warning = condition::find(&s.conditions, ConditionType::Warning).unwrap();
        assert_eq!(
            (warning.status, warning.reason.as_str()),
            (ConditionStatus::True, "InsecureTransport")
        );
        let skip = settings(
            "https://pve.example:8006",
            serde_json::json!({"insecureSkipTLSVerify": true}),
        );
        assert!(insecure(&skip).unwrap().contains("accepts any certificate"));
        let safe = settings("https://pve.example:8006", serde_json::json!({}));
        assert_eq!(insecure(&safe), None);
        let fixed = plain(Some(&s), &Ok("9.1.1".into()), 0, Some(2), at(20));
        assert!(condition::find(&fixed.conditions, ConditionType::Warning).is_none());
    }

    /// The status of a config not being deleted, on a checked transport,
    /// without leader election.
    fn plain(
        old: Option<&ProviderConfigStatus>,
        outcome: &Outcome,
        users: usize,
        generation: Option<i64>,
        now: Time,
    ) -> ProviderConfigStatus {
        status(old, outcome, users, None, (generation, None), now, None)
    }

    #[test]
    fn the_holder_of_the_lease_is_named() {
        let ok = Ok("9.1.1".into());
        let held = status(None, &ok, 0, None, (Some(1), None), at(10), Some("r-1"));
        assert_eq!(held.holder.as_deref(), Some("r-1"));
        assert_eq!(plain(None, &ok, 0, Some(1), at(10)).holder, None);
    }

    #[test]
    fn ready_with_version_users_and_generation() {
        let s = plain(None, &Ok("9.1.1".into()), 3, Some(2), at(10));
        assert!(is_ready(Some(&s)));
        assert_eq!(s.version.as_deref(), Some("9.1.1"));
        assert_eq!(s.users, Some(3));
        assert_eq!(s.observed_generation, Some(2));
        let ready = &s.conditions[0];
        assert_eq!(
            (ready.reason.as_str(), ready.observed_generation),
            ("Available", Some(2))
        );
    }

    #[test]
    fn the_same_outcome_gives_the_same_status() {
        let first = plain(None, &unauthorized(), 0, Some(1), at(10));
        let again = plain(Some(&first), &unauthorized(), 0, Some(1), at(20));
        assert_eq!(first, again, "nothing to write");
        let fixed = plain(Some(&again), &Ok("9.1.1".into()), 0, Some(1), at(30));
        assert_eq!(fixed.conditions[0].last_transition_time, at(30));
        assert_eq!(reason(Some(&fixed)), Some("Available"));
    }

    #[test]
    fn not_ready_says_why_and_shows_no_version() {
        let ready = plain(None, &Ok("9.1.1".into()), 1, Some(1), at(10));
        let s = plain(Some(&ready), &unauthorized(), 1, Some(1), at(20));
        assert!(!is_ready(Some(&s)));
        assert_eq!(reason(Some(&s)), Some("Unauthorized"));
        assert_eq!(s.conditions[0].message.as_deref(), Some("refused"));
        assert_eq!(s.version, None);
    }

    #[test]
    fn a_config_deleted_in_use_says_why_it_stays() {
        let ready = plain(None, &Ok("9.1.1".into()), 2, Some(1), at(10));
        let why = "cannot be deleted: 2 ProxmoxVMs use it: ns/a, ns/b";
        let s = status(
            Some(&ready),
            &Ok("9.1.1".into()),
            2,
            Some(why),
            (Some(1), None),
            at(20),
            None,
        );
        assert!(!is_ready(Some(&s)));
        assert_eq!(reason(Some(&s)), Some("Deleting"));
        assert_eq!(message(Some(&s)), Some(why));
        assert_eq!((s.users, s.version.as_deref()), (Some(2), None));
    }
}
