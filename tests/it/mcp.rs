//! Agent MCP and Pipeline MCP through rmcp's client against the real server: discovery from a
//! 401 to a device-flow token, tools listed by scope, calls that match the HTTP API, the
//! custody rule on commits, and the protocol's errors for bad input.

use std::collections::BTreeSet;

use intent_server::auth::resource::Resource;
use intent_tests::TestServer;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::oauth::decide;

type Client = RunningService<RoleClient, ()>;

/// An rmcp client of `resource` (AgentMcp or PipelineMcp) carrying `token`.
async fn connect(server: &TestServer, resource: Resource, token: &str) -> Client {
    ().serve(transport(server, resource, token))
        .await
        .expect("the MCP server initializes")
}

/// The Streamable HTTP transport to `resource`, carrying `token`.
fn transport(
    server: &TestServer,
    resource: Resource,
    token: &str,
) -> StreamableHttpClientTransport<reqwest::Client> {
    let uri = resource.identifier(server.base_url());
    let config = StreamableHttpClientTransportConfig::with_uri(uri).auth_header(token);
    StreamableHttpClientTransport::from_config(config)
}

fn mcp_token(server: &TestServer, resource: Resource, scopes: &[&str]) -> String {
    server.token("alice", resource, scopes)
}

/// An rmcp client of `resource` for alice with `scopes`, through the `initialize` handshake.
async fn client_for(server: &TestServer, resource: Resource, scopes: &[&str]) -> Client {
    connect(server, resource, &mcp_token(server, resource, scopes)).await
}

/// An rmcp client of `resource` for alice with `scopes`, answering as `handler`, in the current
/// revision: each request carries the client's capabilities, so a stateless server knows whether
/// it can elicit.
async fn modern<H: rmcp::ClientHandler>(
    server: &TestServer,
    resource: Resource,
    scopes: &[&str],
    handler: H,
) -> RunningService<RoleClient, H> {
    let token = mcp_token(server, resource, scopes);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    handler
        .serve_with_lifecycle(transport(server, resource, &token), lifecycle)
        .await
        .expect("the MCP server answers discovery")
}

/// An rmcp client of `resource` for alice with `scopes`, answering as `handler`, through the
/// `initialize` handshake: it holds a session, over which the server may ask and tell it.
async fn handshake<H: rmcp::ClientHandler>(
    server: &TestServer,
    resource: Resource,
    scopes: &[&str],
    handler: H,
) -> RunningService<RoleClient, H> {
    let token = mcp_token(server, resource, scopes);
    handler
        .serve(transport(server, resource, &token))
        .await
        .expect("the MCP server initializes")
}

/// The names `tools/list` gives `client`.
async fn tool_names<H: rmcp::ClientHandler>(client: &RunningService<RoleClient, H>) -> Vec<String> {
    let tools = client
        .list_all_tools()
        .await
        .expect("tools/list is answered");
    tools
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

fn arguments(value: Value) -> JsonObject {
    value.as_object().expect("arguments are an object").clone()
}

/// The result of calling `tool`; a model that reads only text content reads all of it: an
/// answer's text is the JSON of its structured content, an error's is its only content.
async fn call<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let request = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments(args));
    let result = client
        .call_tool(request)
        .await
        .expect("the call is answered");
    let text = result_text(&result);
    match result.is_error {
        Some(true) => {
            assert!(result.structured_content.is_none(), "{result:?}");
            assert!(!text.is_empty());
        }
        _ => {
            let structured = result
                .structured_content
                .as_ref()
                .expect("structured content");
            assert_eq!(&serde_json::from_str::<Value>(&text).unwrap(), structured);
        }
    }
    result
}

/// The text content of `result`, in one string.
fn result_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect()
}

fn transfer() -> Value {
    json!({
        "app": "evm-assets",
        "operations": [{
            "operation": "native-transfer",
            "input": {
                "chainId": 31337,
                "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
                "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
                "amount": "0.5",
            },
        }],
    })
}

/// A Build without the members that depend on when it was made.
fn timeless(mut build: Value) -> Value {
    for member in ["expiresAt", "digest", "attestation"] {
        build.as_object_mut().unwrap().remove(member);
    }
    build
}

