//! Part 5.4: the MCP resources, through rmcp's client. Their protection (401 naming the MCP
//! resource's metadata, a token of another resource refused) is normative; what they serve
//! (tools generated from openapi.json, results equal to the HTTP API's) is the profile's
//! `x-mcp`.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use reqwest::Method;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::run;
use crate::checks::{Category, Check};
use crate::finding::{Finding, Verdict, ensure, fail, profile, skip};
use crate::target::{Reply, Role, Target};

const AGENT_MCP: &str = "/v1/agent/mcp";
const PIPELINE_MCP: &str = "/v1/pipeline/mcp";
const PROFILE: &[&str] = &["#/x-mcp"];
const RESOURCES: &[&str] = &["#/components/securitySchemes/oauth2/x-resources"];

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "mcp.unauthorized".into(),
            category: Category::Mcp,
            requirement: "An MCP resource MUST refuse a request without a token with a 4xx (401 with a WWW-Authenticate challenge whose resource_metadata names that MCP resource's metadata, RFC 9728, is a profile assertion).",
            section: "5.4",
            rests_on: RESOURCES.to_vec(),
            operation: None,
            run: run!(unauthorized),
        },
        Check {
            id: "mcp.audience".into(),
            category: Category::Mcp,
            requirement: "An MCP resource MUST refuse with a 4xx a token bound to another resource, such as the Agent's (401 is a profile assertion).",
            section: "5.2",
            rests_on: RESOURCES.to_vec(),
            operation: None,
            run: run!(audience),
        },
        Check {
            id: "mcp.initialize".into(),
            category: Category::Mcp,
            requirement: "Agent MCP and Pipeline MCP MUST complete an MCP initialization over Streamable HTTP with a token for them and offer tools.",
            section: "5.4",
            rests_on: PROFILE.to_vec(),
            operation: None,
            run: run!(initialize),
        },
        Check {
            id: "mcp.tools".into(),
            category: Category::Mcp,
            requirement: "tools/list MUST give tools with unique names, each with an object input schema.",
            section: "5.4",
            rests_on: PROFILE.to_vec(),
            operation: None,
            run: run!(tools),
        },
        Check {
            id: "mcp.catalog-tool".into(),
            category: Category::Mcp,
            requirement: "A catalog tool of Pipeline MCP MUST answer with the structured content the HTTP operation answers.",
            section: "5.4",
            rests_on: PROFILE.to_vec(),
            operation: None,
            run: run!(catalog_tool),
        },
        Check {
            id: "mcp.build".into(),
            category: Category::Mcp,
            requirement: "A Build made through Pipeline MCP MUST be the Build the HTTP API makes for the same request, apart from expiresAt, digest and attestation.",
            section: "5.4",
            rests_on: PROFILE.to_vec(),
            operation: None,
            run: run!(build),
        },
        Check {
            id: "mcp.scope".into(),
            category: Category::Mcp,
            requirement: "A tool beyond the token's scopes MUST NOT be listed, and calling it MUST NOT succeed.",
            section: "5.5",
            rests_on: PROFILE.to_vec(),
            operation: None,
            run: run!(scope),
        },
    ]
}

type Client = RunningService<RoleClient, ()>;

