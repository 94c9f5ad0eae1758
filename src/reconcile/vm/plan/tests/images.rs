//! Disks naming a ProxmoxImage (`disks[].image.name`).

use super::create::ready_to_create;
use super::*;
use crate::api::image::ImageContent;

const VOLUME: &str = "local:import/noble-abcdef012345-01234567.qcow2";

fn naming(w: World, seen: Option<NamedImage>) -> World {
    w.spec(|s| {
        s.disks[0].image = Some(serde_json::from_value(json!({"name": "noble"})).unwrap());
    })
    .observe(|o| {
        if let Some(seen) = seen {
            o.named_images.insert("noble".into(), seen);
        }
    })
}

fn found(ready_on: &[&str], content: ImageContent, deleting: bool) -> NamedImage {
    NamedImage::Found {
        content,
        deleting,
        volume: Some(VOLUME.into()),
        ready_on: ready_on.iter().map(|n| (*n).to_owned()).collect(),
        shared_ready: false,
        summary: Some(format!("{}/2 ready", ready_on.len())),
    }
}

#[test]
fn a_disk_naming_an_image_waits_until_it_is_ready_on_the_node() {
    let creating = Some((F, Reason::Creating));
    run_table(vec![
        (
            "the image does not exist",
            naming(ready_to_create(), Some(NamedImage::NotFound)),
            expect("Wait", (F, Reason::ImageNotFound), creating),
        ),
        (
            "the image cache has not listed yet",
            naming(ready_to_create(), Some(NamedImage::Unknown)),
            expect("Wait", (T, Reason::ImageNotReady), creating),
        ),
        (
            "ready elsewhere only",
            naming(
                ready_to_create(),
                Some(found(&["pve2"], ImageContent::Import, false)),
            ),
            expect("Wait", (T, Reason::ImageNotReady), creating),
        ),
        (
            "an iso is not a disk",
            naming(
                ready_to_create(),
                Some(found(&["pve1"], ImageContent::Iso, false)),
            ),
            expect("Wait", (F, Reason::InvalidSpec), creating),
        ),
        (
            "being deleted: never started on",
            naming(
                ready_to_create(),
                Some(found(&["pve1"], ImageContent::Import, true)),
            ),
            expect("Wait", (T, Reason::ImageNotReady), creating),
        ),
        (
            "ready on the node: created",
            naming(
                ready_to_create(),
                Some(found(&["pve1"], ImageContent::Import, false)),
            ),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
    ]);
}

#[test]
fn the_create_imports_the_image_volume() {
    let w = naming(
        ready_to_create(),
        Some(found(&["pve1"], ImageContent::Import, false)),
    );
    let plan = w.run();
    let Step::Pve(PveCall::CreateVm { params, .. }) = &plan.step else {
        panic!("want CreateVm, got {:?}", plan.step);
    };
    assert_eq!(
        sent(&params.settings).get("scsi0").map(String::as_str),
        Some(format!("local-lvm:0,import-from={VOLUME}").as_str())
    );
    let message = synced_message(
        &naming(
            ready_to_create(),
            Some(found(&["pve2"], ImageContent::Import, false)),
        )
        .run(),
    );
    assert!(
        message.contains("ProxmoxImage default/noble") && message.contains("node pve1"),
        "{message}"
    );
}

#[test]
fn the_named_images_are_looked_up_only_while_creating() {
    let needs = |w: World| match preflight(&w.vm, w.now) {
        Preflight::Observe(needs) => needs.named_images,
        Preflight::Decided(plan) => panic!("decided without looking: {plan:?}"),
    };
    assert_eq!(needs(naming(ready_to_create(), None)), ["noble"]);
    assert!(needs(naming(World::new().created(), None)).is_empty());
}