#[tokio::test]
async fn tools_are_listed_by_scope_and_a_catalog_tool_answers_like_the_api() {
    let server = TestServer::start().await;
    let scopes = ["mcp:pipeline", "pipeline:catalog"];
    let client = client_for(&server, Resource::PipelineMcp, &scopes).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    let unique: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "unique names: {names:?}");
    assert_eq!(
        unique,
        BTreeSet::from([
            "callSkillOperation",
            "getAppOperation",
            "listPipelineApps",
            "listPipelineSkills"
        ]),
        "catalog tools only"
    );
    for tool in &tools {
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
    }

    let apps = call(&client, "listPipelineApps", json!({})).await;
    assert_eq!(apps.is_error, Some(false));
    let listed = apps.structured_content.unwrap();
    let catalog = server.token("alice", Resource::Pipeline, &["pipeline:catalog"]);
    let direct: Value = server
        .get("/v1/pipeline/apps", &catalog)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed, direct);

    // A tool beyond the token's scopes is a tool error naming the scope.
    let refused = call(&client, "evmBuild", json!({ "body": transfer() })).await;
    assert_eq!(refused.is_error, Some(true));
    let text = format!("{:?}", refused.content);
    assert!(text.contains("pipeline:execute"), "{text}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_build_through_mcp_is_the_http_build_and_a_commit_needs_delegated_custody() {
    let server = TestServer::start().await;
    let scopes = ["mcp:pipeline", "pipeline:execute"];
    let client = client_for(&server, Resource::PipelineMcp, &scopes).await;
    let built = call(&client, "evmBuild", json!({ "body": transfer() })).await;
    assert_eq!(built.is_error, Some(false), "{:?}", built.content);
    let through_mcp = built.structured_content.unwrap();
    let execute = server.token("alice", Resource::Pipeline, &["pipeline:execute"]);
    let through_http: Value = reqwest::Client::new()
        .post(format!("{}/v1/pipeline/evm/build", server.base_url()))
        .bearer_auth(&execute)
        .json(&transfer())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(timeless(through_mcp.clone()), timeless(through_http));

    let refused = call(&client, "evmBuild", json!({ "body": through_mcp })).await;
    assert_eq!(refused.is_error, Some(true));
    let text = format!("{:?}", refused.content);
    assert!(text.contains("custody:delegate"), "{text}");

    let custody = ["mcp:pipeline", "pipeline:execute", "custody:delegate"];
    let delegated = client_for(&server, Resource::PipelineMcp, &custody).await;
    let committed = call(&delegated, "evmBuild", json!({ "body": through_mcp })).await;
    assert_eq!(committed.is_error, Some(false), "{:?}", committed.content);
    assert_eq!(committed.structured_content.unwrap()["status"], "committed");
}

