#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod account;
pub mod agent;
pub mod auth;
mod context;
pub mod error;
#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod generated;
mod hooks;
mod intent;
pub mod pipeline;
pub mod raw;
mod resource;
mod retry;
pub mod sealed;

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

/// The repository's README, so that its Rust snippet compiles as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct RepositoryReadme;
