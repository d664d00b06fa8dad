//! One MCP server (Agent MCP or Pipeline MCP): lists the tools the token's scopes allow and runs
//! a call as the HTTP request of its operation, sent through [`Api`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use intent_models::Scope;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourceTemplatesRequestMethod,
    ListResourceTemplatesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscribeRequestMethod, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestMethod,
    UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::task::AbortHandle;

use super::api::{Api, principal};
use super::events;
use super::result::{answered, refused};
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
    subscriptions: Arc<Subscriptions>,
}

/// A handshake session's `resources/subscribe` followers by URI, ended when unsubscribed or
/// when the session's server is dropped.
#[derive(Debug, Default)]
struct Subscriptions(Mutex<HashMap<String, AbortHandle>>);

impl Subscriptions {
    /// Runs `follower` for `uri`, in place of any before it.
    fn start(&self, uri: String, follower: impl Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(follower).abort_handle();
        let mut followers = self.0.lock().expect("no follower panics holding the lock");
        if let Some(before) = followers.insert(uri, handle) {
            before.abort();
        }
    }

    /// Ends the follower of `uri`, if any.
    fn end(&self, uri: &str) {
        let mut followers = self.0.lock().expect("no follower panics holding the lock");
        if let Some(handle) = followers.remove(uri) {
            handle.abort();
        }
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        let followers = self.0.get_mut().map(std::mem::take).unwrap_or_default();
        followers.values().for_each(AbortHandle::abort);
    }
}

impl McpServer {
    /// The server of `resource`, calling its HTTP resource through `api`.
    pub fn new(state: AppState, resource: Resource, tools: Arc<Tools>, api: Router) -> Self {
        Self {
            api: Api::new(state, resource, api),
            tools,
            subscriptions: Arc::default(),
        }
    }

    /// This server for one session (or one stateless request): subscriptions of its own.
    pub fn for_session(&self) -> Self {
        Self {
            api: self.api.clone(),
            tools: Arc::clone(&self.tools),
            subscriptions: Arc::default(),
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

/// What Agent MCP is for, and how a turn goes, for the model.
const AGENT_INSTRUCTIONS: &str = "An agent that acts on chain for the user: it answers a message \
in a turn, calling tools (building and simulating transactions) as it goes, and asks for \
approval before anything is committed. Call run_turn with the user's message (and the sessionId \
of an earlier turn to continue that conversation): it waits until the turn ends and returns its \
state, the assistant's messages and the cursor. When the state is awaiting_action, the turn \
waits on the user: the action holds a Build and what its simulation says it would do (balance \
changes, fees, guards). Show that to the user; if your client supports elicitation, run_turn \
asks the user itself. Otherwise call resolveAction with the user's decision, then run_turn or \
getChatEvents to follow the rest of the turn. Every result is JSON, also as text; an error \
result says what went wrong and what to change.";

/// What Pipeline MCP is for, for the model.
const PIPELINE_INSTRUCTIONS: &str = "Builds and simulates transactions on EVM chains and SVM \
clusters from the apps' operations. Find the app and operation with listPipelineApps and \
getAppOperation, then call evmBuild or svmStage with a build request: the Build you get back is \
simulated, with its balance changes, fees and guards, and nothing is signed or sent. Committing \
a Build sends it, so do it only with the user's approval (and the custody:delegate scope). Every \
result is JSON, also as text; an error result says what went wrong and what to change.";

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
        let instructions = match self.api.resource() {
            Resource::AgentMcp => AGENT_INSTRUCTIONS,
            _ => PIPELINE_INSTRUCTIONS,
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(name, env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }

    /// A handshake client's subscription to a session's log: each append is told over its
    /// session until it unsubscribes, the session ends or the token expires.
    #[allow(deprecated)] // the handshake revisions' method, which their clients still send
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if self.api.resource() != Resource::AgentMcp {
            return Err(McpError::method_not_found::<SubscribeRequestMethod>());
        }
        let principal = principal(&context)?;
        let follower =
            events::follow(&self.api, &principal, request.uri.clone(), context.peer).await?;
        self.subscriptions.start(request.uri, follower);
        Ok(())
    }

    #[allow(deprecated)] // as `subscribe`
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if self.api.resource() != Resource::AgentMcp {
            return Err(McpError::method_not_found::<UnsubscribeRequestMethod>());
        }
        self.subscriptions.end(&request.uri);
        Ok(())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        match self.api.resource() {
            Resource::AgentMcp => Ok(events::templates()),
            // No resources are advertised here, so none are listed: as `resources/list`.
            _ => Err(McpError::method_not_found::<
                ListResourceTemplatesRequestMethod,
            >()),
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
                return Ok(refused(violation));
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
            return Ok(refused(format!(
                "the arguments do not hold against {}'s input schema: {violation}",
                request.name
            )));
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
        let http = match tool.request(&arguments) {
            Ok(http) => http,
            Err(reason) => return Ok(refused(reason)),
        };
        let (status, body) = self.api.send(&principal, http).await?;
        if status.is_success() {
            return Ok(answered(body));
        }
        // The error envelope as text only: the structured content is the tool's declared
        // output, which an error is not.
        Ok(refused(format!(
            "{} answered {status}: {body}",
            request.name
        )))
    }
}
