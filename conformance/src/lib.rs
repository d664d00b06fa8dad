//! Checks a deployment of the Pipeline, Agent and Account interface against `openapi.json`.
//!
//! [`schema`] turns the OpenAPI 3.0 document into JSON Schema validators, so that every body a
//! deployment sends can be checked against the schema the document gives it.

#![forbid(unsafe_code)]

pub mod schema;
