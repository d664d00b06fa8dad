//! How an MCP call reaches the HTTP API: in process, through the API router, with a downscoped
//! internal bearer for the caller's account (part 5: the gateway "delegates a downscoped internal
//! bearer"), so that the caller's token never leaves this layer; and who the caller is.

use std::time::Duration;

use axum::Router;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::AppState;
use crate::auth::principal::Principal;
use crate::auth::resource::Resource;
use crate::auth::token::Grant;

/// How long an internal bearer lives: one call.
const INTERNAL_TOKEN_TTL: Duration = Duration::from_secs(60);

/// Responses of the API read into a tool result at most this large.
const RESPONSE_LIMIT: usize = 8 * 1024 * 1024;

/// The HTTP resource behind one MCP resource, reached through the API router.
#[derive(Clone)]
pub struct Api {
    state: AppState,
    /// `AgentMcp` or `PipelineMcp`.
    resource: Resource,
    /// The HTTP resource its tools call.
    target: Resource,
    router: Router,
}

impl Api {
    /// The HTTP resource behind `resource`, reached through `router`.
    pub fn new(state: AppState, resource: Resource, router: Router) -> Self {
        let target = match resource {
            Resource::AgentMcp => Resource::Agent,
            _ => Resource::Pipeline,
        };
        Self {
            state,
            resource,
            target,
            router,
        }
    }

    /// The server's state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The MCP resource.
    pub fn resource(&self) -> Resource {
        self.resource
    }

    /// The HTTP resource its tools call.
    pub fn target(&self) -> Resource {
        self.target
    }

    /// A bearer for the target resource with the caller's scopes of it, for one call.
    fn internal_token(&self, principal: &Principal) -> String {
        let scopes = principal
            .scopes
            .iter()
            .filter(|scope| self.target.scopes().contains(&scope.as_str()))
            .cloned()
            .collect();
        self.state.mint_access_token(&Grant {
            account: principal.account.to_string(),
            scopes,
            resource: self.target.identifier(self.state.issuer()),
            client_id: format!("intent-mcp{}", self.resource.path()),
            ttl: INTERNAL_TOKEN_TTL,
        })
    }

    /// Sends `request` through the API router as `principal`, with a downscoped internal bearer;
    /// the status and the JSON body (`{"status": N}` when there is none).
    pub async fn send(
        &self,
        principal: &Principal,
        mut request: axum::http::Request<axum::body::Body>,
    ) -> Result<(StatusCode, Value), McpError> {
        let bearer = format!("Bearer {}", self.internal_token(principal));
        let bearer = bearer.parse().expect("a minted token is a header value");
        request.headers_mut().insert(header::AUTHORIZATION, bearer);
        let response = match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), RESPONSE_LIMIT)
            .await
            .map_err(|e| McpError::internal_error(format!("reading the response: {e}"), None))?;
        let body = if bytes.is_empty() {
            json!({ "status": status.as_u16() })
        } else {
            serde_json::from_slice(&bytes).map_err(|e| {
                McpError::internal_error(format!("the response is not JSON: {e}"), None)
            })?
        };
        Ok((status, body))
    }
}

/// The principal the gateway put on the HTTP request that carries this message.
pub fn principal(context: &RequestContext<RoleServer>) -> Result<Principal, McpError> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
        .ok_or_else(|| {
            McpError::internal_error("the request reached MCP without the gateway", None)
        })
}
