//! The Agent area (parts 3, 4.2 and 6): sessions, turns, the durable event log of each session
//! read by long-poll pages and by SSE, and action resolution. Every call is scoped to the
//! caller's account: another account's session is not found.

pub(crate) mod cursor;
mod error;
pub(crate) mod feed;
mod log;
mod notify;
mod page;
mod recovery;
mod reference;
pub(crate) mod routes;
mod runtime;
mod session_service;
mod sessions;
mod transitions;
mod turn;
mod turn_service;

pub use error::{Error, Refusal, Result};
pub use log::{EventLog, PageRequest, StreamItem};
pub(crate) use notify::{Hub, Notifier, Relay};
pub use page::Page;
pub use reference::ReferenceRuntime;
pub use runtime::Runtime;
pub use session_service::Sessions;
pub(crate) use sessions::{SessionCache, WeakCache};
pub use turn::{RunEnd, Step, ToolOutput, Turn, TurnError};
pub use turn_service::{Drained, Turns, resolution_hash};
