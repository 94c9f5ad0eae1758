//! The file a container's own OCI pull writes (issue 31's poisoning case):
//! the same reference shares one file, the same name and tag from another
//! registry or repository never does.

use crate::api::container::OciImage;
use crate::reconcile::container::render::oci_pull;

fn volume(reference: &str) -> String {
    oci_pull(&OciImage {
        reference: reference.into(),
        storage: "local".into(),
    })
    .volume("local")
}

#[test]
fn another_registry_with_the_same_name_and_tag_never_shares_the_file() {
    let team_b = volume("docker.io/library/alpine:3.21");
    let team_a = volume("evil.example/team-a/alpine:3.21");
    assert_ne!(team_b, team_a);
    assert_eq!(
        team_b,
        volume("docker.io/library/alpine:3.21"),
        "one file per reference"
    );
    assert!(
        team_b.starts_with("local:vztmpl/alpine_3.21-") && team_b.ends_with(".tar"),
        "{team_b}"
    );
}