#[tokio::test]
async fn an_agent_turn_runs_through_agent_mcp_and_errors_carry_the_envelope() {
    let server = TestServer::start().await;
    let scopes = ["mcp:agent", "agent:read", "agent:write"];
    let client = client_for(&server, Resource::AgentMcp, &scopes).await;
    // A handshake client holds a session, so it is offered subscriptions over it.
    let offered = &client.peer_info().unwrap().capabilities;
    let resources = offered.resources.as_ref().expect("resources are offered");
    assert_eq!(resources.subscribe, Some(true), "{offered:?}");
    let started = call(
        &client,
        "startChat",
        json!({ "body": { "message": "hello" } }),
    )
    .await;
    assert_eq!(started.is_error, Some(false), "{:?}", started.content);
    let started = started.structured_content.unwrap();
    let session = started["sessionId"].as_str().unwrap();
    let page = call(
        &client,
        "getChatEvents",
        json!({ "sessionId": session, "cursor": started["cursor"], "wait": 5000 }),
    )
    .await;
    let events = &page.structured_content.unwrap()["events"];
    assert!(!events.as_array().unwrap().is_empty(), "{events}");

    let missing = call(&client, "getSession", json!({ "sessionId": "ses_nowhere" })).await;
    assert_eq!(missing.is_error, Some(true));
    let told = result_text(&missing);
    assert!(told.contains(r#""code":"not_found""#), "{told}");
}

#[tokio::test]
async fn an_unknown_tool_is_a_protocol_error_and_arguments_off_the_schema_a_tool_error_with_no_effect()
 {
    let server = TestServer::start().await;
    let scopes = ["mcp:agent", "agent:read", "agent:write"];
    let client = client_for(&server, Resource::AgentMcp, &scopes).await;
    let request = CallToolRequestParams::new("noSuchTool").with_arguments(arguments(json!({})));
    let error = client.call_tool(request).await.unwrap_err();
    assert!(format!("{error:?}").contains("-32602"), "{error:?}");
    // The model reads why, and what to change.
    for (tool, args, told) in [
        (
            "startChat",
            json!({ "body": { "message": 7 } }),
            "`/body/message` breaks `type`",
        ),
        (
            "startChat",
            json!({ "body": { "message": "hi" }, "extra": true }),
            "extra",
        ),
        (
            "run_turn",
            json!({ "message": "" }),
            "`/message` breaks `minLength`",
        ),
        (
            "getChatEvents",
            json!({ "sessionId": "ses_1", "wait": 99999 }),
            "`/wait` breaks `maximum`",
        ),
    ] {
        let result = call(&client, tool, args).await;
        assert_eq!(result.is_error, Some(true), "{tool}");
        let text = result_text(&result);
        assert!(text.contains(told), "{tool}: {text}");
    }
    // Nothing was started.
    let agent = server.token("alice", Resource::Agent, &["agent:read"]);
    let response = server.get("/v1/agent/sessions/ses_none", &agent).await;
    assert_eq!(response.status(), 404);

    // A malformed JSON-RPC message is the protocol's error, not a 500.
    let token = mcp_token(&server, Resource::AgentMcp, &scopes);
    let garbage = reqwest::Client::new()
        .post(Resource::AgentMcp.identifier(server.base_url()))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{ not json")
        .send()
        .await
        .unwrap();
    assert!(garbage.status().is_client_error(), "{}", garbage.status());

    // A session id this server never issued is one that ended: the protocol's 404.
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} });
    let expired = reqwest::Client::new()
        .post(Resource::AgentMcp.identifier(server.base_url()))
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-session-id", "expired-session")
        .json(&list)
        .send()
        .await
        .unwrap();
    assert_eq!(expired.status(), 404, "{:?}", expired.text().await);

    // A handshake session is its opener's: another account naming it is told it ended. It ends
    // by DELETE: 204, and the id is then unknown.
    let other = server.token("bob", Resource::AgentMcp, &scopes);
    let post_as = |token: &str, body: Value, session: Option<&str>| {
        let mut request = reqwest::Client::new()
            .post(Resource::AgentMcp.identifier(server.base_url()))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let post = |body: Value, session: Option<&str>| post_as(&token, body, session);
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": { "name": "probe", "version": "1" } },
    });
    let opened = post(initialize, None).await.unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    assert_eq!(
        post(initialized, Some(&session)).await.unwrap().status(),
        202
    );
    let borrowed = post_as(&other, list.clone(), Some(&session)).await.unwrap();
    assert_eq!(borrowed.status(), 404, "another account's session");
    let owned = post(list.clone(), Some(&session)).await.unwrap();
    assert_eq!(owned.status(), 200, "{:?}", owned.text().await);
    let ended = reqwest::Client::new()
        .delete(Resource::AgentMcp.identifier(server.base_url()))
        .bearer_auth(&token)
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 204);
    let after = post(list, Some(&session)).await.unwrap();
    assert_eq!(after.status(), 404, "{:?}", after.text().await);
}

