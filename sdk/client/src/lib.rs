//! Rust SDK for the Pipeline, Agent and Account interface.
//!
//! [`Intent`] is the client of one deployment: one connection pool, and one
//! [`TokenSource`] per [`Resource`], whose token goes on each
//! request as it is sent and is renewed ahead of its expiry and after a 401. Its handles
//! [`agent`](Intent::agent), [`pipeline`](Intent::pipeline) and [`account`](Intent::account)
//! have a plain async method per operation, and the Agent's log streams
//! ([`follow`](agent::Agent::follow), [`follow_sse`](agent::Agent::follow_sse), and
//! [`follow_turn`](agent::Agent::follow_turn), which ends when the turn settles) outlive the
//! tokens they started with. `examples/quickstart.rs` is a new app's first program: a chat to a
//! settled turn, a Build verified offline, the usage statement, an error and its request id.
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
//! let mut log = intent.agent().follow(&outcome.session_id, None);
//! while let Some(item) = log.next().await {
//!     match item {
//!         Ok(LogItem::Event { event, .. }) => println!("{event}"), // `#3 message assistant: ...`
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
//! Errors carry the id the deployment gave the request ([`Error::request_id`]), for its logs.
//! The models are [`models`] (the `intent-models` crate). [`raw`] is the client generated from
//! `openapi.json`, for any call the handles do not cover; [`build`] checks a Build's digest and
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
pub mod raw;
mod retry;

#[cfg(feature = "oauth")]
pub use auth::{AuthorizationStart, DeviceCode, OAuth, OAuthTokens};
pub use auth::{CommandToken, Resource, StaticToken, TokenSource, Tokens};
pub use error::{Error, ErrorResponse, RequestId};
#[cfg(feature = "oauth")]
pub use intent::DeviceLogin;
pub use intent::{Intent, IntentBuilder};
/// The models of every schema of `openapi.json` (the `intent-models` crate).
#[doc(inline)]
pub use intent_models as models;
pub use retry::RetryPolicy;
