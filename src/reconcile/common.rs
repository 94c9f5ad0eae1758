//! The vocabulary every kind uses, naming none of them: what a plan is
//! given (a provider config's state, the scheduler's grants, a task's
//! state, the image cache's answer) and what it asks for (events). Pure
//! types and functions, no I/O.

pub mod event;
pub mod finalizer;
pub mod firewall;
pub mod grants;
pub mod guest_objects;
pub mod image_cache;
pub mod images;
pub mod ip_set;
pub mod look;
pub mod owner;
pub mod provider;
pub mod restore;
pub mod tasks;
pub mod views;