/// An MCP client of the resource at `path` with `token`.
async fn connect(target: &Target, path: &str, token: &str) -> Result<Client, Finding> {
    // One HTTP client for every MCP connection of the process (it reads the system's TLS roots
    // once), configured as rmcp's own: no idle connection kept (so none outlives the runtime
    // that opened it), and only same-origin 307 and 308 redirects followed, ten at most.
    static HTTP: LazyLock<reqwest::Client> = LazyLock::new(|| {
        let redirect = reqwest::redirect::Policy::custom(|attempt| {
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
            if same_origin && keeps_body && attempt.previous().len() <= 10 {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(redirect)
            .build()
            .expect("an HTTP client")
    });
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}{path}", target.base()))
        .auth_header(token);
    ().serve(StreamableHttpClientTransport::with_client(
        HTTP.clone(),
        config,
    ))
    .await
    .or_else(|e| fail(format!("MCP initialization at {path} failed: {e}")))
}

async fn call(client: &Client, tool: &str, arguments: Value) -> Result<CallToolResult, Finding> {
    let Value::Object(arguments) = arguments else {
        unreachable!("arguments are built as objects")
    };
    let request = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    client
        .call_tool(request)
        .await
        .or_else(|e| fail(format!("tools/call {tool}: {e}")))
}

/// The structured content of a successful tool result.
fn content(result: CallToolResult, tool: &str) -> Result<Value, Finding> {
    match (result.is_error, result.structured_content) {
        (Some(true), content) => fail(format!(
            "{tool} failed: {}",
            crate::finding::excerpt(&content.unwrap_or_default().to_string())
        )),
        (_, Some(content)) => Ok(content),
        (_, None) => fail(format!("{tool} gave no structured content")),
    }
}

/// An MCP `initialize` POSTed as a plain HTTP request, with `token` when given.
async fn post_initialize(
    target: &Target,
    path: &str,
    token: Option<&str>,
) -> Result<crate::target::Reply, Finding> {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": { "name": "intent-conformance", "version": "1" } },
    });
    let mut request = target
        .request(Method::POST, path)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize);
    if let Some(token) = token {
        request = request.bearer(token);
    }
    request.send().await
}

