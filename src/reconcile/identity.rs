//! Who a ProxmoxVM is, resolved once per pass from its metadata: every
//! later stage (observation, reservations, memory, events) is handed this
//! instead of deriving it again.

use std::fmt;

use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;

use crate::api::vm::VmRef;

/// A resource's namespace, name and UID.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID: the key of everything the controller remembers of it.
    pub uid: String,
}

impl Identity {
    /// The identity of an object as the API server returns it; `None` for
    /// one without a namespace, name or UID (which no stored object lacks).
    pub fn of(meta: &ObjectMeta) -> Option<Self> {
        Some(Self {
            namespace: meta.namespace.clone()?,
            name: meta.name.clone()?,
            uid: meta.uid.clone()?,
        })
    }

    /// No one: what an object without a namespace, name or UID (which the
    /// API server never stores) is taken for. Its empty UID matches no
    /// owner marker, so it owns nothing.
    pub fn nobody() -> Self {
        Self {
            namespace: String::new(),
            name: String::new(),
            uid: String::new(),
        }
    }

    /// The reference the controller queues passes by.
    pub fn object_ref(&self) -> VmRef {
        ObjectRef::new(&self.name).within(&self.namespace)
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_without_a_uid_has_no_identity() {
        let mut meta = ObjectMeta {
            namespace: Some("team-a".into()),
            name: Some("web".into()),
            uid: Some("u-1".into()),
            ..ObjectMeta::default()
        };
        let id = Identity::of(&meta).unwrap();
        assert_eq!(id.to_string(), "team-a/web");
        assert_eq!(id.object_ref().name, "web");
        meta.uid = None;
        assert_eq!(Identity::of(&meta), None);
    }
}
