//! The CRUD decision, table by table, on a pool-like object: a comment
//! and a set of members, each managed only when the spec names it.

use std::sync::Mutex;

use super::*;

#[derive(Clone, Debug, Default, PartialEq)]
struct Pool {
    comment: Option<String>,
    members: Option<Vec<u32>>,
}

impl Diff for Pool {
    type Patch = Pool;

    fn diff(&self, observed: &Self) -> Option<Pool> {
        let comment = self
            .comment
            .clone()
            .filter(|c| observed.comment.as_ref() != Some(c));
        let members = self
            .members
            .clone()
            .filter(|m| observed.members.as_ref() != Some(m));
        let patch = Pool { comment, members };
        (patch != Pool::default()).then_some(patch)
    }

    fn in_use(&self) -> Option<String> {
        (self.comment.as_deref() == Some("busy")).then(|| "it holds VM 100".to_owned())
    }

    fn absent(&self) -> Option<String> {
        (self.members.as_deref() == Some(&[])).then(|| "no member".to_owned())
    }
}

const ALL: Capabilities = Capabilities {
    create: true,
    update: true,
    delete: true,
};
const OBSERVE_ONLY: Capabilities = Capabilities {
    create: false,
    update: false,
    delete: false,
};

fn want() -> Pool {
    Pool {
        comment: Some("team a".into()),
        members: Some(vec![100, 101]),
    }
}

fn found(comment: &str, ours: bool) -> Observed<Pool> {
    Observed::Found {
        object: Pool {
            comment: Some(comment.into()),
            members: Some(vec![100, 101]),
        },
        ours,
    }
}

/// One row: name, what Proxmox showed, the policies, deleting, the decision.
type Row = (
    &'static str,
    Observed<Pool>,
    Capabilities,
    bool,
    Decision<Pool>,
);

#[test]
fn the_one_call_follows_from_what_was_seen_and_what_is_allowed() {
    let patch = Pool {
        comment: Some("team a".into()),
        members: None,
    };
    let cases: Vec<Row> = vec![
        (
            "absent: created",
            Observed::NotFound,
            ALL,
            false,
            Decision::Call(Call::Create(want())),
        ),
        (
            "absent without Create: said, not created",
            Observed::NotFound,
            OBSERVE_ONLY,
            false,
            Decision::Missing,
        ),
        (
            "as wanted: nothing sent",
            found("team a", true),
            ALL,
            false,
            Decision::UpToDate,
        ),
        (
            "drifted: only the differing field corrected",
            found("hand edited", true),
            ALL,
            false,
            Decision::Call(Call::Update(patch.clone())),
        ),
        (
            "drifted without Update: reported with its patch, not sent",
            found("hand edited", true),
            OBSERVE_ONLY,
            false,
            Decision::Drifted(patch),
        ),
        (
            "another's: never changed",
            found("hand edited", false),
            ALL,
            false,
            Decision::NotOwned,
        ),
        (
            "deleting ours: deleted",
            found("team a", true),
            ALL,
            true,
            Decision::Call(Call::Delete),
        ),
        (
            "deleting ours while it holds something: waits, nothing sent",
            found("busy", true),
            ALL,
            true,
            Decision::InUse("it holds VM 100".into()),
        ),
        (
            "busy without Delete: orphaned all the same",
            found("busy", true),
            OBSERVE_ONLY,
            true,
            Decision::Released { orphaned: true },
        ),
        (
            "deleting without Delete: orphaned",
            found("team a", true),
            OBSERVE_ONLY,
            true,
            Decision::Released { orphaned: true },
        ),
        (
            "deleting another's: left, never deleted",
            found("team a", false),
            ALL,
            true,
            Decision::Released { orphaned: true },
        ),
        (
            "deleting, gone already: released",
            Observed::NotFound,
            ALL,
            true,
            Decision::Released { orphaned: false },
        ),
        (
            "not observed: nothing decided",
            Observed::Unknown("connection refused".into()),
            ALL,
            true,
            Decision::Wait("connection refused".into()),
        ),
    ];
    for (name, observed, caps, deleting, expected) in cases {
        assert_eq!(plan(&want(), &observed, caps, deleting), expected, "{name}");
    }
}

