//! The write-through cache of session heads, through which every write to a session reaches the
//! store: the room the services (sessions, turns) and the log share.

mod cache;
pub(crate) mod head;

pub use cache::{DRAFT_SEQ, Entry, SessionCache, WeakCache, Writer};
