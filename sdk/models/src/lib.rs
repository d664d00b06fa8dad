//! Serde types of every component schema in `openapi.json`, shared by the SDK, the reference
//! server and the conformance suite.
//!
//! Reading is tolerant and writing strict. Every model a response carries accepts members it
//! does not know, and [`AgentEvent`] keeps an entry of a kind it does not know whole, as
//! [`AgentEvent::Unknown`]: the interface leaves kind names and entry shapes open. Models of
//! request bodies only refuse unknown members. JSON `null` is accepted exactly where the
//! document marks a field nullable. [`digest`] computes a Build's digest. With the `schema`
//! feature, `schema` validates JSON bodies against the document's schemas and `openapi` reads the
//! document: its operations, and its normative view.
//!
//! ```
//! use intent_models::AgentEvent;
//!
//! let event: AgentEvent = serde_json::from_value(serde_json::json!({
//!     "type": "user_input", "seq": 3, "turnId": "turn_1", "text": "hi", "x-trace": "t-1"
//! }))
//! .unwrap();
//! assert_eq!((event.seq(), event.turn_id()), (3, "turn_1"));
//! assert!(matches!(event, AgentEvent::Unknown(ref unknown) if unknown.kind == "user_input"));
//!
//! let update: Result<intent_models::SessionUpdate, _> =
//!     serde_json::from_value(serde_json::json!({ "title": "t", "extra": 1 }));
//! assert!(update.is_err(), "a request model refuses unknown members");
//! ```
//!
//! Every model with members is `#[non_exhaustive]`, so that a member a compatible release adds
//! changes nothing for code outside the crate. Such code makes a model with its builder, whose
//! `try_into()` names a required member left out:
//!
//! ```
//! use intent_models::{Session, SessionUpdate};
//!
//! let update: SessionUpdate = SessionUpdate::builder().archived(Some(true)).try_into().unwrap();
//! assert_eq!(update.archived, Some(true));
//!
//! let missing: Result<Session, _> = Session::builder().id("ses_1").title("t").try_into();
//! assert!(missing.unwrap_err().to_string().contains("archived"));
//! ```

#![forbid(unsafe_code)]

pub mod digest;
mod display;
mod event;
mod open;
#[cfg(any(test, feature = "schema"))]
pub mod openapi;
mod resource;
#[cfg(any(test, feature = "schema"))]
pub mod schema;
mod setter;

#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod generated;

pub use event::{OnePassEvent, UnknownEvent};
pub use generated::*;
pub use open::Open;
pub use resource::ProtectedResource;
pub use setter::{FromText, IntoOptional};
