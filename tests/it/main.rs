//! Workspace integration tests, one binary with a module per subject.

mod account;
mod agent;
mod agent_sse;
mod auth_matrix;
mod conformance;
mod conformance_mock;
mod conformance_variations;
mod deployment;
mod fronts;
mod key_rotation;
mod mcp;
mod model_strictness;
mod numeric_limits;
mod oauth;
mod openapi_examples;
mod openapi_facts;
mod pipeline;
mod pipeline_svm;
mod proxy;
mod sdk_agent;
mod sdk_auth;
mod sdk_contract;
mod sdk_resilience;
mod server_basics;
mod services;
mod store;
