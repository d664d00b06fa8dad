//! One MCP server (Agent MCP or Pipeline MCP): lists the tools the token's scopes allow and runs
//! a call as the HTTP request of its operation, sent in process through the API router with a
//! downscoped internal bearer for the caller's account (part 5: the gateway "delegates a
//! downscoped internal bearer"). The caller's token never leaves this layer.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::events;
use super::run_turn;
use super::tools::Tools;
use crate::AppState;
use crate::principal::Principal;
use crate::resource::Resource;
use crate::token::Grant;

/// How long an internal bearer lives: one call.
const INTERNAL_TOKEN_TTL: Duration = Duration::from_secs(60);

/// Responses of the API read into a tool result at most this large.
const RESPONSE_LIMIT: usize = 8 * 1024 * 1024;

/// The scope that lets an MCP client commit a Build: delegated custody (part 5).
const CUSTODY: &str = "custody:delegate";

/// An MCP server for one MCP resource, over the HTTP resource behind it.
#[derive(Clone)]
pub struct McpServer {
    state: AppState,
    /// `AgentMcp` or `PipelineMcp`.
    resource: Resource,
    /// The HTTP resource its tools call.
    target: Resource,
    tools: Arc<Tools>,
    api: Router,
}

impl McpServer {
    /// The server of `resource`, calling its HTTP resource through `api`.
    pub fn new(state: AppState, resource: Resource, tools: Arc<Tools>, api: Router) -> Self {
        let target = match resource {
            Resource::AgentMcp => Resource::Agent,
            _ => Resource::Pipeline,
        };
        Self {
            state,
            resource,
            target,
            tools,
            api,
        }
    }

    /// The server's state.
    pub(super) fn state(&self) -> &AppState {
        &self.state
    }

    /// Whether `run_turn` is among this server's tools for `principal`.
    fn runs_turns(&self, principal: &Principal) -> bool {
        self.resource == Resource::AgentMcp && run_turn::SCOPES.iter().all(|s| has(principal, s))
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
            account: principal.account.clone(),
            scopes,
            resource: self.target.identifier(self.state.issuer()),
            client_id: format!("intent-mcp{}", self.resource.path()),
            ttl: INTERNAL_TOKEN_TTL,
        })
    }
}

impl McpServer {
    /// Sends `request` through the API router as `principal`, with a downscoped internal bearer;
    /// the status and the JSON body (`{"status": N}` when there is none).
    pub(super) async fn send(
        &self,
        principal: &Principal,
        mut request: axum::http::Request<axum::body::Body>,
    ) -> Result<(StatusCode, Value), McpError> {
        let bearer = format!("Bearer {}", self.internal_token(principal));
        let bearer = bearer.parse().expect("a minted token is a header value");
        request.headers_mut().insert(header::AUTHORIZATION, bearer);
        let response = match self.api.clone().oneshot(request).await {
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
pub(super) fn principal(context: &RequestContext<RoleServer>) -> Result<Principal, McpError> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
        .ok_or_else(|| {
            McpError::internal_error("the request reached MCP without the gateway", None)
        })
}

pub(super) fn has(principal: &Principal, scope: &str) -> bool {
    principal.scopes.iter().any(|held| held == scope)
}

fn refused(reason: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(reason)]).into()
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let name = match self.resource {
            Resource::AgentMcp => "intent-agent",
            _ => "intent-pipeline",
        };
        let capabilities = match self.resource {
            // A session's log is a resource whose subscribers hear of appends.
            Resource::AgentMcp => ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
            _ => ServerCapabilities::builder().enable_tools().build(),
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(name, env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools are the operations of openapi.json, named by operationId; a tool's \
                 result is the operation's JSON response, and an error result carries its \
                 error envelope.",
            )
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        match self.resource {
            Resource::AgentMcp => Ok(events::templates()),
            _ => Ok(ListResourceTemplatesResult::default()),
        }
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let principal = principal(&context)?;
        if self.resource != Resource::AgentMcp || !has(&principal, "agent:read") {
            let message = format!("{} is not a resource this token may read", request.uri);
            return Err(McpError::resource_not_found(message, None));
        }
        Ok(events::read(self, &principal, &request.uri).await?.into())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        (self.resource == Resource::AgentMcp).then(|| events::accepted(requested))?
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        events::listen(self, context).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let principal = principal(&context)?;
        let mut tools: Vec<_> = self
            .tools
            .iter()
            .filter(|tool| has(&principal, &tool.scope))
            .map(|tool| tool.tool.clone())
            .collect();
        if self.runs_turns(&principal) {
            tools.push(run_turn::tool());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let principal = principal(&context)?;
        if self.resource == Resource::AgentMcp && request.name == run_turn::NAME {
            if !self.runs_turns(&principal) {
                let needs = run_turn::SCOPES.join(" and ");
                return Ok(refused(format!("{} needs scopes {needs}", run_turn::NAME)));
            }
            if let Some(violation) = run_turn::violation(&request) {
                return Err(McpError::invalid_params(violation, None));
            }
            return run_turn::run(self, &principal, request, &context).await;
        }
        let Some(tool) = self.tools.get(&request.name) else {
            let message = format!("no tool named {}", request.name);
            return Err(McpError::invalid_params(message, None));
        };
        if !has(&principal, &tool.scope) {
            let reason = format!(
                "{} needs scope {}, which the token lacks",
                request.name, tool.scope
            );
            return Ok(refused(reason));
        }
        let arguments = request.arguments.unwrap_or_default();
        if let Some(violation) = tool.violation(&Value::Object(arguments.clone())) {
            return Err(McpError::invalid_params(
                format!("the arguments do not hold against the input schema: {violation}"),
                None,
            ));
        }
        let commits = arguments
            .get("body")
            .is_some_and(|body| body.get("attestation").is_some());
        if self.target == Resource::Pipeline && commits && !has(&principal, CUSTODY) {
            return Ok(refused(format!(
                "committing a Build through MCP is delegated custody: it needs scope {CUSTODY} \
                 (part 5), which the token lacks; commit through the Pipeline with the \
                 person's own approval instead"
            )));
        }
        let http = tool
            .request(&arguments)
            .map_err(|reason| McpError::invalid_params(reason, None))?;
        let (status, body) = self.send(&principal, http).await?;
        let mut result = if status.is_success() {
            CallToolResult::structured(body)
        } else {
            CallToolResult::structured_error(body)
        };
        // The JSON is the structured content; the text only says what happened.
        let summary = format!("{} answered {status}", request.name);
        result.content = vec![ContentBlock::text(summary)];
        Ok(result.into())
    }
}
