//! Agent MCP's `run_turn`: starts or continues a turn and waits until it is no longer
//! `processing`, with a progress notification per event. When the turn asks for an action and
//! the client can elicit, the person is asked to approve or reject the simulated Build (its
//! balance changes and guards shown) through a multi-round-trip input request; the answer comes
//! back with the opaque request state and is resolved with an idempotency key derived from it,
//! so a retried answer has one effect. Otherwise the result is `awaiting_action` with the
//! ActionRequest. The state travels with the client, so any instance can take the next round.
//! A client of a handshake revision, which holds a session, is asked within the call instead.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use axum::body::Body;
use axum::http::{Method, Request, header};
use intent_models::schema::{SchemaValidator, Schemas};
use intent_models::{
    ActionRequest, ActionResolutionRequest, ActionResult, AgentEvent, AgentEventRole,
    ChatStartResponse, ErrorCode, EventPage, Scope, TurnState,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitRequestParams, InputRequest,
    InputRequiredResult, JsonObject, ProgressNotificationParam, ProtocolVersion, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::api::Api;
use super::result::{answered, refused};
use super::tools::percent_encode;
use crate::auth::principal::Principal;
use crate::error::ApiError;

/// The tool's name.
pub const NAME: &str = "run_turn";

/// The scopes `run_turn` needs: it starts turns and reads the log.
pub const SCOPES: [Scope; 2] = [Scope::AgentWrite, Scope::AgentRead];

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
        "Send the user's message to the agent and wait for its answer: starts a turn (in a new \
         session, or in sessionId to continue one) and returns once the turn is complete, \
         failed, interrupted or awaiting an action, with the assistant's messages, the error if \
         any, and the cursor to read the session on from. A progress notification tells each \
         event as it comes. When the turn needs the user's approval of a Build and the client \
         supports elicitation, the user is asked here; otherwise the state is awaiting_action \
         and the action (its Build, balance changes, fees and guards) is returned for \
         resolveAction.",
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
    action: ActionRequest,
    /// The assistant's messages read before the question.
    #[serde(default)]
    messages: Vec<String>,
}

/// How a turn settled: the tool's structured result, whose JSON is its text too.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Settled {
    session_id: String,
    turn_id: String,
    /// Where to read the session's log on from (`getChatEvents`).
    cursor: String,
    state: TurnState,
    /// The events read in this call.
    events: usize,
    /// The assistant's messages of the turn read in this call, in order.
    messages: Vec<String>,
    /// The action the turn waits on: its Build, with what the simulation says it would do.
    action: Option<ActionRequest>,
    /// Why the turn failed or was interrupted, when an error event says.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<TurnError>,
}

/// A turn's error event.
#[derive(Serialize)]
struct TurnError {
    code: String,
    message: String,
}

impl Settled {
    fn result(self) -> CallToolResponse {
        answered(serde_json::to_value(&self).expect("a settled turn serializes"))
    }
}

/// Why a round stopped before the turn settled.
enum Failure {
    /// The Agent answered with an error: its envelope, as sent.
    Answered(Value),
    /// The call did not complete, or its answer is not the model it should be.
    Internal(String),
}

impl Failure {
    /// The envelope the tool error carries.
    fn envelope(self) -> Value {
        match self {
            Self::Answered(envelope) => envelope,
            Self::Internal(message) => {
                let envelope = ApiError::new(ErrorCode::Internal, message).envelope();
                serde_json::to_value(envelope).expect("an error envelope serializes")
            }
        }
    }
}

/// Runs one round of `run_turn`. An error answer of the Agent is a tool error carrying its
/// envelope; a request state that is not ours is invalid params.
pub async fn run(
    api: &Api,
    principal: &Principal,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let pending = match &request.request_state {
        Some(state) => match serde_json::from_str::<Pending>(state) {
            Ok(pending) => Some((pending, state.as_str())),
            Err(_) => {
                return Err(McpError::invalid_params(
                    "the request state is not ours",
                    None,
                ));
            }
        },
        None => None,
    };
    match round(api, principal, &request, pending, context).await {
        Ok(response) => Ok(response),
        Err(failure) => Ok(refused(format!("{NAME} failed: {}", failure.envelope()))),
    }
}

