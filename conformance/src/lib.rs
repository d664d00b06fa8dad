//! Checks a deployment of the Pipeline, Agent and Account interface against `openapi.json` and
//! the interface document.
//!
//! Each [`checks::Check`] tests one requirement, with its category, its section of the document
//! and its level: normative, or profile when it rests on an element of openapi.json marked
//! `x-profile: reference`. [`suite::run`] takes them against a [`target::Target`] (any base URL,
//! or the [`embedded`] reference server), validating every response body it sees against its
//! schema (`intent_models::schema`); [`report`] renders the outcome for people and for CI.
//! [`proxy::Proxy`] stands between an app and a deployment instead, judging their live traffic
//! with the same validators and levels and reporting it the same way.

#![forbid(unsafe_code)]

pub mod baseline;
pub mod breaks;
pub mod checks;
pub mod config;
pub mod discover;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod exchange;
pub mod facts;
pub mod finding;
pub mod generate;
pub mod inputs;
pub mod keys;
pub mod means;
pub mod proxy;
pub mod report;
pub mod spec;
pub mod sse;
pub mod suite;
pub mod target;
