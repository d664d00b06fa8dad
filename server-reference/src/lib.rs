//! Reference server of the Pipeline, Agent and Account interface.
//!
//! A request flows one way: the `web::gateway` verifies its bearer token and hands
//! on a `Principal`; the area's `routes` module parses it and calls a service
//! ([`agent::Turns`], [`agent::EventLog`], [`pipeline::Pipeline`], `account::Account`); the
//! service writes the [`store`], sessions through the `agent::SessionCache`, which wakes the
//! readers of pages and SSE streams. Services know nothing of HTTP, so another front door can call them.
//! [`AppState::open`] opens the data dir; [`app`] builds the router, separate from `main`.

#![forbid(unsafe_code)]

mod account;
pub mod agent;
pub mod auth;
mod clock;
pub mod config;
pub mod error;
mod fetch;
pub mod ids;
mod interface;
mod json;
mod keys;
mod mcp;
mod metrics;
mod oauth;
pub mod pipeline;
mod random;
mod state;
pub mod store;
mod web;

use axum::Router;
use axum::extract::FromRef;
use axum::response::Response;
use axum::routing::get;
use web::serve::{AnswerBody, AnswerService};

pub use clock::{now, set_offset as set_clock_offset};

/// Retires the current signing and cursor keys of `data_dir` at `now` (Unix seconds) and makes
/// new ones current; returns the `kid` of the new signing key. A server takes the new keys when
/// it starts.
pub fn rotate_keys(data_dir: &std::path::Path, now: i64) -> std::io::Result<String> {
    agent::cursor::rotate(data_dir, now)?;
    keys::signing::rotate(data_dir, now)
}
pub use state::{AppState, StartError};

/// Serves [`app`] on `listener` until the future is dropped.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    serve_until(listener, state, std::future::pending()).await
}

/// Serves [`app`] on `listener` over HTTP/1.1 until `shutdown` resolves, then lets the open
/// connections finish and returns once they have. Each connection's buffers are bounded and an
/// idle one is closed after 30 seconds (to 36).
pub async fn serve_until(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    web::serve::serve(
        listener,
        service(&state),
        shutdown,
        web::serve::IDLE_TIMEOUT,
    )
    .await
}

/// Serves the metrics, `GET /metrics` in the OpenMetrics text format, on `listener` (an address
/// of their own, apart from the API's) until the future is dropped.
pub async fn serve_metrics(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let metrics = Router::new()
        .route("/metrics", get(web::metrics))
        .fallback(web::not_found);
    axum::serve(listener, metrics).await
}

/// The whole service. The gateway runs on every request and guards the operations of
/// openapi.json, implemented here or not.
///
/// [`serve`] shares it between connections. To serve it with `axum::serve`, give it
/// [`Router::into_make_service`]: given as it is, a `Router` is copied whole for every connection
/// (every route's layered service re-boxed, about 34 KiB here), which a waiting long-poll or an
/// open SSE stream would hold for as long as it lasts.
pub fn app(state: AppState) -> Router {
    Router::new().fallback_service(service(&state))
}

/// What [`app`] routes to, which [`serve`] serves without a router around it.
fn service(state: &AppState) -> impl AnswerService<Response = Response<impl AnswerBody>> {
    let api = Router::new()
        .route("/healthz", get(web::healthz))
        .route("/readyz", get(web::readyz::<AppState>))
        .route("/openapi.json", get(web::openapi))
        .merge(oauth::wellknown::router())
        .merge(oauth::router())
        // Merged, not nested: each area's routes carry their whole path, so that no request's
        // URI is rebuilt on its way to the handler.
        .merge(account::routes::router())
        .merge(agent::routes::router())
        .merge(pipeline::routes::router())
        .fallback(web::not_found)
        .method_not_allowed_fallback(web::method_not_allowed)
        .with_state(state.clone());
    // The MCP resources call the API in process, so they are built on it and then merged in.
    let mcp = mcp::router(
        state,
        &Router::new().fallback_service(guarded(state, api.clone())),
    );
    guarded(state, mcp.merge(api))
}

/// `router` behind the gateway, the body limit and request tracing: every answer carries an
/// `x-request-id` (the request's own, or a new one), which the request's log span names. The
/// layers wrap the router once, not each of its routes (as `Router::layer` does), so that a
/// request clones and boxes no layer's service.
fn guarded(
    state: &AppState,
    router: Router,
) -> impl AnswerService<Response = Response<impl AnswerBody>> {
    tower::ServiceBuilder::new()
        .layer(web::request_log::RequestLog)
        .layer(web::body_limit::BodyLimit {
            max: state.config().body_limit,
        })
        .layer(web::gateway::Gateway::from_ref(state))
        .service(router)
}