async fn round(
    api: &Api,
    principal: &Principal,
    request: &CallToolRequestParams,
    pending: Option<(Pending, &str)>,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, Failure> {
    let mut settled = match pending {
        Some((pending, state)) => {
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(DECISION));
            match decided(api, principal, context, pending, state, answer).await? {
                Ok(settled) => settled,
                Err(unanswered) => return Ok(unanswered.result()),
            }
        }
        None => {
            let arguments = request.arguments.clone().unwrap_or_default();
            let started = start(api, principal, &arguments).await?;
            let settled = Settled::processing(started.session_id, started.turn_id, started.cursor);
            wait(api, principal, context, settled).await?
        }
    };
    // Asking the person is pointless when the token cannot resolve what they decide.
    let can_elicit = principal.has_scope(Scope::AgentActionsResolve.as_str())
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
    loop {
        let action = match settled.action.take() {
            Some(action) if settled.state == TurnState::AwaitingAction && can_elicit => action,
            action => {
                settled.action = action;
                return Ok(settled.result());
            }
        };
        let pending = Pending {
            session: settled.session_id,
            turn: settled.turn_id,
            cursor: settled.cursor,
            action,
            messages: settled.messages,
        };
        let state = serde_json::to_string(&pending).expect("the state serializes");
        if !in_session(context) {
            // Stateless: the client asks the person and calls again with the answer.
            let requests = BTreeMap::from([(DECISION.to_owned(), elicitation(&pending.action))]);
            return Ok(InputRequiredResult::new(Some(requests), Some(state)).into());
        }
        // A handshake session: the person is asked over it, within the call.
        let answer = ask(principal, context, &pending.action).await;
        settled = match decided(api, principal, context, pending, &state, answer.as_ref()).await? {
            Ok(settled) => settled,
            Err(unanswered) => return Ok(unanswered.result()),
        };
    }
}

/// Carries the turn on after the person's `answer` to `pending`: resolved and waited on, or,
/// without a decision (cancelled, or no answer), `Err` with the turn left awaiting the action
/// for another client.
async fn decided(
    api: &Api,
    principal: &Principal,
    context: &RequestContext<RoleServer>,
    pending: Pending,
    state: &str,
    answer: Option<&Value>,
) -> Result<Result<Settled, Settled>, Failure> {
    let Some(approve) = decision(answer) else {
        return Ok(Err(Settled {
            state: TurnState::AwaitingAction,
            messages: pending.messages,
            action: Some(pending.action),
            ..Settled::processing(pending.session, pending.turn, pending.cursor)
        }));
    };
    resolve(api, principal, &pending, approve, state).await?;
    let Pending {
        session,
        turn,
        cursor,
        messages,
        ..
    } = pending;
    let mut settled = Settled::processing(session, turn, cursor);
    settled.messages = messages;
    Ok(Ok(wait(api, principal, context, settled).await?))
}

/// Whether the call came over a handshake revision's session, where the server may send the
/// client requests (2026-07-28 forbids them: its calls are stateless).
fn in_session(context: &RequestContext<RoleServer>) -> bool {
    context
        .peer
        .peer_info()
        .is_some_and(|info| info.protocol_version < ProtocolVersion::V_2026_07_28)
}

/// Asks the person over the session for a decision on `action`, while the caller's token
/// lasts: their answer as an input response reads, `None` when the client cannot answer.
async fn ask(
    principal: &Principal,
    context: &RequestContext<RoleServer>,
    action: &ActionRequest,
) -> Option<Value> {
    let asked = context
        .peer
        .create_elicitation_with_timeout(question(action), Some(principal.remaining()))
        .await
        .ok()?;
    serde_json::to_value(asked).ok()
}

/// Starts the turn: its session, its id and the cursor before its first event.
async fn start(
    api: &Api,
    principal: &Principal,
    arguments: &JsonObject,
) -> Result<ChatStartResponse, Failure> {
    // The arguments held against the input schema: `message` and maybe `sessionId`, the body
    // of a start as it is.
    let body = Value::Object(arguments.clone());
    let request = json_request(Method::POST, "/v1/agent/chat".into(), Some(&body));
    call(api, principal, request).await
}

impl Settled {
    /// A turn of `session` still processing, read up to `cursor`.
    fn processing(session: String, turn: String, cursor: String) -> Self {
        Self {
            session_id: session,
            turn_id: turn,
            cursor,
            state: TurnState::Processing,
            events: 0,
            messages: Vec::new(),
            action: None,
            error: None,
        }
    }
}

/// Long-polls the log from `settled`'s cursor until its turn is not `processing` and no more
/// events are ready, notifying progress per event (with the event's text) when the client
/// asked for it.
async fn wait(
    api: &Api,
    principal: &Principal,
    context: &RequestContext<RoleServer>,
    mut settled: Settled,
) -> Result<Settled, Failure> {
    let progress = context.meta.get_progress_token();
    loop {
        let query = serde_urlencoded::to_string([
            ("cursor", settled.cursor.as_str()),
            ("wait", &WAIT_MS.to_string()),
        ])
        .expect("pairs of strings encode");
        let path = format!(
            "/v1/agent/chat/{}?{query}",
            percent_encode(&settled.session_id)
        );
        let page: EventPage = call(api, principal, json_request(Method::GET, path, None)).await?;
        for event in page.events {
            settled.events += 1;
            if let Some(token) = &progress {
                let note = ProgressNotificationParam::new(token.clone(), settled.events as f64)
                    .with_message(told(&event));
                // A client gone away loses notes, not the turn.
                let _ = context.peer.notify_progress(note).await;
            }
            if event.turn_id() != settled.turn_id {
                continue;
            }
            match event {
                AgentEvent::TurnState { state, .. } => settled.state = state,
                AgentEvent::Action { action, .. } => settled.action = Some(action),
                AgentEvent::Message {
                    role: AgentEventRole::Assistant,
                    text,
                    ..
                } => settled.messages.push(text),
                AgentEvent::Error { code, message, .. } => {
                    settled.error = Some(TurnError { code, message });
                }
                _ => {}
            }
        }
        settled.cursor = page.cursor;
        if settled.state.is_settled() && !page.has_more {
            if settled.state != TurnState::AwaitingAction {
                settled.action = None;
            }
            return Ok(settled);
        }
    }
}

