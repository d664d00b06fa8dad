//! Agent MCP at `/v1/agent/mcp` and Pipeline MCP at `/v1/pipeline/mcp` (part 5.4): two MCP
//! servers over Streamable HTTP (`rmcp`), stateless, so that any instance behind a load balancer
//! answers any request. The gateway guards them like the other resources: a token for that MCP
//! resource carrying `mcp:agent` or `mcp:pipeline`, else 401 naming the resource's metadata or
//! 403 `insufficient_scope`. Their tools are generated from openapi.json ([`tools`]) and call
//! the services through the API router ([`server`]).

mod api;
mod events;
mod result;
mod run_turn;
mod server;
mod tools;

use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use crate::AppState;
use crate::auth::resource::Resource;
use crate::json::Json;

pub use server::McpServer;
pub use tools::Tools;

/// The routes of both MCP resources; their tools call `api`.
pub fn router(state: &AppState, api: &Router) -> Router {
    // Read from openapi.json once per process, whatever the number of servers it runs.
    static AGENT: LazyLock<Arc<Tools>> = LazyLock::new(|| tools("agent"));
    static PIPELINE: LazyLock<Arc<Tools>> = LazyLock::new(|| tools("pipeline"));
    let mut router = Router::new();
    for (resource, tools) in [
        (Resource::AgentMcp, &AGENT),
        (Resource::PipelineMcp, &PIPELINE),
    ] {
        let tools = Arc::clone(tools);
        let server = McpServer::new(state.clone(), resource, tools, api.clone());
        // JSON answers where a call sends no notification (SSE when it does).
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_allowed_hosts(allowed_hosts(state.issuer()));
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        router = router.route_service(resource.path(), service);
    }
    router.layer(axum::middleware::from_fn(no_sessions))
}

/// The tools of the operations of resource `name` (`agent` or `pipeline`).
fn tools(name: &str) -> Arc<Tools> {
    let (document, schemas) = (crate::interface::document(), crate::interface::schemas());
    Arc::new(Tools::from_openapi(document, schemas, name))
}

/// The protocol's answer to a session id: this server issues none, so any is one that has
/// ended, and the client must initialize again without it (404, as the transport says).
async fn no_sessions(request: Request, next: Next) -> Response {
    if !request.headers().contains_key("mcp-session-id") {
        return next.run(request).await;
    }
    let error = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32001,
            "message": "no such session: this server keeps none; send requests without Mcp-Session-Id",
        },
    });
    (StatusCode::NOT_FOUND, Json(error)).into_response()
}

/// The hosts MCP requests may name (rmcp checks `Host` against DNS rebinding): loopback, and
/// the issuer's authority with and without its port.
fn allowed_hosts(issuer: &str) -> Vec<String> {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let authority = issuer
        .split_once("://")
        .map_or(issuer, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    if !authority.is_empty() {
        hosts.push(authority.to_owned());
        if let Some((host, _port)) = authority.rsplit_once(':') {
            hosts.push(host.to_owned());
        }
    }
    hosts
}
