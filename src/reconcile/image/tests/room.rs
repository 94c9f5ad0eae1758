//! A download Proxmox reports larger than the storage's free space is
//! not sent.

use super::*;
use crate::reconcile::image::plan::Room;

fn with_room(room: Option<Room>) -> Site {
    let mut site = seen(&[], None, vec![]);
    if let Site::Seen { room: r, .. } = &mut site {
        *r = room;
    }
    site
}

#[test]
fn a_download_larger_than_the_free_space_is_not_sent() {
    let img = image(url_spec(), json!({}));
    let gib = 1u64 << 30;
    // (row, room, downloads, Synced reason)
    let rows: Vec<(&str, Option<Room>, bool, &str)> = vec![
        (
            "200 GiB into 100 GiB free",
            Some(Room {
                size: 200 * gib,
                avail: 100 * gib,
            }),
            false,
            "InsufficientStorage",
        ),
        (
            "one byte more than free",
            Some(Room {
                size: gib + 1,
                avail: gib,
            }),
            false,
            "InsufficientStorage",
        ),
        (
            "exactly the free space",
            Some(Room {
                size: gib,
                avail: gib,
            }),
            true,
            "DownloadingImage",
        ),
        ("a size Proxmox cannot tell", None, true, "DownloadingImage"),
    ];
    for (row, room, downloads, want) in rows {
        let p = run(
            &img,
            World::Seen(vec![at("pve1", with_room(room))]),
            Users::default(),
        );
        assert_eq!(!calls(&p).is_empty(), downloads, "{row}");
        let synced = find(&p.status.conditions, ConditionType::Synced).unwrap();
        assert_eq!(synced.reason, want, "{row}");
        if !downloads {
            let message = synced.message.clone().unwrap_or_default();
            let r = room.unwrap();
            for part in [
                "spec.forProvider.source.url".to_owned(),
                r.size.to_string(),
                r.avail.to_string(),
            ] {
                assert!(message.contains(&part), "{row}: {message}");
            }
            let loc = &p.status.at_provider.locations[0];
            assert_eq!(loc.phase, LocationPhase::Pending, "{row}");
            // Looked at again after the resync, not at once.
            assert_eq!(
                p.requeue,
                Some(timing().resync),
                "{row}: re-checked after the resync"
            );
        }
    }
}
