//! Rust SDK for the Pipeline, Agent and Account interface.
//!
//! [`Client`] is generated from `openapi.json` by progenitor: one method per endpoint, with
//! request and response bodies typed by [`models`] (the `intent-models` crate). Its errors
//! ([`GeneratedError`]) convert into the typed [`Error`], whose variants say what went wrong.
//! [`auth`] holds one token per resource and refreshes on 401; [`agent`] waits for turns, follows a session's log as a stream, and resolves actions;
//! [`build`] checks a Build's digest and attestation offline and commits it byte for byte.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = intent_sdk::Client::new("http://127.0.0.1:8080");
//! // Path parameters are checked types: a session id longer than 160 characters is refused here.
//! let session_id = "ses_01JD7Z4W9Q0M3V5B8K2N6T1R4X".parse()?;
//! match client.get_session(&session_id).await.map_err(intent_sdk::Error::from) {
//!     Ok(session) => println!("{}", session.title),
//!     Err(intent_sdk::Error::Forbidden { scope, .. }) => eprintln!("the token needs {scope:?}"),
//!     Err(other) => return Err(other.into()),
//! }
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod agent;
pub mod auth;
pub mod build;
pub mod error;
#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod generated;

pub use error::{Error, ErrorResponse};
/// The error type of the generated [`Client`]'s methods; convert it with `Error::from`.
pub use generated::Error as GeneratedError;
pub use generated::*;
pub use intent_models as models;