#[tokio::test]
async fn a_client_finds_its_token_from_a_401_and_wrong_tokens_are_refused() {
    let server = TestServer::start().await;
    let endpoint = Resource::AgentMcp.identifier(server.base_url());
    let http = reqwest::Client::new();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": { "name": "probe", "version": "1" } },
    });
    let post = |token: Option<String>| {
        let mut request = http
            .post(&endpoint)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };

    // 401 names the MCP resource's metadata, which names the authorization server.
    let anonymous = post(None).await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers()["www-authenticate"].to_str().unwrap();
    let metadata_url = challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a resource_metadata parameter");
    assert!(metadata_url.ends_with("/v1/agent/mcp"), "{metadata_url}");
    let metadata: Value = http
        .get(metadata_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], endpoint);
    let issuer = metadata["authorization_servers"][0].as_str().unwrap();
    let as_metadata: Value = http
        .get(format!("{issuer}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(as_metadata["device_authorization_endpoint"].is_string());

    // The device grant for that resource, approved by the person.
    let base = server.base_url().to_owned();
    let tokens = intent_sdk::auth::OAuth::new(issuer, "intent-cli")
        .device(&endpoint, &["mcp:agent", "agent:read"], move |code| {
            let (base, code) = (base.clone(), code.user_code.clone());
            tokio::spawn(async move { decide(&base, &code, "approve").await });
        })
        .await
        .unwrap();
    let token = intent_sdk::auth::TokenSource::token(&tokens).await.unwrap();
    let client = connect(&server, Resource::AgentMcp, &token).await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"getSession".to_owned()), "{names:?}");
    assert!(
        !names.contains(&"startChat".to_owned()),
        "agent:write not granted"
    );

    // A token for the Agent itself is not one for Agent MCP.
    let agent = server.token("alice", Resource::Agent, &["agent:read", "mcp:agent"]);
    assert_eq!(post(Some(agent)).await.unwrap().status(), 401);
    // Agent MCP's audience without mcp:agent: 403 insufficient_scope.
    let narrow = server.token("alice", Resource::AgentMcp, &["agent:read"]);
    let forbidden = post(Some(narrow)).await.unwrap();
    assert_eq!(forbidden.status(), 403);
    let challenge = forbidden.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains("insufficient_scope"), "{challenge}");
}

/// A client that answers elicitations with `decision` (or none, when it cannot elicit) and
/// records progress messages.
#[derive(Clone)]
struct Person {
    decision: Option<&'static str>,
    progress: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The URIs of `notifications/resources/updated` it heard over its session.
    updated: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Person {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let builder = rmcp::model::ClientCapabilities::builder();
        let capabilities = match self.decision {
            Some(_) => builder.enable_elicitation().build(),
            None => builder.build(),
        };
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("person", "1"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let message = serde_json::to_value(&request).unwrap()["message"].clone();
        self.asked
            .lock()
            .unwrap()
            .push(message.as_str().unwrap_or_default().to_owned());
        let decision = self.decision.expect("asked only when it can elicit");
        Ok(serde_json::from_value(json!({
            "action": "accept", "content": { "decision": decision },
        }))
        .unwrap())
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let message = params.message.unwrap_or_default();
        self.progress.lock().unwrap().push(message);
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }
}

/// `run_turn` for a transfer as `person`, with a progress token.
async fn run_turn(server: &TestServer, person: &Person) -> Value {
    let scopes = [
        "mcp:agent",
        "agent:read",
        "agent:write",
        "agent:actions:resolve",
    ];
    run_turn_with(server, person, &scopes).await
}

/// `run_turn` like [`run_turn`], with a token carrying `scopes`.
async fn run_turn_with(server: &TestServer, person: &Person, scopes: &[&str]) -> Value {
    let client = modern(server, Resource::AgentMcp, scopes, person.clone()).await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"run_turn".to_owned()), "{names:?}");
    let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(7));
    let mut request = CallToolRequestParams::new("run_turn").with_arguments(arguments(json!({
        "message": "send 0.25 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    })));
    request.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(token));
    let result = client.call_tool(request).await.unwrap();
    assert_eq!(
        result.is_error,
        Some(false),
        "{:?}",
        result.structured_content
    );
    result.structured_content.unwrap()
}

fn person(decision: Option<&'static str>) -> Person {
    Person {
        decision,
        progress: Default::default(),
        asked: Default::default(),
        updated: Default::default(),
    }
}

#[tokio::test]
async fn run_turn_asks_the_person_and_an_approval_completes_the_turn_with_progress() {
    let server = TestServer::start().await;
    let approver = person(Some("approve"));
    let outcome = run_turn(&server, &approver).await;
    assert_eq!(outcome["state"], "complete", "{outcome}");
    let asked = approver.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("balance"),
        "the question shows balance changes: {}",
        asked[0]
    );
    assert!(asked[0].contains("guard"), "and guards: {}", asked[0]);
    // The outcome and the progress notes say what happened, in words a model reads.
    let messages = outcome["messages"].as_array().unwrap();
    assert!(!messages.is_empty(), "the assistant's messages: {outcome}");
    let progress = approver.progress.lock().unwrap().clone();
    for told in [
        "asks for approval: ",
        "the action was approved",
        "assistant: ",
    ] {
        assert!(
            progress.iter().any(|m| m.starts_with(told)),
            "{told}: {progress:?}"
        );
    }
    let said = format!("assistant: {}", messages.last().unwrap().as_str().unwrap());
    assert!(progress.contains(&said), "{progress:?}");

    // The log says the Build was approved once.
    let agent = server.token("alice", Resource::Agent, &["agent:read"]);
    let session = outcome["sessionId"].as_str().unwrap();
    let page: Value = server
        .get(&format!("/v1/agent/chat/{session}"), &agent)
        .await
        .json()
        .await
        .unwrap();
    let results: Vec<&Value> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "action_result")
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        results[0]["result"]["outcome"], "approved",
        "{}",
        results[0]
    );
}

