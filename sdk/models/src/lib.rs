//! Serde types of every component schema in `openapi.json`, shared by the SDK, the reference
//! server and the conformance suite.
//!
//! The types keep the document's strictness: the simulation objects (`PipelineSimulation` and
//! the entries it holds) refuse unknown fields, and JSON `null` is accepted exactly where the
//! document marks a field nullable. [`digest`] computes a Build's digest. With the `schema`
//! feature, `schema` validates JSON bodies against the document's schemas.
//!
//! ```
//! let simulation: Result<intent_models::PipelineSimulation, _> = serde_json::from_value(
//!     serde_json::json!({
//!         "status": "passed", "balanceChanges": [], "approvals": [], "fees": [],
//!         "warnings": [], "guards": [], "gas": null, "logs": [], "extra": 1
//!     }),
//! );
//! assert!(simulation.is_err(), "unknown fields are refused");
//! ```

#![forbid(unsafe_code)]

pub mod digest;
mod event;
#[cfg(any(test, feature = "schema"))]
pub mod schema;

#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod generated;

pub use generated::*;
