//! Agent MCP's `run_turn`: starts or continues a turn and waits until it is no longer
//! `processing`, with a progress notification per event. When the turn asks for an action and
//! the client can elicit, the person is asked to approve or reject the simulated Build (its
//! balance changes and guards shown) through a multi-round-trip input request; the answer comes
//! back with the opaque request state and is resolved with an idempotency key derived from it,
//! so a retried answer has one effect. Otherwise the result is `awaiting_action` with the
//! ActionRequest. The state travels with the client, so any instance can take the next round.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use axum::body::Body;
use axum::http::{Method, Request, header};
use intent_models::ErrorCode;
use intent_models::schema::{SchemaValidator, Schemas};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InputRequest,
    InputRequiredResult, JsonObject, ProgressNotificationParam, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::api::{Api, has};
use super::tools::percent_encode;
use crate::auth::principal::Principal;
use crate::error::ApiError;

/// The tool's name.
pub const NAME: &str = "run_turn";

/// The scopes `run_turn` needs: it starts turns and reads the log.
pub const SCOPES: [&str; 2] = ["agent:write", "agent:read"];

/// The scope a resolution needs.
const RESOLVE: &str = "agent:actions:resolve";

/// The key of the one input request: the person's decision.
const DECISION: &str = "decision";

/// How long one long-poll of the log waits, in milliseconds.
const WAIT_MS: u32 = 25_000;

/// The tool as `tools/list` shows it.
pub fn tool() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "message": { "type": "string", "minLength": 1, "maxLength": 8000,
                         "description": "The user's intent." },
            "sessionId": { "type": "string", "minLength": 1, "maxLength": 160,
                           "description": "Continue this session; omit to start a new one." },
        },
        "required": ["message"],
        "additionalProperties": false,
    });
    let Value::Object(input) = input else {
        unreachable!("an object literal")
    };
    Tool::new(
        NAME,
        "Start or continue a turn and wait until it is no longer processing, with a progress \
         notification per event. An action is put to the person when the client can elicit \
         (approve or reject the simulated Build); otherwise the result is awaiting_action \
         with the ActionRequest.",
        Arc::new(input),
    )
}

/// Where a first round's arguments first fail the input schema (never echoing a value).
pub fn violation(request: &CallToolRequestParams) -> Option<String> {
    static INPUT: LazyLock<SchemaValidator> = LazyLock::new(|| {
        let none = json!({ "components": { "schemas": {} } });
        let schemas = Schemas::from_openapi(&none).expect("an empty component list converts");
        let input = Value::Object((*tool().input_schema).clone());
        schemas
            .inline(&input)
            .expect("run_turn's input schema compiles")
    });
    if request.request_state.is_some() {
        return None;
    }
    let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
    INPUT
        .first_violation(&arguments)
        .map(|violation| format!("the arguments do not hold against the input schema: {violation}"))
}

/// Where a turn waits for the person: echoed back by the client with the decision.
#[derive(Serialize, Deserialize)]
struct Pending {
    session: String,
    turn: String,
    cursor: String,
    action: Value,
}

/// How a turn settled.
struct Settled {
    session: String,
    turn: String,
    cursor: String,
    state: String,
    action: Option<Value>,
    events: usize,
}

impl Settled {
    fn result(self) -> CallToolResponse {
        let summary = format!("turn {} is {}", self.turn, self.state);
        let mut result = CallToolResult::structured(json!({
            "sessionId": self.session, "turnId": self.turn, "state": self.state,
            "cursor": self.cursor, "events": self.events, "action": self.action,
        }));
        result.content = vec![ContentBlock::text(summary)];
        result.into()
    }
}

/// A step that stops at an error answer of the Agent, carried as its envelope.
type Step<T> = Result<T, Value>;

/// Runs one round of `run_turn`. An error answer of the Agent is a tool error carrying its
/// envelope; a request state that is not ours is invalid params.
pub async fn run(
    api: &Api,
    principal: &Principal,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    if let Some(state) = &request.request_state
        && serde_json::from_str::<Pending>(state).is_err()
    {
        return Err(McpError::invalid_params(
            "the request state is not ours",
            None,
        ));
    }
    match round(api, principal, &request, context).await {
        Ok(response) => Ok(response),
        Err(envelope) => {
            let mut result = CallToolResult::structured_error(envelope);
            result.content = vec![ContentBlock::text(format!("{NAME} failed"))];
            Ok(result.into())
        }
    }
}