async fn unauthorized(target: &Target) -> Verdict {
    for (path, role) in [
        (AGENT_MCP, Role::AgentMcp),
        (PIPELINE_MCP, Role::PipelineMcp),
    ] {
        let reply = post_initialize(target, path, None).await?;
        let what = format!("POST {path} without a token");
        // Part 5.4 names the protected resource; how it is spoken to, and its 401 with an RFC
        // 9728 challenge, are the profile's (`#/x-mcp`).
        refused(target, &reply, path, role, &what).await?;
        profile(reply.status == 401, || {
            format!("{what}: {}, where the profile answers 401", reply.status)
        });
        let challenge = reply
            .headers
            .get("www-authenticate")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        let metadata = challenge
            .split("resource_metadata=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next());
        profile(metadata.is_some_and(|url| url.ends_with(path)), || {
            format!(
                "POST {path}: the challenge {challenge:?} names no resource_metadata ending in {path}"
            )
        });
    }
    Ok(())
}

async fn audience(target: &Target) -> Verdict {
    let agent = &target.role(Role::Agent).await?;
    let reply = post_initialize(target, AGENT_MCP, Some(agent)).await?;
    let what = "the Agent's token on Agent MCP";
    refused(target, &reply, AGENT_MCP, Role::AgentMcp, what).await?;
    profile(reply.status == 401, || {
        format!("{what}: {}, where the profile answers 401", reply.status)
    });
    Ok(())
}

/// Fails unless the MCP resource at `path` refused the request: a 4xx (an MCP answer need not
/// be the interface's envelope). Another refusal than 401 tells of the token only where a token
/// of the resource (`role`) is not refused alike: otherwise no MCP resource answered there, and
/// the check is inconclusive.
async fn refused(target: &Target, reply: &Reply, path: &str, role: Role, what: &str) -> Verdict {
    if (400..500).contains(&reply.status) && reply.status != 401 {
        let token = target.role(role).await?;
        let served = post_initialize(target, path, Some(&token)).await?;
        if served.status == reply.status {
            return skip(format!(
                "inconclusive: {what}: {}, and a token for {path} is answered so too",
                reply.status
            ));
        }
    }
    ensure((400..500).contains(&reply.status), || {
        format!(
            "{what}: {} {}, not refused",
            reply.status,
            crate::finding::excerpt(&reply.text)
        )
    })
}

async fn initialize(target: &Target) -> Verdict {
    let agent = &target.role(Role::AgentMcp).await?;
    let pipeline = &target.role(Role::PipelineMcp).await?;
    for (path, token) in [(AGENT_MCP, agent), (PIPELINE_MCP, pipeline)] {
        let client = connect(target, path, token).await?;
        let offers_tools = client
            .peer_info()
            .is_some_and(|info| info.capabilities.tools.is_some());
        let _ = client.cancel().await;
        ensure(offers_tools, || format!("{path} does not offer tools"))?;
    }
    Ok(())
}

async fn tools(target: &Target) -> Verdict {
    let agent = &target.role(Role::AgentMcp).await?;
    let pipeline = &target.role(Role::PipelineMcp).await?;
    for (path, token) in [(AGENT_MCP, agent), (PIPELINE_MCP, pipeline)] {
        let client = connect(target, path, token).await?;
        let listed = client.list_all_tools().await;
        let _ = client.cancel().await;
        let tools = listed.or_else(|e| fail(format!("tools/list at {path}: {e}")))?;
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        ensure(!tools.is_empty(), || format!("{path} lists no tool"))?;
        ensure(unique.len() == names.len(), || {
            format!("{path} lists a name twice: {names:?}")
        })?;
        let shapeless: Vec<&str> = tools
            .iter()
            .filter(|tool| tool.input_schema.get("type") != Some(&json!("object")))
            .map(|tool| tool.name.as_ref())
            .collect();
        ensure(shapeless.is_empty(), || {
            format!("{path}: input schemas that are not objects: {shapeless:?}")
        })?;
    }
    Ok(())
}

async fn catalog_tool(target: &Target) -> Verdict {
    let mcp = &target.role(Role::PipelineMcp).await?;
    let http = &target.role(Role::Pipeline).await?;
    let client = connect(target, PIPELINE_MCP, mcp).await?;
    let result = call(&client, "listPipelineApps", json!({})).await;
    let _ = client.cancel().await;
    let through_mcp = content(result?, "listPipelineApps")?;
    let reply = target
        .request(Method::GET, "/v1/pipeline/apps")
        .bearer(http)
        .send()
        .await?;
    reply.ensure_status(200, "GET /v1/pipeline/apps")?;
    ensure(through_mcp == reply.body, || {
        format!(
            "listPipelineApps answered {} where the API answers {}",
            crate::finding::excerpt(&through_mcp.to_string()),
            crate::finding::excerpt(&reply.text)
        )
    })
}

/// A native transfer on the EVM devnet of the reference catalog.
fn transfer() -> Value {
    json!({
        "app": "evm-assets",
        "operations": [{
            "operation": "native-transfer",
            "input": {
                "chainId": 31337,
                "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
                "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
                "amount": "0.01",
            },
        }],
    })
}

/// A Build without the members that depend on when it was made.
fn timeless(mut build: Value) -> Value {
    if let Some(members) = build.as_object_mut() {
        for member in ["expiresAt", "digest", "attestation"] {
            members.remove(member);
        }
    }
    build
}

async fn build(target: &Target) -> Verdict {
    let mcp = &target.role(Role::PipelineMcp).await?;
    let http = &target.role(Role::Pipeline).await?;
    let client = connect(target, PIPELINE_MCP, mcp).await?;
    let result = call(&client, "evmBuild", json!({ "body": transfer() })).await;
    let _ = client.cancel().await;
    let through_mcp = content(result?, "evmBuild")?;
    let reply = target
        .request(Method::POST, "/v1/pipeline/evm/build")
        .bearer(http)
        .json(&transfer())
        .send()
        .await?;
    reply.ensure_status(200, "POST /v1/pipeline/evm/build")?;
    ensure(
        timeless(through_mcp.clone()) == timeless(reply.body.clone()),
        || {
            format!(
                "the Build through MCP {} differs from the API's {}",
                crate::finding::excerpt(&through_mcp.to_string()),
                crate::finding::excerpt(&reply.text)
            )
        },
    )
}

async fn scope(target: &Target) -> Verdict {
    let agent = &target.role(Role::AgentMcp).await?;
    let client = connect(target, AGENT_MCP, agent).await?;
    let listed = client.list_all_tools().await;
    let result = call(
        &client,
        "startChat",
        json!({ "body": { "message": "conformance" } }),
    )
    .await;
    let _ = client.cancel().await;
    let tools = listed.or_else(|e| fail(format!("tools/list at {AGENT_MCP}: {e}")))?;
    ensure(!tools.iter().any(|tool| tool.name == "startChat"), || {
        "startChat is listed for a token without agent:write".to_owned()
    })?;
    match result {
        // A protocol error refuses it too.
        Err(_) => Ok(()),
        Ok(result) => ensure(result.is_error == Some(true), || {
            "startChat succeeded with a token without agent:write".to_owned()
        }),
    }
}