#[tokio::test]
async fn run_turn_resolves_a_rejection_and_without_elicitation_hands_back_the_action() {
    let server = TestServer::start().await;
    let rejected = run_turn(&server, &person(Some("reject"))).await;
    assert_ne!(rejected["state"], "awaiting_action", "{rejected}");
    assert_ne!(rejected["state"], "processing", "{rejected}");

    let unable = person(None);
    let waiting = run_turn(&server, &unable).await;
    assert_eq!(waiting["state"], "awaiting_action", "{waiting}");
    assert!(waiting["action"]["actionId"].is_string(), "{waiting}");
    let simulation = &waiting["action"]["build"]["simulation"];
    assert!(
        simulation["balanceChanges"].is_array(),
        "what the Build would do: {waiting}"
    );
    assert!(unable.asked.lock().unwrap().is_empty());

    // A token that cannot resolve: the person is not asked a question nobody could act on.
    let would_approve = person(Some("approve"));
    let scopes = ["mcp:agent", "agent:read", "agent:write"];
    let waiting = run_turn_with(&server, &would_approve, &scopes).await;
    assert_eq!(waiting["state"], "awaiting_action", "{waiting}");
    assert!(would_approve.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_sessions_log_is_a_resource_whose_subscribers_hear_of_appends() {
    let server = TestServer::start().await;
    let scopes = ["mcp:agent", "agent:read", "agent:write"];
    let client = modern(&server, Resource::AgentMcp, &scopes, ()).await;
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(
        templates[0].uri_template,
        "intent://sessions/{sessionId}/events{?cursor}"
    );

    let started = call(
        &client,
        "startChat",
        json!({ "body": { "message": "hello" } }),
    )
    .await;
    let started = started.structured_content.unwrap();
    let session = started["sessionId"].as_str().unwrap().to_owned();
    // The first turn ends before the second starts, which would otherwise be 409.
    server
        .intent("alice")
        .agent()
        .wait_turn(
            &session,
            started["turnId"].as_str().unwrap(),
            started["cursor"].as_str().unwrap(),
        )
        .await
        .unwrap();
    let resource = format!("intent://sessions/{session}/events");
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            resource.clone(),
        ))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("a text resource")
    };
    let page: Value = serde_json::from_str(text).unwrap();
    assert_eq!(page["events"][0]["seq"], 1, "{page}");

    let filter = rmcp::model::SubscriptionFilter::builder()
        .resource_subscriptions([resource.clone(), "intent://elsewhere".to_owned()])
        .build();
    let mut subscription = client.listen(filter).await.unwrap();
    assert_eq!(
        subscription.acknowledged().resource_subscriptions,
        Some(vec![resource.clone()]),
        "only session logs are accepted"
    );
    // Let the listener settle on the log as it stands, then append through the HTTP API.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let agent = server.token("alice", Resource::Agent, &["agent:write"]);
    let appended = reqwest::Client::new()
        .post(format!("{}/v1/agent/chat", server.base_url()))
        .bearer_auth(&agent)
        .json(&json!({ "message": "hello again", "sessionId": session }))
        .send()
        .await
        .unwrap();
    assert_eq!(appended.status(), 202);
    let note = tokio::time::timeout(std::time::Duration::from_secs(10), subscription.next())
        .await
        .expect("a notification within 10 s")
        .unwrap()
        .expect("the subscription stays open");
    let note = serde_json::to_value(&note).unwrap();
    assert_eq!(note["method"], "notifications/resources/updated", "{note}");
    assert_eq!(note["params"]["uri"], resource, "{note}");
    // The subscriber reads just what was appended, from the cursor of its last read.
    let after = format!(
        "{resource}?cursor={}",
        percent_encode(page["cursor"].as_str().unwrap())
    );
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(after))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("a text resource")
    };
    let appended: Value = serde_json::from_str(text).unwrap();
    let last = page["events"].as_array().unwrap().last().unwrap()["seq"]
        .as_u64()
        .unwrap();
    assert_eq!(appended["events"][0]["seq"], last + 1, "{appended}");

    // Someone else's session is not a resource of this token.
    let bob = server.intent("bob");
    let theirs = bob
        .agent()
        .run_turn("hello", None)
        .await
        .unwrap()
        .session_id;
    let foreign = format!("intent://sessions/{theirs}/events");
    let refused = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(foreign))
        .await;
    assert!(refused.is_err());
    // Neither is a name that is no session id; it is refused, not a crash.
    for odd in [
        "intent://sessions/a b/events",
        "intent://sessions/x?wait=30000/events",
    ] {
        let refused = client
            .read_resource(rmcp::model::ReadResourceRequestParams::new(odd))
            .await;
        assert!(refused.is_err(), "{odd}");
    }
}