async fn round(
    api: &Api,
    principal: &Principal,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Step<CallToolResponse> {
    let settled = match &request.request_state {
        Some(state) => {
            let pending: Pending =
                serde_json::from_str(state).expect("checked by run before the round");
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(DECISION));
            match decision(answer) {
                Some(approve) => {
                    resolve(api, principal, &pending, approve, state).await?;
                    wait(
                        api,
                        principal,
                        context,
                        &pending.session,
                        &pending.turn,
                        &pending.cursor,
                    )
                    .await?
                }
                // Cancelled: the action stays pending for another client.
                None => Settled {
                    state: "awaiting_action".into(),
                    action: Some(pending.action),
                    session: pending.session,
                    turn: pending.turn,
                    cursor: pending.cursor,
                    events: 0,
                },
            }
        }
        None => {
            let arguments = request.arguments.clone().unwrap_or_default();
            let started = start(api, principal, &arguments).await?;
            let (session, turn, cursor) = started;
            wait(api, principal, context, &session, &turn, &cursor).await?
        }
    };
    // Asking the person is pointless when the token cannot resolve what they decide.
    let can_elicit = has(principal, RESOLVE)
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
    match settled.action.clone() {
        Some(action) if settled.state == "awaiting_action" && can_elicit => {
            let pending = Pending {
                session: settled.session,
                turn: settled.turn,
                cursor: settled.cursor,
                action: action.clone(),
            };
            let state = serde_json::to_string(&pending).expect("the state serializes");
            let requests = BTreeMap::from([(DECISION.to_owned(), elicitation(&action))]);
            Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
        }
        _ => Ok(settled.result()),
    }
}

/// Starts the turn: its session, its id and the cursor before its first event.
async fn start(
    api: &Api,
    principal: &Principal,
    arguments: &JsonObject,
) -> Step<(String, String, String)> {
    // The arguments held against the input schema: `message` and maybe `sessionId`, the body
    // of a start as it is.
    let body = Value::Object(arguments.clone());
    let request = json_request(Method::POST, "/v1/agent/chat".into(), Some(&body));
    let started = call(api, principal, request).await?;
    let field = |name: &str| started[name].as_str().unwrap_or_default().to_owned();
    Ok((field("sessionId"), field("turnId"), field("cursor")))
}

/// Long-polls the log from `cursor` until `turn` is not `processing` and no more events are
/// ready, notifying progress per event when the client asked for it.
async fn wait(
    api: &Api,
    principal: &Principal,
    context: &RequestContext<RoleServer>,
    session: &str,
    turn: &str,
    cursor: &str,
) -> Step<Settled> {
    let progress = context.meta.get_progress_token();
    let mut settled = Settled {
        session: session.to_owned(),
        turn: turn.to_owned(),
        cursor: cursor.to_owned(),
        state: "processing".into(),
        action: None,
        events: 0,
    };
    loop {
        let query = serde_urlencoded::to_string([
            ("cursor", settled.cursor.as_str()),
            ("wait", &WAIT_MS.to_string()),
        ])
        .expect("pairs of strings encode");
        let path = format!("/v1/agent/chat/{}?{query}", percent_encode(session));
        let page = call(api, principal, json_request(Method::GET, path, None)).await?;
        for event in page["events"].as_array().into_iter().flatten() {
            settled.events += 1;
            if let Some(token) = &progress {
                let kind = event["type"].as_str().unwrap_or("event");
                let note = ProgressNotificationParam::new(token.clone(), settled.events as f64)
                    .with_message(format!("{kind} #{}", event["seq"]));
                // A client gone away loses notes, not the turn.
                let _ = context.peer.notify_progress(note).await;
            }
            if event["turnId"] != turn {
                continue;
            }
            match event["type"].as_str() {
                Some("turn_state") => {
                    settled.state = event["state"].as_str().unwrap_or_default().to_owned();
                }
                Some("action") => settled.action = Some(event["action"].clone()),
                _ => {}
            }
        }
        settled.cursor = page["cursor"].as_str().unwrap_or_default().to_owned();
        if settled.state != "processing" && page["has_more"] != true {
            if settled.state != "awaiting_action" {
                settled.action = None;
            }
            return Ok(settled);
        }
    }
}