#[test]
fn a_field_the_spec_leaves_out_is_not_managed() {
    let want = Pool {
        comment: None,
        members: Some(vec![100, 101]),
    };
    assert_eq!(
        plan(&want, &found("anything", true), ALL, false),
        Decision::UpToDate
    );
}

#[test]
fn an_absent_want_is_never_created_and_what_exists_is_only_corrected() {
    let empty = Pool {
        comment: Some("team a".into()),
        members: Some(vec![]),
    };
    let why = Decision::Empty("no member".into());
    assert_eq!(plan(&empty, &Observed::NotFound, ALL, false), why);
    assert_eq!(
        plan(&empty, &found("team a", true), ALL, false),
        Decision::Call(Call::Update(Pool {
            comment: None,
            members: Some(vec![])
        })),
        "what exists is still corrected by the kind's diff"
    );
    let corrected = Observed::Found {
        object: empty.clone(),
        ours: true,
    };
    assert_eq!(plan(&empty, &corrected, ALL, false), why);
    assert_eq!(
        plan(&empty, &found("team a", false), ALL, false),
        Decision::NotOwned,
        "never another's"
    );
    assert_eq!(
        plan(&empty, &corrected, ALL, true),
        Decision::Call(Call::Delete),
        "a deletion deletes as ever"
    );
}

/// A fake Proxmox for the pass around the plan: what it shows, and the
/// calls it was sent.
struct Fake {
    shows: Observed<Pool>,
    refuse: Option<String>,
    sent: Mutex<Vec<Call<Pool>>>,
}

impl External for Fake {
    type Object = Pool;

    async fn observe(&self) -> Observed<Pool> {
        self.shows.clone()
    }

    async fn call(&self, call: &Call<Pool>) -> Result<(), String> {
        self.sent.lock().unwrap().push(call.clone());
        match &self.refuse {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }
}

fn fake(shows: Observed<Pool>, refuse: Option<&str>) -> Fake {
    Fake {
        shows,
        refuse: refuse.map(str::to_owned),
        sent: Mutex::new(vec![]),
    }
}

#[tokio::test]
async fn a_pass_sends_its_one_call_only_through_the_fence() {
    let open = || Ok(());
    let ext = fake(Observed::NotFound, None);
    let done = run(&ext, &want(), ALL, false, open).await.unwrap();
    assert_eq!(done.decision, Decision::Call(Call::Create(want())));
    assert_eq!(*ext.sent.lock().unwrap(), [Call::Create(want())]);

    // The hold is gone: nothing sent, the pass fails as fenced.
    let ext = fake(Observed::NotFound, None);
    let fenced = run(&ext, &want(), ALL, false, || {
        Err(Error::Fenced {
            config: "ProviderConfig ns/pve".into(),
        })
    })
    .await;
    assert!(matches!(fenced, Err(Error::Fenced { .. })), "{fenced:?}");
    assert!(ext.sent.lock().unwrap().is_empty());

    // Nothing to do: nothing sent, and the fence is not even asked.
    let ext = fake(found("team a", true), None);
    let done = run(&ext, &want(), ALL, false, || {
        Err(Error::Fenced {
            config: "ProviderConfig ns/pve".into(),
        })
    })
    .await
    .unwrap();
    assert_eq!(done.decision, Decision::UpToDate);

    // A refusal is reported for the status, not an error of the pass.
    let ext = fake(Observed::NotFound, Some("403 Permission check failed"));
    let done = run(&ext, &want(), ALL, false, open).await.unwrap();
    assert_eq!(done.refused.as_deref(), Some("403 Permission check failed"));
}
