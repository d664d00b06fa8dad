//! Rust SDK for the Pipeline, Agent and Account interface.
//!
//! [`Intent`] is the client of one deployment: one connection pool, and one
//! [`TokenSource`] per [`Resource`], whose token goes on each
//! request as it is sent and is renewed ahead of its expiry and after a 401. Its handles
//! [`agent`](Intent::agent), [`pipeline`](Intent::pipeline) and [`account`](Intent::account)
//! have a plain async method per operation, and the Agent's log streams
//! ([`follow`](agent::Agent::follow), [`follow_sse`](agent::Agent::follow_sse)) outlive the
//! tokens they started with.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use futures_util::StreamExt;
//! use intent_sdk::Intent;
//! use intent_sdk::agent::{Decision, LogItem};
//! use intent_sdk::auth::{CommandToken, Resource, StaticToken};
//!
//! let base = "http://127.0.0.1:8080";
//! let intent = Intent::builder(base)
//!     .token(Resource::Agent, StaticToken::new(std::env::var("INTENT_AGENT_TOKEN")?))
//!     .token(
//!         Resource::Account,
//!         CommandToken::new("intent-server", ["token", "--data-dir", "data", "--sub", "me",
//!             "--scope", "account:usage:read", "--resource", "http://127.0.0.1:8080/v1/account"]),
//!     )
//!     .build()?;
//!
//! let outcome = intent
//!     .agent()
//!     .run_turn("send 0.1 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8", None)
//!     .await?;
//! if let Some(action) = &outcome.action {
//!     intent.agent().resolve(&outcome.session_id, action, Decision::Approve).await?;
//! }
//! let mut log = Box::pin(intent.agent().follow(&outcome.session_id, None));
//! while let Some(item) = log.next().await {
//!     match item {
//!         Ok(LogItem::Event { event, .. }) => println!("{} {}", event.seq(), event.turn_id()),
//!         Ok(LogItem::Restart) => println!("-- the view starts over"),
//!         Ok(LogItem::Snapshot(_)) => {}
//!         // A 403 or a 404 ends the stream; lost connections are retried inside it.
//!         Err(error) => eprintln!("{error}"),
//!     }
//! #   break;
//! }
//! let statement = intent.account().statement(None).await?;
//! println!("{:?}", statement.total);
//! # Ok(())
//! # }
//! ```
//!
//! [`Client`] is generated from `openapi.json` by progenitor, with request and response bodies
//! typed by [`models`] (the `intent-models` crate); [`Intent::client`] reaches it. Its errors
//! ([`GeneratedError`]) convert into the typed [`Error`]. [`build`] checks a Build's digest and
//! attestation offline and commits it byte for byte.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod account;
pub mod agent;
pub mod auth;
mod backoff;
pub mod build;
pub mod error;
#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod generated;
mod hooks;
mod intent;
pub mod pipeline;
mod retry;

#[cfg(feature = "oauth")]
pub use auth::{AuthorizationStart, DeviceCode, OAuth, OAuthTokens};
pub use auth::{CommandToken, Resource, StaticToken, TokenSource, Tokens};
pub use error::{Error, ErrorResponse};
/// The error type of the generated [`Client`]'s methods; convert it with `Error::from`.
pub use generated::Error as GeneratedError;
pub use generated::*;
pub use hooks::ClientContext;
#[cfg(feature = "oauth")]
pub use intent::DeviceLogin;
pub use intent::{Intent, IntentBuilder};
pub use intent_models as models;
pub use retry::RetryPolicy;
