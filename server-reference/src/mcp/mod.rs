//! Agent MCP at `/v1/agent/mcp` and Pipeline MCP at `/v1/pipeline/mcp` (part 5.4): two MCP
//! servers over Streamable HTTP (`rmcp`). Revision 2026-07-28 is stateless, so that any
//! instance behind a load balancer answers any request; a client of a handshake revision gets
//! a session, kept in the memory of the instance that took its `initialize`, through which the
//! server asks it for approvals and tells it of appends. The gateway guards them like the other resources: a token for that MCP
//! resource carrying `mcp:agent` or `mcp:pipeline`, else 401 naming the resource's metadata or
//! 403 `insufficient_scope`. Their tools are generated from openapi.json ([`tools`]) and call
//! the services through the API router ([`server`]).

mod api;
mod events;
mod owners;
mod portable;
mod result;
mod run_turn;
mod server;
mod tools;

use std::sync::{Arc, LazyLock};

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::AppState;
use crate::auth::resource::Resource;

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
        // Sessions for the handshake revisions; JSON answers where a stateless call sends no
        // notification (SSE when it does).
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(true)
            .with_json_response(true)
            .with_allowed_hosts(allowed_hosts(state.issuer()));
        let service = StreamableHttpService::new(
            move || Ok(server.for_session()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        router = router.route_service(resource.path(), service);
    }
    let owners = Arc::new(owners::Owners::default());
    router.layer(axum::middleware::from_fn_with_state(owners, owners::guard))
}

/// The tools of the operations of resource `name` (`agent` or `pipeline`).
fn tools(name: &str) -> Arc<Tools> {
    let (document, schemas) = (crate::interface::document(), crate::interface::schemas());
    Arc::new(Tools::from_openapi(document, schemas, name))
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
