//! Reference server of the Pipeline, Agent and Account interface.
//!
//! A request flows one way: the `http::gateway` verifies its bearer token and hands
//! on a `Principal`; the area's `http` module parses it and calls a service
//! ([`agent::Turns`], [`agent::EventLog`], [`pipeline::Pipeline`], `account::Account`); the
//! service writes the [`store`], sessions through the [`agent::SessionCache`], which wakes the
//! readers of pages and SSE streams. Services know nothing of HTTP, so another front door can call them.
//! [`AppState::open`] opens the data dir; [`app`] builds the router, separate from `main`.

#![forbid(unsafe_code)]

mod account;
pub mod agent;
pub mod auth;
mod clock;
pub mod config;
pub mod error;
mod http;
pub mod ids;
mod interface;
mod json;
mod keys;
mod mcp;
mod oauth;
pub mod pipeline;
mod random;
mod state;
pub mod store;

use axum::Router;
use axum::extract::FromRef;
use axum::response::Response;
use axum::routing::get;
use http::serve::{AnswerBody, AnswerService};

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
    http::serve::serve(
        listener,
        service(&state),
        shutdown,
        http::serve::IDLE_TIMEOUT,
    )
    .await
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
        .route("/healthz", get(http::healthz))
        .route("/readyz", get(http::readyz::<AppState>))
        .route("/openapi.json", get(http::openapi))
        .merge(oauth::wellknown::router())
        .merge(oauth::router())
        // Merged, not nested: each area's routes carry their whole path, so that no request's
        // URI is rebuilt on its way to the handler.
        .merge(account::http::router())
        .merge(agent::http::router())
        .merge(pipeline::http::router())
        .fallback(http::not_found)
        .method_not_allowed_fallback(http::method_not_allowed)
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
        .layer(http::request_log::RequestLog)
        .layer(http::body_limit::BodyLimit {
            max: state.config().body_limit,
        })
        .layer(http::gateway::Gateway::from_ref(state))
        .service(router)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Each top-level module of the crate, with the modules its code outside tests names
    /// (`crate::x`).
    fn imports() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut graph = BTreeMap::new();
        let mut dirs = vec![src.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let relative = path.strip_prefix(&src).unwrap().to_string_lossy();
                let Some(top) = relative
                    .split('/')
                    .next()
                    .map(|top| top.trim_end_matches(".rs"))
                else {
                    continue;
                };
                if !relative.ends_with(".rs") || top == "lib" || top == "main" {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                let named: &mut BTreeSet<String> = graph.entry(top.to_owned()).or_default();
                for (at, _) in code.match_indices("crate::") {
                    let name: String = code[at + "crate::".len()..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != top {
                        named.insert(name);
                    }
                }
            }
        }
        graph
    }

    #[test]
    fn no_module_reaches_itself_through_the_modules_it_imports() {
        let graph = imports();
        assert!(graph.len() >= 10, "the crate's modules are read: {graph:?}");
        for (start, named) in &graph {
            let mut reached = BTreeSet::new();
            let mut next: Vec<&String> = named.iter().collect();
            while let Some(module) = next.pop() {
                assert_ne!(
                    module, start,
                    "an import circle: {start} reaches itself through {reached:?}"
                );
                if reached.insert(module.clone()) {
                    next.extend(graph.get(module).into_iter().flatten());
                }
            }
        }
    }
}
