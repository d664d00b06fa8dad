//! The client generated from `openapi.json` by progenitor: one builder per operation, named by
//! its operationId, with request and response bodies typed by [`models`](crate::models).
//! [`Intent::client`](crate::Intent::client) reaches it with the same tokens, retries and
//! timeouts as the handles; reach for it where the handles do not cover a call.
//!
//! ```no_run
//! # async fn run(intent: intent_sdk::Intent) -> Result<(), intent_sdk::Error> {
//! let page = intent
//!     .client()
//!     .get_chat_events()
//!     .session_id("ses_1")
//!     .limit(5u64)
//!     .send()
//!     .await?;
//! println!("{} events", page.events.len());
//! # Ok(())
//! # }
//! ```
//!
//! Its errors ([`Error`]) convert into the SDK's [`Error`](crate::Error) with `?` or `From`.

pub use crate::context::ClientContext;
pub use crate::generated::*;

/// A parameter of the generated client that does not hold its schema.
impl From<types::error::ConversionError> for crate::Error {
    fn from(error: types::error::ConversionError) -> Self {
        crate::error::invalid(error)
    }
}
