//! What every managed kind runs through, whatever the kind: today the
//! scope of its watch; the envelope around a pass grows here.

pub mod watch;