/// `text` with everything but unreserved characters percent-encoded, for a URI's query.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[tokio::test]
#[allow(deprecated)] // resources/subscribe, the handshake revisions' method
async fn a_handshake_client_is_asked_over_its_session_and_told_of_appends_it_subscribed_to() {
    let server = TestServer::start().await;
    let approver = person(Some("approve"));
    let scopes = [
        "mcp:agent",
        "agent:read",
        "agent:write",
        "agent:actions:resolve",
    ];
    let client = handshake(&server, Resource::AgentMcp, &scopes, approver.clone()).await;
    let message = "send 0.25 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
    let outcome = call(&client, "run_turn", json!({ "message": message })).await;
    let outcome = outcome.structured_content.unwrap();
    assert_eq!(outcome["state"], "complete", "{outcome}");
    let asked = approver.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "asked once, within the call: {asked:?}");
    assert!(asked[0].contains("balance"), "{asked:?}");

    let session = outcome["sessionId"].as_str().unwrap().to_owned();
    let resource = format!("intent://sessions/{session}/events");
    client
        .subscribe(rmcp::model::SubscribeRequestParams::new(resource.clone()))
        .await
        .expect("a session of hers is subscribed to");
    // Let the follower settle on the log as it stands, then append through the HTTP API.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let again = start_turn(
        &server,
        "alice",
        json!({ "message": "hello", "sessionId": session }),
    )
    .await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while approver.updated.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let updated = approver.updated.lock().unwrap().clone();
    assert_eq!(updated.first(), Some(&resource), "{updated:?}");

    // Unsubscribed, it hears of no more appends.
    client
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(resource.clone()))
        .await
        .unwrap();
    let turn = again["turnId"].as_str().unwrap();
    let cursor = again["cursor"].as_str().unwrap();
    let intent = server.intent("alice");
    intent
        .agent()
        .wait_turn(&session, turn, cursor)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let heard = approver.updated.lock().unwrap().len();
    start_turn(
        &server,
        "alice",
        json!({ "message": "and again", "sessionId": session }),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(approver.updated.lock().unwrap().len(), heard);

    // Someone else's session is not a resource of this token.
    let theirs = start_turn(&server, "bob", json!({ "message": "hi" })).await;
    let refused = client
        .subscribe(rmcp::model::SubscribeRequestParams::new(format!(
            "intent://sessions/{}/events",
            theirs["sessionId"].as_str().unwrap()
        )))
        .await;
    assert!(refused.is_err(), "{refused:?}");
}

/// Starts a turn of `account` through the HTTP API with `body`; its ChatStartResponse.
async fn start_turn(server: &TestServer, account: &str, body: Value) -> Value {
    let token = server.token(account, Resource::Agent, &["agent:write"]);
    let started = reqwest::Client::new()
        .post(format!("{}/v1/agent/chat", server.base_url()))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 202);
    started.json().await.unwrap()
}
