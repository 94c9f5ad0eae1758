//! The IP set's managed fields and how drift in them is corrected, pure
//! ([`crate::reconcile::common::ip_set`], shared with a guest's own sets).

pub use crate::reconcile::common::ip_set::{Entry, Set, SetPatch, clean, entries};
use crate::reconcile::managed::crud::Diff;

impl Diff for Set {
    type Patch = SetPatch;

    fn diff(&self, observed: &Self) -> Option<SetPatch> {
        self.patch(observed)
    }
}