/// Resolves the pending action; the idempotency key is derived from the request state and the
/// decision, so that the same answer sent again (to any instance) has one effect.
async fn resolve(
    api: &Api,
    principal: &Principal,
    pending: &Pending,
    approve: bool,
    state: &str,
) -> Step<()> {
    let action = &pending.action;
    let digest = action["build"]["digest"].clone();
    let result = if approve {
        json!({ "outcome": "approved", "digest": digest })
    } else {
        json!({ "outcome": "rejected", "digest": digest, "reason": "rejected by the person" })
    };
    let body = json!({ "revision": action["revision"], "result": result });
    let path = format!(
        "/v1/agent/sessions/{}/actions/{}/resolve",
        percent_encode(&pending.session),
        percent_encode(action["actionId"].as_str().unwrap_or_default())
    );
    let key: String = Sha256::digest(format!("{state}|{approve}"))
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut request = json_request(Method::POST, path, Some(&body));
    request.headers_mut().insert(
        "idempotency-key",
        key.parse().expect("hex is a header value"),
    );
    call(api, principal, request).await.map(drop)
}

/// The person's answer: approve, reject, or `None` when they cancelled or nothing came back.
fn decision(answer: Option<&Value>) -> Option<bool> {
    let answer = answer?;
    match answer["action"].as_str()? {
        "accept" => Some(answer["content"][DECISION] == "approve"),
        "decline" => Some(false),
        _ => None,
    }
}

/// The question put to the person: the Build's balance changes and guards, approve or reject.
fn elicitation(action: &Value) -> InputRequest {
    let simulation = &action["build"]["simulation"];
    let mut lines = vec![format!(
        "{} (Build {})",
        action["title"].as_str().unwrap_or("Approve the Build"),
        action["build"]["digest"].as_str().unwrap_or_default()
    )];
    for change in simulation["balanceChanges"]
        .as_array()
        .into_iter()
        .flatten()
    {
        lines.push(format!(
            "balance {} {} {}",
            change["account"].as_str().unwrap_or("?"),
            change["amount"].as_str().unwrap_or("?"),
            change["symbol"].as_str().unwrap_or("")
        ));
    }
    for guard in simulation["guards"].as_array().into_iter().flatten() {
        lines.push(format!(
            "guard {}: {}",
            guard["name"].as_str().unwrap_or("?"),
            guard["status"].as_str().unwrap_or("?")
        ));
    }
    let request = json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": lines.join("\n"),
            "requestedSchema": {
                "type": "object",
                "properties": { DECISION: { "type": "string", "enum": ["approve", "reject"],
                                            "title": "Approve or reject the Build" } },
                "required": [DECISION],
            },
        },
    });
    InputRequest::Elicitation(
        serde_json::from_value(request).expect("the elicitation request is well formed"),
    )
}

fn json_request(method: Method, path: String, body: Option<&Value>) -> Request<Body> {
    let builder = Request::builder().method(method).uri(path);
    match body {
        Some(body) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => builder.body(Body::empty()),
    }
    .expect("a request of a fixed path is valid")
}

/// The Agent's answer to `request`: its JSON on success, else its envelope (or an `internal`
/// one when the call itself failed).
async fn call(api: &Api, principal: &Principal, request: Request<Body>) -> Step<Value> {
    match api.send(principal, request).await {
        Ok((status, body)) if status.is_success() => Ok(body),
        Ok((_, envelope)) => Err(envelope),
        Err(error) => {
            let envelope = ApiError::new(ErrorCode::Internal, error.message).envelope();
            Err(serde_json::to_value(envelope).expect("an error envelope serializes"))
        }
    }
}
