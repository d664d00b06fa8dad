//! One MCP server (Agent MCP or Pipeline MCP): lists the tools the token's scopes allow and runs
//! a call as the HTTP request of its operation, sent through [`Api`].

use std::sync::Arc;

use axum::Router;
use intent_models::Scope;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;

use super::api::{Api, principal};
use super::events;
use super::run_turn;
use super::tools::Tools;
use crate::AppState;
use crate::auth::principal::Principal;
use crate::auth::resource::Resource;

/// The scope that lets an MCP client commit a Build: delegated custody (part 5).
const CUSTODY: Scope = Scope::CustodyDelegate;

/// An MCP server for one MCP resource, over the HTTP resource behind it.
#[derive(Clone)]
pub struct McpServer {
    api: Api,
    tools: Arc<Tools>,
}

impl McpServer {
    /// The server of `resource`, calling its HTTP resource through `api`.
    pub fn new(state: AppState, resource: Resource, tools: Arc<Tools>, api: Router) -> Self {
        Self {
            api: Api::new(state, resource, api),
            tools,
        }
    }

    /// Whether `run_turn` is among this server's tools for `principal`.
    fn runs_turns(&self, principal: &Principal) -> bool {
        self.api.resource() == Resource::AgentMcp
            && run_turn::SCOPES
                .iter()
                .all(|s| principal.has_scope(s.as_str()))
    }
}

fn refused(reason: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(reason)]).into()
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let name = match self.api.resource() {
            Resource::AgentMcp => "intent-agent",
            _ => "intent-pipeline",
        };
        let capabilities = match self.api.resource() {
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
        match self.api.resource() {
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
        if self.api.resource() != Resource::AgentMcp
            || !principal.has_scope(Scope::AgentRead.as_str())
        {
            let message = format!("{} is not a resource this token may read", request.uri);
            return Err(McpError::resource_not_found(message, None));
        }
        Ok(events::read(&self.api, &principal, &request.uri)
            .await?
            .into())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        (self.api.resource() == Resource::AgentMcp).then(|| events::accepted(requested))?
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        events::listen(&self.api, context).await
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
            .filter(|tool| principal.has_scope(&tool.scope))
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
        if self.api.resource() == Resource::AgentMcp && request.name == run_turn::NAME {
            if !self.runs_turns(&principal) {
                let needs = run_turn::SCOPES.map(Scope::as_str).join(" and ");
                return Ok(refused(format!("{} needs scopes {needs}", run_turn::NAME)));
            }
            if let Some(violation) = run_turn::violation(&request) {
                return Err(McpError::invalid_params(violation, None));
            }
            return run_turn::run(&self.api, &principal, request, &context).await;
        }
        let Some(tool) = self.tools.get(&request.name) else {
            let message = format!("no tool named {}", request.name);
            return Err(McpError::invalid_params(message, None));
        };
        if !principal.has_scope(&tool.scope) {
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
        if self.api.target() == Resource::Pipeline
            && commits
            && !principal.has_scope(CUSTODY.as_str())
        {
            return Ok(refused(format!(
                "committing a Build through MCP is delegated custody: it needs scope {CUSTODY} \
                 (part 5), which the token lacks; commit through the Pipeline with the \
                 person's own approval instead"
            )));
        }
        let http = tool
            .request(&arguments)
            .map_err(|reason| McpError::invalid_params(reason, None))?;
        let (status, body) = self.api.send(&principal, http).await?;
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