/// What a progress notification says of `event`: its text, for a model to read.
fn told(event: &AgentEvent) -> String {
    match event {
        AgentEvent::Message { role, text, .. } => format!("{role}: {text}"),
        AgentEvent::ToolCall { name, .. } => format!("calling {name}"),
        AgentEvent::ToolResult { name, is_error, .. } => match is_error {
            true => format!("{name} failed"),
            false => format!("{name} answered"),
        },
        AgentEvent::Action { action, .. } => format!("asks for approval: {}", action.title),
        AgentEvent::ActionResult { result, .. } => match result {
            ActionResult::Approved { .. } => "the action was approved".to_owned(),
            ActionResult::Rejected { .. } => "the action was rejected".to_owned(),
        },
        AgentEvent::Error { code, message, .. } => format!("error {code}: {message}"),
        AgentEvent::TurnState { state, .. } => format!("the turn is {state}"),
        other => other.kind().to_owned(),
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
) -> Result<(), Failure> {
    let action = &pending.action;
    let digest = action.build.digest.to_string();
    let result = if approve {
        ActionResult::Approved {
            digest: digest.parse().map_err(internal)?,
        }
    } else {
        ActionResult::Rejected {
            digest: digest.parse().map_err(internal)?,
            reason: Some("rejected by the person".parse().map_err(internal)?),
        }
    };
    let body: ActionResolutionRequest = ActionResolutionRequest::builder()
        .revision(action.revision)
        .result(result)
        .try_into()
        .map_err(internal)?;
    let body = serde_json::to_value(body).map_err(internal)?;
    let path = format!(
        "/v1/agent/sessions/{}/actions/{}/resolve",
        percent_encode(&pending.session),
        percent_encode(&action.action_id)
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
    call::<Value>(api, principal, request).await.map(drop)
}

/// The person's answer to the input request, as the client sends it back.
#[derive(Deserialize)]
struct Answer {
    action: String,
    #[serde(default)]
    content: Option<AnswerContent>,
}

/// What the person chose in the form.
#[derive(Deserialize)]
struct AnswerContent {
    decision: Option<String>,
}

/// The person's answer: approve, reject, or `None` when they cancelled or nothing came back.
fn decision(answer: Option<&Value>) -> Option<bool> {
    let answer = Answer::deserialize(answer?).ok()?;
    match answer.action.as_str() {
        "accept" => Some(
            answer
                .content
                .and_then(|content| content.decision)
                .is_some_and(|decision| decision == "approve"),
        ),
        "decline" => Some(false),
        _ => None,
    }
}

/// The question put to the person: the Build's balance changes and guards, approve or reject.
fn question(action: &ActionRequest) -> ElicitRequestParams {
    let mut lines = vec![format!(
        "{} (Build {})",
        action.title,
        action.build.digest.as_str()
    )];
    if let Some(simulation) = &action.build.simulation {
        for change in &simulation.balance_changes {
            let account = change.account.as_deref().unwrap_or("?");
            lines.push(format!("balance {account} {change}"));
        }
        for guard in &simulation.guards {
            lines.push(format!("guard {}: {}", guard.name, guard.status));
        }
    }
    let params = json!({
            "mode": "form",
            "message": lines.join("\n"),
            "requestedSchema": {
                "type": "object",
                "properties": { DECISION: { "type": "string", "enum": ["approve", "reject"],
                                            "title": "Approve or reject the Build" } },
                "required": [DECISION],
            },
    });
    serde_json::from_value(params).expect("the question is well formed")
}

/// The question as a multi-round-trip input request.
fn elicitation(action: &ActionRequest) -> InputRequest {
    InputRequest::Elicitation(ElicitRequest::new(question(action)))
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

/// A failure of this server, not of the Agent's answer.
fn internal(error: impl std::fmt::Display) -> Failure {
    Failure::Internal(error.to_string())
}

/// The Agent's answer to `request`: its body as `T` on success, else its envelope.
async fn call<T: DeserializeOwned>(
    api: &Api,
    principal: &Principal,
    request: Request<Body>,
) -> Result<T, Failure> {
    match api.send(principal, request).await {
        Ok((status, body)) if status.is_success() => {
            serde_json::from_value(body).map_err(|e| internal(format!("the answer: {e}")))
        }
        Ok((_, envelope)) => Err(Failure::Answered(envelope)),
        Err(error) => Err(Failure::Internal(error.message.into_owned())),
    }
}
