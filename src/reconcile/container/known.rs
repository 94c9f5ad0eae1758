//! What a container's last full look found, so that between its full
//! looks (once per the config's `fullLookInterval`) a container at rest
//! costs no request of its own: the shared cluster view, which every pass
//! of the config reads anyway, shows whether it is still as then (the
//! VM's coarse look, `vm::pass::observe::known::coarse`, for containers).

use super::plan::Seen;
use crate::reconcile::inventory::VmView;
use crate::reconcile::runtime::memory::Remembered;

/// The container a full look found, and what the cluster view showed of it
/// then (a view read before the container, never after: a change made
/// after the look shows in a later view, never in this one).
#[derive(Clone, Debug, PartialEq)]
pub struct Looked {
    pub vmid: u32,
    pub seen: Seen,
    pub shape: VmView,
    /// Something was sent to it since (or may have been).
    pub touched: bool,
}

impl Remembered for Looked {
    fn touch(&mut self) {
        self.touched = true;
    }
    fn wrote(&mut self) {}
}

/// The container as its last full look found it, when the view (`listed`)
/// shows it as then: same node, power state, name, tags, pool, memory,
/// cores and root disk size, unlocked, not restarted since. `None`: look at
/// it in full.
pub fn coarse(known: Option<&Looked>, vmid: u32, listed: Option<&VmView>) -> Option<Seen> {
    let known = known.filter(|k| k.vmid == vmid && !k.touched)?;
    let now = listed?;
    let power = match now.status.as_str() {
        "running" => known.seen.running,
        "stopped" => !known.seen.running,
        _ => false,
    };
    let same = now.unchanged_since(&known.shape) && now.node == known.seen.node;
    (same && power).then(|| known.seen.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pve_client::lxc::ContainerConfig;

    fn listed(status: &str, uptime: u64) -> VmView {
        VmView {
            node: "pve".into(),
            running: status == "running",
            status: status.into(),
            uptime: Some(uptime),
            memory: Some(512 << 20),
            cpus: Some(1),
            disk: Some(4 << 30),
            tags: vec!["app".into()],
            ..VmView::default()
        }
    }

    fn looked(running: bool, shape: VmView) -> Looked {
        Looked {
            vmid: 120,
            seen: Seen {
                node: "pve".into(),
                config: ContainerConfig::default(),
                running,
            },
            shape,
            touched: false,
        }
    }

    #[test]
    fn a_container_is_taken_as_last_seen_only_while_the_view_shows_it_as_then() {
        let running = looked(true, listed("running", 100));
        let seen = Some(running.seen.clone());
        let changed = |f: fn(&mut VmView)| {
            let mut v = listed("running", 400);
            f(&mut v);
            v
        };
        let cases: Vec<(&str, Looked, VmView, bool)> = vec![
            ("as then", running.clone(), listed("running", 400), true),
            (
                "memory changed",
                running.clone(),
                changed(|v| v.memory = Some(1 << 30)),
                false,
            ),
            (
                "cores changed",
                running.clone(),
                changed(|v| v.cpus = Some(4)),
                false,
            ),
            (
                "retagged",
                running.clone(),
                changed(|v| v.tags = vec![]),
                false,
            ),
            (
                "moved",
                running.clone(),
                changed(|v| v.node = "pve2".into()),
                false,
            ),
            (
                "locked",
                running.clone(),
                changed(|v| v.lock = Some("backup".into())),
                false,
            ),
            (
                "stopped by hand",
                running.clone(),
                listed("stopped", 0),
                false,
            ),
            ("restarted", running.clone(), listed("running", 20), false),
            (
                "stopped, still stopped",
                looked(false, listed("stopped", 0)),
                listed("stopped", 0),
                true,
            ),
            (
                "something sent since",
                Looked {
                    touched: true,
                    ..running.clone()
                },
                listed("running", 400),
                false,
            ),
        ];
        for (name, known, view, same) in cases {
            let want = same.then(|| known.seen.clone());
            assert_eq!(coarse(Some(&known), 120, Some(&view)), want, "{name}");
        }
        assert_eq!(coarse(Some(&running), 120, None), None, "not listed");
        assert_eq!(coarse(None, 120, Some(&listed("running", 400))), None);
        assert_eq!(
            coarse(Some(&running), 121, Some(&listed("running", 400))),
            None,
            "another VMID"
        );
        assert!(seen.is_some());
    }
}
