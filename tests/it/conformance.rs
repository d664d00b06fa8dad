//! The conformance suite against the reference server, and against deliberately broken
//! deployments: a layer around the reference server that injects one fault at a time. Each
//! fault must fail exactly the checks it breaks, and every normative check must be failed by
//! at least one fault.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use futures_util::StreamExt;
use intent_conformance::checks::{Category, Status};
use intent_conformance::embedded::Embedded;
use intent_conformance::spec::Level;
use intent_conformance::suite::{DEFAULT_JOBS, Report, Selection, run};
use intent_conformance::target::{Role, Target, Tokens};
use serde_json::{Value, json};

use crate::fronts::{json_response, now};

/// One way a deployment can be broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Commit results carry a simulation with a property the schema does not have.
    ExtraSimulationField,
    /// A bad cursor is answered 500 instead of 400 `invalid_cursor`.
    BadCursorIs500,
    /// A Build past its `expiresAt` is committed.
    AcceptsExpiredBuild,
    /// Event pages leave out sequence number 2.
    SkipsSequence,
    /// The second account's requests act as the first account.
    LeaksSessions,
    /// `GET /v1/account/statement` works without a token.
    OpenStatement,
    /// Every 401 is answered 403.
    UnauthorizedIs403,
    /// A token without `agent:write` is treated as one with it.
    IgnoresScopes,
    /// SSE `page` events are named `snapshot`.
    RenamesPageEvents,
    /// Long-polls ignore `wait`.
    IgnoresWait,
    /// A changed Build whose digest the deployment issued is committed as the original.
    AcceptsTamperedBuild,
    /// A commit whose re-simulation fails is answered as committed (no re-simulation).
    SkipsResimulation,
    /// Builds carry a digest that is not their content's.
    WrongDigest,
    /// Out-of-range path parameters are answered 500 instead of a refusal.
    LimitsAre500,
    /// Revision conflicts are answered 400 instead of 409.
    ConflictIs400,
    /// A retried resolution loses its Idempotency-Key.
    ForgetsIdempotencyKeys,
    /// An ended turn shows up as processing again.
    ReopensTurns,
    /// 404 is plain text, not an error envelope.
    PlainTextNotFound,
    /// Simulation steps of commit results start at 0.
    StepZero,
    /// Simulation steps of Builds start at 0; a Build presented back is taken as issued.
    BuildStepZero,
    /// A stream opened with a cursor replays the log from its start.
    StreamIgnoresCursor,
    /// A stream opened with a cursor leaves the user's messages out of its pages.
    StreamDropsUserMessages,
    /// Every 401 is answered 500.
    UnauthorizedIs500,
    /// A poll held 20 s is answered 503.
    HeldPollIs503,
    /// A poll with a `wait` above 30000 is answered 500.
    LongWaitIs500,
    /// Turns are `thinking`, not `processing`, while they run.
    SixthTurnState,
    /// The statement is down.
    StatementDown,
    /// The operation descriptor's kind is not `operation`.
    DescriptorKind,
    /// Builds answer version 1.
    BuildVersion1,
    /// The JWKS leaves out the key that signs attestations.
    UnpublishedKey,
    /// A session PATCH changes nothing.
    IgnoresPatch,
    /// A session DELETE answers 204 and keeps the session.
    DeleteKeepsSession,
    /// Every skill call is refused with 400.
    RefusesSkillCalls,
    /// The app catalog is empty.
    EmptyAppCatalog,
    /// The credential list shows every credential absent.
    CredentialsNeverPresent,
    /// Bodies lose their `null` members before the server reads them, so a `null` where the
    /// schema allows none is taken as an absent member.
    DropsNulls,
    /// Sessions answer `archived` as a string.
    ArchivedAsString,
    /// Event pages grow a top-level member beside `events`.
    PageExtraMember,
    /// An app DELETE answers 200 and leaves the app installed.
    UninstallKeepsApp,
    /// The app catalog answers app names as numbers.
    AppNameAsNumber,
    /// A skill call answers its skill's name as a number.
    SkillAsNumber,
    /// The credential list answers `present` as a string.
    PresentAsString,
    /// A Build it issued is answered as committed once, and refused after, without anything
    /// reaching the chain.
    CommitsNothing,
    /// An MCP resource's 401 names no resource metadata.
    McpNoResourceMetadata,
    /// Agent MCP takes the Agent's own token.
    McpAcceptsOtherAudience,
    /// The MCP resources fail every request that carries their token.
    McpDown,
    /// tools/list gives a tool twice.
    McpDuplicateTools,
    /// The catalog tool answers an empty catalog.
    McpCatalogDiffers,
    /// A Build made through MCP has another title.
    McpBuildDiffers,
    /// A tool refused for its scope comes back as a success.
    McpIgnoresScopes,
    /// Every page of two events or more delivers its first event twice.
    DuplicatesEvents,
    /// A token holding a single scope is refused 403, whatever the scope grants.
    RefusesSingleScopes,
    /// An expired cursor is answered 400 `invalid_cursor`, not 410.
    ExpiredIs400,
}

impl Fault {
    const ALL: [Fault; 53] = [
        Fault::ExtraSimulationField,
        Fault::BadCursorIs500,
        Fault::AcceptsExpiredBuild,
        Fault::SkipsSequence,
        Fault::LeaksSessions,
        Fault::OpenStatement,
        Fault::UnauthorizedIs403,
        Fault::IgnoresScopes,
        Fault::RenamesPageEvents,
        Fault::IgnoresWait,
        Fault::AcceptsTamperedBuild,
        Fault::SkipsResimulation,
        Fault::WrongDigest,
        Fault::LimitsAre500,
        Fault::ConflictIs400,
        Fault::ForgetsIdempotencyKeys,
        Fault::ReopensTurns,
        Fault::PlainTextNotFound,
        Fault::StepZero,
        Fault::BuildStepZero,
        Fault::StreamIgnoresCursor,
        Fault::StreamDropsUserMessages,
        Fault::UnauthorizedIs500,
        Fault::HeldPollIs503,
        Fault::LongWaitIs500,
        Fault::SixthTurnState,
        Fault::StatementDown,
        Fault::DescriptorKind,
        Fault::BuildVersion1,
        Fault::UnpublishedKey,
        Fault::IgnoresPatch,
        Fault::DeleteKeepsSession,
        Fault::RefusesSkillCalls,
        Fault::EmptyAppCatalog,
        Fault::CredentialsNeverPresent,
        Fault::DropsNulls,
        Fault::ArchivedAsString,
        Fault::PageExtraMember,
        Fault::UninstallKeepsApp,
        Fault::AppNameAsNumber,
        Fault::SkillAsNumber,
        Fault::PresentAsString,
        Fault::CommitsNothing,
        Fault::McpNoResourceMetadata,
        Fault::McpAcceptsOtherAudience,
        Fault::McpDown,
        Fault::McpDuplicateTools,
        Fault::McpCatalogDiffers,
        Fault::McpBuildDiffers,
        Fault::McpIgnoresScopes,
        Fault::DuplicatesEvents,
        Fault::RefusesSingleScopes,
        Fault::ExpiredIs400,
    ];

    /// The checks this fault must fail (an entry ending in `.*` names every check under it);
    /// every other check must pass.
    fn breaks(self) -> &'static [&'static str] {
        match self {
            // A commit result's shape is not shown: only the profile's schemas judge it.
            Fault::ExtraSimulationField => {
                &["schema.responses", "stateful.evmBuild", "stateful.svmStage"]
            }
            Fault::BadCursorIs500 => &[
                "agent.events.invalid-cursor",
                "agent.events.foreign-cursor",
                "schema.negative.profile",
            ],
            Fault::AcceptsExpiredBuild => &["pipeline.commit-expired"],
            Fault::SkipsSequence => &["agent.events.round-trip"],
            Fault::LeaksSessions => &["auth.isolation.*"],
            Fault::OpenStatement => &["auth.matrix.getStatement"],
            Fault::UnauthorizedIs403 | Fault::UnauthorizedIs500 => &[
                "auth.matrix.*",
                "auth.oauth",
                "mcp.unauthorized",
                "mcp.audience",
            ],
            // The matrix's scope probe of every Agent operation, and the resolution's.
            Fault::IgnoresScopes => {
                static BROKEN: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
                    let matrix = intent_tests::document()
                        .operations()
                        .iter()
                        .filter(|op| op.resource.as_deref() == Some("agent"))
                        .map(|op| -> &'static str { format!("auth.matrix.{}", op.id).leak() });
                    matrix.chain(["agent.actions.resolution"]).collect()
                });
                &BROKEN
            }
            // Without a `page` event there is no cursor to resume from: inconclusive.
            Fault::RenamesPageEvents => &["agent.sse.events", "agent.sse.ids"],
            Fault::IgnoresWait => &[
                "agent.events.wait",
                "agent.events.wake",
                "limits.wait",
                "schema.negative.normative",
                "schema.negative.profile",
            ],
            Fault::AcceptsTamperedBuild => &["pipeline.commit-tampered"],
            Fault::SkipsResimulation => &["pipeline.commit-resimulates"],
            // The deployment refuses the Builds it issues, so the commit checks are inconclusive.
            Fault::WrongDigest => &["pipeline.digest", "pipeline.attestation"],
            Fault::LimitsAre500 => &[
                "limits.session-id",
                "limits.names",
                "limits.application-id",
                "limits.credential-name",
            ],
            Fault::ConflictIs400 => &[
                "agent.actions.revision-conflict",
                "agent.actions.idempotency",
            ],
            Fault::ForgetsIdempotencyKeys => &["agent.actions.idempotency"],
            Fault::ReopensTurns => &["agent.turns.terminal", "agent.events.wait"],
            Fault::PlainTextNotFound => &[
                "account.install-remove",
                "agent.sessions.delete",
                "schema.media-type",
                "schema.error-envelope",
                "schema.responses",
                "stateful.startChat",
            ],
            Fault::StepZero => &["schema.responses", "stateful.evmBuild", "stateful.svmStage"],
            // Part 8's lower bound is normative: every check that asks for a Build fails.
            Fault::BuildStepZero => &[
                "limits.step",
                "mcp.build",
                "pipeline.attestation",
                "pipeline.build",
                "pipeline.commit",
                "pipeline.commit-expired",
                "pipeline.commit-resimulates",
                "pipeline.commit-tampered",
                "pipeline.digest",
                "pipeline.svm",
                "schema.simulation",
                "schema.responses",
                "stateful.evmBuild",
                "stateful.svmStage",
            ],
            Fault::HeldPollIs503 => &["agent.events.wake"],
            Fault::LongWaitIs500 => &["limits.wait", "schema.negative.normative"],
            // Only the pages are renamed, not the stream: the two projections differ.
            Fault::SixthTurnState => &[
                "agent.sse.resume",
                "agent.turns.terminal",
                "schema.responses",
                "stateful.startChat",
            ],
            // A stream that repeats what came before the cursor did not take it where the
            // profile says: resuming is inconclusive, and the profile's refusals are missed.
            Fault::StreamIgnoresCursor => {
                &["agent.events.expired-cursor", "agent.events.invalid-cursor"]
            }
            Fault::StreamDropsUserMessages => &["agent.sse.resume"],
            Fault::StatementDown => &["account.statement", "schema.negative.profile"],
            Fault::DescriptorKind => &["pipeline.operation-descriptor", "schema.responses"],
            // The MCP checks compare with the HTTP API: a broken API breaks them too.
            Fault::BuildVersion1 => &[
                "mcp.build",
                "pipeline.attestation",
                "pipeline.build",
                "pipeline.commit-expired",
                "pipeline.commit-tampered",
                "pipeline.digest",
                "pipeline.commit",
                "pipeline.svm",
                "schema.responses",
                "stateful.evmBuild",
                "stateful.svmStage",
            ],
            Fault::UnpublishedKey => &["pipeline.attestation"],
            Fault::IgnoresPatch => &["agent.sessions.update"],
            Fault::DeleteKeepsSession => &["agent.sessions.delete"],
            Fault::RefusesSkillCalls => &["pipeline.skill-call"],
            Fault::EmptyAppCatalog => &["pipeline.apps", "mcp.catalog-tool"],
            Fault::CredentialsNeverPresent => &["account.install"],
            Fault::DropsNulls => &["schema.negative.normative", "schema.negative.profile"],
            Fault::ArchivedAsString => &[
                "agent.sessions.update",
                "schema.negative.normative",
                "schema.responses",
                "stateful.startChat",
            ],
            Fault::PageExtraMember => &["schema.event-page"],
            Fault::UninstallKeepsApp => &["account.install"],
            Fault::AppNameAsNumber => &["pipeline.apps", "schema.responses", "mcp.catalog-tool"],
            Fault::SkillAsNumber => &["schema.responses"],
            Fault::PresentAsString => &["account.install", "schema.responses"],
            // The spends re-simulate against an unfunded account: inconclusive.
            Fault::CommitsNothing => &["pipeline.commit", "pipeline.commit-tampered"],
            Fault::McpNoResourceMetadata => &["mcp.unauthorized"],
            Fault::McpAcceptsOtherAudience => &["mcp.audience"],
            Fault::McpDown => &[
                "mcp.initialize",
                "mcp.tools",
                "mcp.catalog-tool",
                "mcp.build",
                "mcp.scope",
            ],
            Fault::McpDuplicateTools => &["mcp.tools"],
            Fault::McpCatalogDiffers => &["mcp.catalog-tool"],
            Fault::McpBuildDiffers => &["mcp.build"],
            Fault::McpIgnoresScopes => &["mcp.scope"],
            Fault::DuplicatesEvents => &["agent.events.round-trip"],
            Fault::RefusesSingleScopes => &["auth.grants"],
            Fault::ExpiredIs400 => &["agent.events.expired-cursor"],
        }
    }
}

/// The layer's state: the fault, the run's tokens, and what it has seen.
struct Injector {
    fault: Fault,
    tokens: Mutex<Tokens>,
    builds: Mutex<HashMap<String, Value>>,
    keys: Mutex<HashSet<String>>,
    ended: Mutex<HashMap<String, Value>>,
}

fn bearer(token: Option<&str>) -> HeaderValue {
    HeaderValue::from_str(&format!("Bearer {}", token.unwrap_or_default()))
        .expect("a token is a header value")
}

/// The claims of a bearer JWT, `Null` for anything else.
fn claims(authorization: &HeaderValue) -> Value {
    let token = authorization.to_str().unwrap_or_default();
    let payload = token.split('.').nth(1).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

async fn read_json(body: Body) -> (Bytes, Value) {
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (bytes, value)
}

/// A request of `parts` with `body` in place of the one it had.
fn with_body(parts: axum::http::request::Parts, body: impl Into<Body>) -> Request {
    let mut request = Request::from_parts(parts, body.into());
    request.headers_mut().remove(header::CONTENT_LENGTH);
    request
}

/// What a commit of `build` answers, made up without the server.
fn made_up_commit(build: &Value) -> Response {
    let result = json!({
        "status": "committed",
        "chain": build["actions"][0]["chain"],
        "digest": build["digest"],
        "transactions": [{ "step": 1, "id": "0x00" }],
        "simulation": build["simulation"],
        "committedAt": now(),
    });
    json_response(StatusCode::OK, &result)
}

/// Rebuilds `response` with `body`, or the original bytes when `body` is `None`.
fn rebuilt(mut parts: axum::http::response::Parts, bytes: Bytes, body: Option<Value>) -> Response {
    parts.headers.remove(header::CONTENT_LENGTH);
    let bytes = body.map_or(bytes, |value| Bytes::from(value.to_string()));
    Response::from_parts(parts, Body::from(bytes))
}

/// What the layer sees of a request, worked out once before a fault acts on it.
struct Seen {
    path: String,
    query: String,
    method: Method,
    authorization: Option<HeaderValue>,
    tokens: Tokens,
    claims: Value,
    is_events: bool,
    is_lifecycle: bool,
    is_resolve: bool,
    is_session: bool,
    is_mcp: bool,
    /// Whether the request carries the token of an MCP resource.
    mcp_token: bool,
    /// The JSON-RPC method and tool name of an MCP message, for the faults on its answer.
    rpc: (String, String),
}

impl Seen {
    /// What `request` shows, and the request to pass on (an MCP message's body is read, and put
    /// back).
    async fn of(injector: &Injector, mut request: Request) -> (Seen, Request) {
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or_default().to_owned();
        let method = request.method().clone();
        let authorization = request.headers().get(header::AUTHORIZATION).cloned();
        let tokens = injector.tokens.lock().unwrap().clone();
        let claims = authorization.as_ref().map(claims).unwrap_or_default();
        let is_events =
            method == "GET" && path.starts_with("/v1/agent/chat/") && !path.ends_with("/stream");
        let is_lifecycle =
            method == "POST" && (path.ends_with("/evm/build") || path.ends_with("/svm/stage"));
        let is_resolve = method == "POST" && path.ends_with("/resolve");
        let is_session = path.starts_with("/v1/agent/sessions/") && !path.contains("/actions/");
        let is_mcp = path == "/v1/agent/mcp" || path == "/v1/pipeline/mcp";
        let mcp_token = [
            bearer(tokens.get(Role::AgentMcp)),
            bearer(tokens.get(Role::PipelineMcp)),
        ]
        .into_iter()
        .any(|token| authorization.as_ref() == Some(&token));
        let mut rpc = (String::new(), String::new());
        if is_mcp && method == "POST" {
            let (parts, body) = request.into_parts();
            let (bytes, message) = read_json(body).await;
            let name = |pointer: &str| message.pointer(pointer).and_then(Value::as_str);
            rpc = (
                name("/method").unwrap_or_default().to_owned(),
                name("/params/name").unwrap_or_default().to_owned(),
            );
            request = with_body(parts, bytes);
        }
        let seen = Seen {
            path,
            query,
            method,
            authorization,
            tokens,
            claims,
            is_events,
            is_lifecycle,
            is_resolve,
            is_session,
            is_mcp,
            mcp_token,
            rpc,
        };
        (seen, request)
    }

    /// Whether the request carries `role`'s token.
    fn holds(&self, role: Role) -> bool {
        self.authorization == Some(bearer(self.tokens.get(role)))
    }
}

/// Makes `request` carry `role`'s token.
fn act_as(request: &mut Request, seen: &Seen, role: Role) {
    request
        .headers_mut()
        .insert(header::AUTHORIZATION, bearer(seen.tokens.get(role)));
}

/// An error envelope answered with `status`.
fn error_response(status: StatusCode, code: &str, message: &str) -> Response {
    let error = json!({ "error": { "code": code, "message": message } });
    json_response(status, &error)
}

/// Whether `value` is a commit result that says it committed.
fn committed(value: &Value) -> bool {
    value["status"] == "committed"
}

/// Remembers `build` under its digest when it is a Build (not a commit result); changes nothing.
fn record_build(injector: &Injector, build: &Value) -> bool {
    if !committed(build) {
        let digest = build["digest"].as_str().unwrap_or_default().to_owned();
        injector
            .builds
            .lock()
            .unwrap()
            .insert(digest, build.clone());
    }
    false
}

/// The body to commit for `build` (read as `bytes`): the Build issued under its digest when it
/// differs from that one, else `bytes`.
fn as_issued(injector: &Injector, build: &Value, bytes: Bytes) -> Bytes {
    let digest = build["digest"].as_str().unwrap_or_default();
    let original = injector.builds.lock().unwrap().get(digest).cloned();
    match original {
        Some(original) if original != *build => Bytes::from(original.to_string()),
        _ => bytes,
    }
}

/// `response` with its JSON edited by `edit` when it is a 200; `edit` says whether it changed
/// anything, and the original bytes are kept when not.
async fn edit_ok_json(response: Response, edit: impl FnOnce(&mut Value) -> bool) -> Response {
    if response.status() != StatusCode::OK {
        return response;
    }
    let (parts, body) = response.into_parts();
    let (bytes, mut value) = read_json(body).await;
    let changed = edit(&mut value);
    rebuilt(parts, bytes, changed.then_some(value))
}

/// Passes `request` on; when `applies`, edits the answer as [`edit_ok_json`] does.
async fn edit_answer(
    applies: bool,
    request: Request,
    next: Next,
    edit: impl FnOnce(&mut Value) -> bool,
) -> Response {
    let response = next.run(request).await;
    if !applies {
        return response;
    }
    edit_ok_json(response, edit).await
}

/// Passes `request` on; when it is an MCP message, edits the `result` of a 200 answer, sent as
/// JSON or, in a handshake session, as the data of an SSE event.
async fn edit_mcp_result(
    seen: &Seen,
    request: Request,
    next: Next,
    edit: impl FnOnce(&mut Value) -> bool,
) -> Response {
    let response = next.run(request).await;
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"));
    if !seen.is_mcp || response.status() != StatusCode::OK {
        return response;
    }
    if !sse {
        return edit_ok_json(response, |answer| edit(&mut answer["result"])).await;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let mut edit = Some(edit);
    let lines: Vec<String> = String::from_utf8_lossy(&bytes)
        .split('\n')
        .map(|line| {
            let message = line.strip_prefix("data:").and_then(|data| {
                serde_json::from_str::<Value>(data.trim_start())
                    .ok()
                    .filter(|message| message.get("result").is_some())
            });
            if let Some(mut message) = message
                && let Some(edit) = edit.take()
                && edit(&mut message["result"])
            {
                return format!("data: {message}");
            }
            line.to_owned()
        })
        .collect();
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(lines.join("\n")))
}

/// The layer: hands each request to the handler of the injector's fault.
async fn inject(State(injector): State<Arc<Injector>>, request: Request, next: Next) -> Response {
    let (seen, request) = Seen::of(&injector, request).await;
    let (injector, seen) = (&*injector, &seen);
    match injector.fault {
        Fault::ExtraSimulationField => extra_simulation_field(seen, request, next).await,
        Fault::BadCursorIs500 => bad_cursor_is_500(seen, request, next).await,
        Fault::AcceptsExpiredBuild => accepts_expired_build(seen, request, next).await,
        Fault::SkipsSequence => skips_sequence(seen, request, next).await,
        Fault::LeaksSessions => leaks_sessions(seen, request, next).await,
        Fault::OpenStatement => open_statement(seen, request, next).await,
        Fault::UnauthorizedIs403 => unauthorized_is_403(request, next).await,
        Fault::IgnoresScopes => ignores_scopes(seen, request, next).await,
        Fault::RenamesPageEvents => renames_page_events(seen, request, next).await,
        Fault::IgnoresWait => ignores_wait(seen, request, next).await,
        Fault::AcceptsTamperedBuild => accepts_tampered_build(injector, seen, request, next).await,
        Fault::SkipsResimulation => skips_resimulation(seen, request, next).await,
        Fault::WrongDigest => wrong_digest(seen, request, next).await,
        Fault::LimitsAre500 => limits_are_500(seen, request, next).await,
        Fault::ConflictIs400 => conflict_is_400(seen, request, next).await,
        Fault::ForgetsIdempotencyKeys => {
            forgets_idempotency_keys(injector, seen, request, next).await
        }
        Fault::ReopensTurns => reopens_turns(injector, seen, request, next).await,
        Fault::PlainTextNotFound => plain_text_not_found(request, next).await,
        Fault::StepZero => step_zero(seen, request, next).await,
        Fault::BuildStepZero => build_step_zero(injector, seen, request, next).await,
        Fault::StreamIgnoresCursor => stream_ignores_cursor(seen, request, next).await,
        Fault::StreamDropsUserMessages => stream_drops_user_messages(seen, request, next).await,
        Fault::UnauthorizedIs500 => unauthorized_is_500(request, next).await,
        Fault::HeldPollIs503 => held_poll_is_503(seen, request, next).await,
        Fault::LongWaitIs500 => long_wait_is_500(seen, request, next).await,
        Fault::SixthTurnState => sixth_turn_state(seen, request, next).await,
        Fault::StatementDown => statement_down(seen, request, next).await,
        Fault::DescriptorKind => descriptor_kind(seen, request, next).await,
        Fault::BuildVersion1 => build_version_1(seen, request, next).await,
        Fault::UnpublishedKey => unpublished_key(seen, request, next).await,
        Fault::IgnoresPatch => ignores_patch(seen, request, next).await,
        Fault::DeleteKeepsSession => delete_keeps_session(seen, request, next).await,
        Fault::RefusesSkillCalls => refuses_skill_calls(seen, request, next).await,
        Fault::EmptyAppCatalog => empty_app_catalog(seen, request, next).await,
        Fault::CredentialsNeverPresent => credentials_never_present(seen, request, next).await,
        Fault::DropsNulls => drops_nulls(seen, request, next).await,
        Fault::ArchivedAsString => archived_as_string(seen, request, next).await,
        Fault::PageExtraMember => page_extra_member(seen, request, next).await,
        Fault::UninstallKeepsApp => uninstall_keeps_app(seen, request, next).await,
        Fault::AppNameAsNumber => app_name_as_number(seen, request, next).await,
        Fault::SkillAsNumber => skill_as_number(seen, request, next).await,
        Fault::PresentAsString => present_as_string(seen, request, next).await,
        Fault::CommitsNothing => commits_nothing(injector, seen, request, next).await,
        Fault::McpNoResourceMetadata => mcp_no_resource_metadata(seen, request, next).await,
        Fault::McpAcceptsOtherAudience => mcp_accepts_other_audience(seen, request, next).await,
        Fault::McpDown => mcp_down(seen, request, next).await,
        Fault::McpDuplicateTools => mcp_duplicate_tools(seen, request, next).await,
        Fault::McpCatalogDiffers => mcp_catalog_differs(seen, request, next).await,
        Fault::McpBuildDiffers => mcp_build_differs(seen, request, next).await,
        Fault::McpIgnoresScopes => mcp_ignores_scopes(seen, request, next).await,
        Fault::DuplicatesEvents => duplicates_events(seen, request, next).await,
        Fault::RefusesSingleScopes => refuses_single_scopes(seen, request, next).await,
        Fault::ExpiredIs400 => expired_is_400(seen, request, next).await,
    }
}

/// Adds a `debug` property to the simulation of commit results.
async fn extra_simulation_field(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_lifecycle, request, next, |value| {
        if !committed(value) {
            return false;
        }
        value["simulation"]["debug"] = json!(true);
        true
    })
    .await
}

/// Answers 500 where an event page's cursor is refused with 400.
async fn bad_cursor_is_500(seen: &Seen, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let with_cursor = seen.is_events && seen.query.contains("cursor=");
    if with_cursor && response.status() == StatusCode::BAD_REQUEST {
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal", "boom");
    }
    response
}

/// Commits a Build past its `expiresAt` without the server.
async fn accepts_expired_build(seen: &Seen, request: Request, next: Next) -> Response {
    if !seen.is_lifecycle {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let (bytes, build) = read_json(body).await;
    if build["expiresAt"].as_i64().is_some_and(|at| at < now()) {
        return made_up_commit(&build);
    }
    // Nothing records Builds under this fault, so none is put back as issued.
    next.run(with_body(parts, bytes)).await
}

/// Leaves sequence number 2 out of event pages.
async fn skips_sequence(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_events, request, next, |page| {
        let events = page["events"].as_array_mut();
        events.is_some_and(|events| {
            let before = events.len();
            events.retain(|event| event["seq"] != 2);
            events.len() != before
        })
    })
    .await
}

/// Passes the second account's requests on with the first account's token.
async fn leaks_sessions(seen: &Seen, mut request: Request, next: Next) -> Response {
    if seen.claims["sub"] == "conformance-other" {
        let own = if seen.path.starts_with("/v1/account/") {
            Role::Account
        } else {
            Role::Agent
        };
        act_as(&mut request, seen, own);
    }
    next.run(request).await
}

/// Passes an untokened statement request on with the account's token.
async fn open_statement(seen: &Seen, mut request: Request, next: Next) -> Response {
    if seen.path == "/v1/account/statement" && seen.authorization.is_none() {
        act_as(&mut request, seen, Role::Account);
    }
    next.run(request).await
}

/// Answers 403 in place of every 401.
async fn unauthorized_is_403(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        *response.status_mut() = StatusCode::FORBIDDEN;
    }
    response
}

/// Passes the run's narrower Agent tokens on as the full Agent token.
async fn ignores_scopes(seen: &Seen, mut request: Request, next: Next) -> Response {
    let aud = seen.claims["aud"].as_str();
    let agent_audience = aud.is_some_and(|aud| aud.ends_with("/v1/agent"));
    let agent_path = seen.path.starts_with("/v1/agent/");
    if seen.claims["sub"] == "conformance" && agent_audience && agent_path {
        act_as(&mut request, seen, Role::Agent);
    }
    next.run(request).await
}

/// Names the SSE `page` events `snapshot`.
async fn renames_page_events(seen: &Seen, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if !seen.path.ends_with("/stream") || response.status() != StatusCode::OK {
        return response;
    }
    let (parts, body) = response.into_parts();
    let renamed = body.into_data_stream().map(|chunk| {
        chunk.map(|bytes| {
            Bytes::from(String::from_utf8_lossy(&bytes).replace("event: page", "event: snapshot"))
        })
    });
    Response::from_parts(parts, Body::from_stream(renamed))
}

/// Strips `wait` from event page requests.
async fn ignores_wait(seen: &Seen, mut request: Request, next: Next) -> Response {
    if seen.is_events {
        let kept: Vec<&str> = seen
            .query
            .split('&')
            .filter(|pair| !pair.starts_with("wait="))
            .collect();
        *request.uri_mut() = format!("{}?{}", seen.path, kept.join("&")).parse().unwrap();
    }
    next.run(request).await
}

/// Commits a changed Build as the one it issued under that digest.
async fn accepts_tampered_build(
    injector: &Injector,
    seen: &Seen,
    request: Request,
    next: Next,
) -> Response {
    presenting_as_issued(injector, seen, request, next, |value| {
        record_build(injector, value)
    })
    .await
}

/// Passes a lifecycle request on with the Build issued under the digest of the one it presents
/// ([`as_issued`]), and edits the answer as [`edit_ok_json`] does.
async fn presenting_as_issued(
    injector: &Injector,
    seen: &Seen,
    request: Request,
    next: Next,
    edit: impl FnOnce(&mut Value) -> bool,
) -> Response {
    if !seen.is_lifecycle {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let (bytes, build) = read_json(body).await;
    let bytes = as_issued(injector, &build, bytes);
    let response = next.run(with_body(parts, bytes)).await;
    edit_ok_json(response, edit).await
}

/// Answers a commit whose re-simulation fails as committed.
async fn skips_resimulation(seen: &Seen, request: Request, next: Next) -> Response {
    if !seen.is_lifecycle {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let (bytes, build) = read_json(body).await;
    let response = next.run(with_body(parts, bytes)).await;
    let (parts, body) = response.into_parts();
    let (bytes, answer) = read_json(body).await;
    if answer.pointer("/error/code") == Some(&json!("simulation_failed")) {
        return made_up_commit(&build);
    }
    rebuilt(parts, bytes, None)
}

/// Gives Builds a digest that is not their content's.
async fn wrong_digest(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_lifecycle, request, next, |value| {
        if committed(value) {
            return false;
        }
        // Not a one-character change: the tampering check changes one, and could undo it.
        value["digest"] = json!(format!("sha256:{}", "ab".repeat(32)));
        true
    })
    .await
}

/// Answers 500 where an out-of-range path parameter is refused with 400.
async fn limits_are_500(seen: &Seen, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let out_of_range = seen
        .path
        .split('/')
        .any(|segment| segment.len() > 128 || ["0", "first", "1ST_KEY"].contains(&segment));
    if out_of_range && response.status() == StatusCode::BAD_REQUEST {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "out of range",
        );
    }
    response
}

/// Answers 400 in place of a resolution's 409.
async fn conflict_is_400(seen: &Seen, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if seen.is_resolve && response.status() == StatusCode::CONFLICT {
        *response.status_mut() = StatusCode::BAD_REQUEST;
    }
    response
}

/// Drops the Idempotency-Key of a resolution whose key it has seen before.
async fn forgets_idempotency_keys(
    injector: &Injector,
    seen: &Seen,
    mut request: Request,
    next: Next,
) -> Response {
    if seen.is_resolve {
        let key = request.headers().get("idempotency-key").cloned();
        let key = key.and_then(|key| key.to_str().ok().map(str::to_owned));
        if let Some(key) = key
            && !injector.keys.lock().unwrap().insert(key)
        {
            request.headers_mut().remove("idempotency-key");
        }
    }
    next.run(request).await
}

/// Shows an ended turn as processing again to a held poll that finds nothing new.
async fn reopens_turns(injector: &Injector, seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_events, request, next, |page| {
        reopen(injector, &seen.path, &seen.query, page)
    })
    .await
}

/// Answers every 404 in plain text.
async fn plain_text_not_found(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status() != StatusCode::NOT_FOUND {
        return response;
    }
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("not found"))
        .unwrap()
}

/// Numbers the simulation steps of commit results from 0.
async fn step_zero(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_lifecycle, request, next, |value| {
        if !committed(value) {
            return false;
        }
        for log in value["simulation"]["logs"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            log["step"] = json!(0);
        }
        for change in value["simulation"]["balanceChanges"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            change["step"] = json!(0);
        }
        true
    })
    .await
}

/// Sets the simulation steps of Builds to 0, and presents the Build it issued in place of one
/// presented back to it.
async fn build_step_zero(
    injector: &Injector,
    seen: &Seen,
    request: Request,
    next: Next,
) -> Response {
    presenting_as_issued(injector, seen, request, next, |value| {
        if committed(value) {
            return false;
        }
        record_build(injector, value);
        let simulation = &mut value["simulation"];
        for entry in ["logs", "balanceChanges"] {
            for item in simulation[entry].as_array_mut().into_iter().flatten() {
                item["step"] = json!(0);
            }
        }
        true
    })
    .await
}

/// Leaves the user's messages out of the pages of a stream opened from a cursor.
async fn stream_drops_user_messages(seen: &Seen, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let resumed = seen.path.ends_with("/stream") && !seen.query.is_empty();
    if !resumed || response.status() != StatusCode::OK {
        return response;
    }
    let (parts, body) = response.into_parts();
    let edited = body.into_data_stream().map(|chunk| {
        chunk.map(|bytes| {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<String> = text
                .split('\n')
                .map(|line| {
                    let data = line.strip_prefix("data:").map(str::trim);
                    match data.map(serde_json::from_str::<Value>) {
                        Some(Ok(mut page)) if page["events"].is_array() => {
                            if let Some(events) = page["events"].as_array_mut() {
                                events.retain(|event| event["role"] != "user");
                            }
                            format!("data: {page}")
                        }
                        _ => line.to_owned(),
                    }
                })
                .collect();
            Bytes::from(lines.join("\n"))
        })
    });
    Response::from_parts(parts, Body::from_stream(edited))
}

/// Opens a stream without the cursor it was asked to resume from.
async fn stream_ignores_cursor(seen: &Seen, mut request: Request, next: Next) -> Response {
    if seen.path.ends_with("/stream") && !seen.query.is_empty() {
        *request.uri_mut() = seen.path.parse().expect("a path");
    }
    next.run(request).await
}

/// Answers 500 in place of every 401.
async fn unauthorized_is_500(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal", "no token");
    }
    response
}

/// Answers 503 to a poll held 20 s.
async fn held_poll_is_503(seen: &Seen, request: Request, next: Next) -> Response {
    if seen.is_events && seen.query.split('&').any(|pair| pair == "wait=20000") {
        return error_response(StatusCode::SERVICE_UNAVAILABLE, "busy", "try later");
    }
    next.run(request).await
}

/// Answers 500 to a poll with a `wait` above 30000.
async fn long_wait_is_500(seen: &Seen, request: Request, next: Next) -> Response {
    let long = seen.query.split('&').any(|pair| {
        pair.strip_prefix("wait=")
            .and_then(|wait| wait.parse::<u64>().ok())
            .is_some_and(|wait| wait > 30_000)
    });
    if seen.is_events && long {
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal", "wait");
    }
    next.run(request).await
}

/// Names the `processing` state of turns `thinking` in event pages.
async fn sixth_turn_state(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_events, request, next, |page| {
        let entries = page["events"].as_array_mut().into_iter().flatten();
        let mut renamed = false;
        for entry in entries.filter(|entry| entry["state"] == "processing") {
            entry["state"] = json!("thinking");
            renamed = true;
        }
        renamed
    })
    .await
}

/// Answers the account's statement requests 500.
async fn statement_down(seen: &Seen, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if seen.path == "/v1/account/statement" && seen.holds(Role::Account) {
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal", "down");
    }
    response
}

/// Gives operation descriptors the kind `action`.
async fn descriptor_kind(seen: &Seen, request: Request, next: Next) -> Response {
    let applies = seen.path.starts_with("/v1/pipeline/apps/");
    edit_answer(applies, request, next, |descriptor| {
        descriptor["kind"] = json!("action");
        true
    })
    .await
}

/// Gives Builds version 1.
async fn build_version_1(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_lifecycle, request, next, |value| {
        if committed(value) {
            return false;
        }
        value["version"] = json!(1);
        true
    })
    .await
}

/// Answers an empty JWKS.
async fn unpublished_key(seen: &Seen, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if seen.path == "/.well-known/jwks.json" {
        return json_response(StatusCode::OK, &json!({ "keys": [] }));
    }
    response
}

/// Passes session PATCHes on with an empty body.
async fn ignores_patch(seen: &Seen, request: Request, next: Next) -> Response {
    if seen.method == "PATCH" && seen.is_session {
        let (parts, _) = request.into_parts();
        return next.run(with_body(parts, "{}")).await;
    }
    next.run(request).await
}

/// Answers the Agent's session DELETEs 204 without deleting anything.
async fn delete_keeps_session(seen: &Seen, request: Request, next: Next) -> Response {
    if seen.method == "DELETE" && seen.is_session && seen.holds(Role::Agent) {
        return StatusCode::NO_CONTENT.into_response();
    }
    next.run(request).await
}

/// Refuses the Pipeline's skill calls with 400.
async fn refuses_skill_calls(seen: &Seen, request: Request, next: Next) -> Response {
    let skill_call = seen.method == "POST" && seen.path.starts_with("/v1/pipeline/skills/");
    if skill_call && seen.holds(Role::Pipeline) {
        return error_response(StatusCode::BAD_REQUEST, "invalid_request", "refused");
    }
    next.run(request).await
}

/// Answers an empty app catalog.
async fn empty_app_catalog(seen: &Seen, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if seen.path == "/v1/pipeline/apps" && response.status() == StatusCode::OK {
        return json_response(StatusCode::OK, &json!({ "apps": [] }));
    }
    response
}

/// Shows every credential absent.
async fn credentials_never_present(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.path.ends_with("/secrets"), request, next, |list| {
        for credential in list["credentials"].as_array_mut().into_iter().flatten() {
            credential["present"] = json!(false);
            credential["updatedAt"] = Value::Null;
        }
        true
    })
    .await
}

/// Drops the `null` members of request bodies before the server reads them.
async fn drops_nulls(seen: &Seen, request: Request, next: Next) -> Response {
    if !["POST", "PUT", "PATCH"].contains(&seen.method.as_str()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let (bytes, mut value) = read_json(body).await;
    let bytes = match value.as_object_mut() {
        Some(members) => {
            members.retain(|_, member| !member.is_null());
            Bytes::from(value.to_string())
        }
        None => bytes,
    };
    next.run(with_body(parts, bytes)).await
}

/// Answers sessions' `archived` as a string.
async fn archived_as_string(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_session, request, next, |session| {
        session["archived"] = json!(session["archived"].to_string());
        true
    })
    .await
}

/// Adds a `toolActivity` member to event pages.
async fn page_extra_member(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_events, request, next, |page| {
        page["toolActivity"] = json!([]);
        true
    })
    .await
}

/// Answers the account's app DELETEs as uninstalled without removing anything.
async fn uninstall_keeps_app(seen: &Seen, request: Request, next: Next) -> Response {
    let uninstall = seen.method == "DELETE"
        && seen.path.starts_with("/v1/account/apps/")
        && !seen.path.contains("/secrets");
    if !uninstall || !seen.holds(Role::Account) {
        return next.run(request).await;
    }
    let id: i64 = seen
        .path
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    let answer = json!({ "applicationId": id, "installed": false, "installedAt": null });
    json_response(StatusCode::OK, &answer)
}

/// Answers the app catalog's names as numbers.
async fn app_name_as_number(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.path == "/v1/pipeline/apps", request, next, |catalog| {
        for app in catalog["apps"].as_array_mut().into_iter().flatten() {
            app["name"] = json!(1);
        }
        true
    })
    .await
}

/// Answers a skill call's skill name as a number.
async fn skill_as_number(seen: &Seen, request: Request, next: Next) -> Response {
    let applies = seen.path.starts_with("/v1/pipeline/skills/");
    edit_answer(applies, request, next, |call| {
        call["skill"] = json!(1);
        true
    })
    .await
}

/// Answers the credential list's `present` as strings.
async fn present_as_string(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.path.ends_with("/secrets"), request, next, |list| {
        for credential in list["credentials"].as_array_mut().into_iter().flatten() {
            credential["present"] = json!(credential["present"].to_string());
        }
        true
    })
    .await
}

/// Answers the first commit of a Build it issued without the server, and refuses the rest.
async fn commits_nothing(
    injector: &Injector,
    seen: &Seen,
    request: Request,
    next: Next,
) -> Response {
    if !seen.is_lifecycle {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let (bytes, build) = read_json(body).await;
    let digest = build["digest"].as_str().unwrap_or_default().to_owned();
    let fresh = build["expiresAt"].as_i64().is_some_and(|at| at >= now());
    let issued = fresh && injector.builds.lock().unwrap().get(&digest) == Some(&build);
    if issued && injector.keys.lock().unwrap().insert(digest) {
        return made_up_commit(&build);
    }
    if issued {
        return error_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            "build_invalid",
            "committed",
        );
    }
    let response = next.run(with_body(parts, bytes)).await;
    edit_ok_json(response, |value| record_build(injector, value)).await
}

/// Answers an MCP resource's 401 without naming its resource metadata.
async fn mcp_no_resource_metadata(seen: &Seen, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if seen.is_mcp && response.status() == StatusCode::UNAUTHORIZED {
        let plain = HeaderValue::from_static(r#"Bearer error="invalid_token""#);
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, plain);
    }
    response
}

/// Passes MCP requests with the Agent's own token on with the Agent MCP token.
async fn mcp_accepts_other_audience(seen: &Seen, mut request: Request, next: Next) -> Response {
    if seen.is_mcp && seen.holds(Role::Agent) {
        act_as(&mut request, seen, Role::AgentMcp);
    }
    next.run(request).await
}

/// Answers 503 to every MCP request with an MCP resource's token.
async fn mcp_down(seen: &Seen, request: Request, next: Next) -> Response {
    if seen.is_mcp && seen.mcp_token {
        return error_response(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "down");
    }
    next.run(request).await
}

/// Gives tools/list's first tool twice.
async fn mcp_duplicate_tools(seen: &Seen, request: Request, next: Next) -> Response {
    edit_mcp_result(seen, request, next, |result| {
        if seen.rpc.0 != "tools/list" {
            return false;
        }
        let tools = result["tools"].as_array_mut();
        let first = tools.as_ref().and_then(|tools| tools.first().cloned());
        tools
            .zip(first)
            .map(|(tools, first)| tools.push(first))
            .is_some()
    })
    .await
}

/// Answers an empty catalog from the catalog tool.
async fn mcp_catalog_differs(seen: &Seen, request: Request, next: Next) -> Response {
    edit_mcp_result(seen, request, next, |result| {
        if (seen.rpc.0.as_str(), seen.rpc.1.as_str()) != ("tools/call", "listPipelineApps") {
            return false;
        }
        result["structuredContent"]["apps"] = json!([]);
        true
    })
    .await
}

/// Gives a Build made through MCP another title.
async fn mcp_build_differs(seen: &Seen, request: Request, next: Next) -> Response {
    edit_mcp_result(seen, request, next, |result| {
        if (seen.rpc.0.as_str(), seen.rpc.1.as_str()) != ("tools/call", "evmBuild") {
            return false;
        }
        result["structuredContent"]["summary"]["title"] = json!("Something else");
        true
    })
    .await
}

/// Answers a tool call refused for its scope as a success.
async fn mcp_ignores_scopes(seen: &Seen, request: Request, next: Next) -> Response {
    edit_mcp_result(seen, request, next, |result| {
        if seen.rpc.0 != "tools/call" || result["isError"] != true {
            return false;
        }
        result["isError"] = json!(false);
        true
    })
    .await
}

/// Delivers the first event of every page of two events or more twice.
async fn duplicates_events(seen: &Seen, request: Request, next: Next) -> Response {
    edit_answer(seen.is_events, request, next, |page| {
        let events = page["events"].as_array_mut();
        events.is_some_and(|events| {
            let twice = (events.len() >= 2).then(|| events[0].clone());
            twice.map(|first| events.push(first)).is_some()
        })
    })
    .await
}

/// Refuses every token holding a single scope with 403.
async fn refuses_single_scopes(seen: &Seen, request: Request, next: Next) -> Response {
    let single = seen.claims["scope"]
        .as_str()
        .is_some_and(|scope| !scope.is_empty() && !scope.contains(' '));
    if single {
        return error_response(StatusCode::FORBIDDEN, "insufficient_scope", "one");
    }
    next.run(request).await
}

/// Answers 400 `invalid_cursor` in place of an expired cursor's 410.
async fn expired_is_400(seen: &Seen, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if seen.is_events && response.status() == StatusCode::GONE {
        return error_response(StatusCode::BAD_REQUEST, "invalid_cursor", "expired");
    }
    response
}

/// Remembers each session's latest terminal turn state; a held poll that finds nothing new
/// gets that turn back as `processing`.
fn reopen(injector: &Injector, path: &str, query: &str, page: &mut Value) -> bool {
    let session = path.trim_start_matches("/v1/agent/chat/").to_owned();
    let events = page["events"].as_array_mut();
    let Some(events) = events else { return false };
    if let Some(ended) = events.iter().rev().find(|event| {
        event["type"] == "turn_state"
            && ["complete", "failed", "interrupted", "awaiting_action"]
                .contains(&event["state"].as_str().unwrap_or_default())
    }) {
        injector
            .ended
            .lock()
            .unwrap()
            .insert(session, ended.clone());
        return false;
    }
    let held = query.contains("wait=") && query.contains("cursor=");
    let ended = injector.ended.lock().unwrap().get(&session).cloned();
    match ended {
        Some(mut ended) if held && events.is_empty() => {
            ended["state"] = json!("processing");
            ended["seq"] = json!(ended["seq"].as_i64().unwrap_or(0) + 1);
            events.push(ended);
            true
        }
        _ => false,
    }
}

/// The token of each role, as the run will use it.
async fn role_tokens(target: &Target) -> Tokens {
    let mut tokens = Tokens::default();
    for &role in Role::all() {
        if let Ok(token) = target.role(role).await {
            tokens = tokens.with(role, token);
        }
    }
    tokens
}

/// Runs the whole suite, `jobs` checks at once, against the reference server, broken by `fault`
/// when given: its report with secrets redacted, and the tokens it used.
async fn suite(fault: Option<Fault>, jobs: usize) -> (Report, Vec<String>) {
    let injector = Arc::new(Injector {
        fault: fault.unwrap_or(Fault::ExtraSimulationField),
        tokens: Mutex::default(),
        builds: Mutex::default(),
        keys: Mutex::default(),
        ended: Mutex::default(),
    });
    let layer = injector.clone();
    let server = Embedded::start_with(move |app| match fault {
        Some(_) => app.layer(from_fn_with_state(layer, inject)),
        None => app,
    })
    .await
    .expect("the embedded server starts");
    let target = server.target();
    // The tokens the run will use, asked for first so that the layer can tell them apart.
    let tokens = role_tokens(&target).await;
    *injector.tokens.lock().unwrap() = tokens.clone();
    // The embedded server sets no rate limit; `rate_limit_probe_*` below runs that check. It is
    // one instance; `deployment_checks_*` below runs two.
    let selection = Selection {
        skip: vec!["limits.rate-limit".into(), "deployment".into()],
        ..Selection::default()
    };
    let report = run(&target, &selection, jobs, |_| {}).await;
    let report = intent_conformance::report::redacted(&report, &target.secrets());
    (report, tokens.secrets())
}

/// Each fault's suite, its checks one at a time (the faults run at once), run once in this
/// process for the tests that judge them: `(report, tokens)` in the order of [`Fault::ALL`].
/// Blocks until the runs end.
fn fault_runs() -> &'static [(Report, Vec<String>)] {
    static RUNS: OnceLock<Vec<(Report, Vec<String>)>> = OnceLock::new();
    RUNS.get_or_init(|| {
        // On a runtime of its own, so that the servers live as long as the runs and not as long
        // as the test that asked first.
        std::thread::spawn(|| {
            let runs = Fault::ALL.iter().map(|fault| suite(Some(*fault), 1));
            tokio::runtime::Runtime::new()
                .expect("a runtime for the fault suites")
                .block_on(futures_util::future::join_all(runs))
        })
        .join()
        .expect("the fault suites run")
    })
}

/// The outcome of `limits.rate-limit` against a reference server whose limit is `limit`,
/// probing with `probe` requests.
async fn rate_limit_check(limit: Option<&str>, probe: u32) -> (Status, Option<String>) {
    use intent_conformance::target::{Settings, Target};
    use intent_server::auth::resource::Resource;
    use intent_server::config::RateLimit;
    let limit = limit.map(|l| RateLimit::parse(l).unwrap());
    let server = intent_tests::TestServer::start_with(|config| config.rate_limit(limit)).await;
    let tokens = Tokens::default().with(
        Role::Account,
        server.token("probe", Resource::Account, &["account:apps:read"]),
    );
    let settings = Settings {
        rate_limit_probe: Some(probe),
        ..Settings::default()
    };
    let target = Target::new(server.base_url(), tokens, settings);
    let selection = Selection {
        only: vec!["limits.rate-limit".into()],
        ..Selection::default()
    };
    let report = run(&target, &selection, DEFAULT_JOBS, |_| {}).await;
    let outcome = report
        .outcomes
        .iter()
        .find(|outcome| outcome.id == "limits.rate-limit")
        .unwrap();
    (outcome.status, outcome.message.clone())
}

#[tokio::test]
async fn rate_limit_probe_passes_a_limited_server_and_fails_an_unlimited_one() {
    let (status, message) = rate_limit_check(Some("2:3"), 10).await;
    assert_eq!(status, Status::Pass, "{message:?}");
    let (status, message) = rate_limit_check(None, 10).await;
    assert_eq!(status, Status::Fail, "{message:?}");
    assert!(message.unwrap().contains("got no 429"));
}

/// Which request [`stall_first`] holds, and how long: the first that `holds` (given its parts
/// and its body), until `lifetime` has passed, as a stalled machine would.
#[derive(Clone)]
struct Stall {
    stalled: Arc<std::sync::atomic::AtomicBool>,
    holds: fn(&axum::http::request::Parts, &str) -> bool,
    lifetime: std::time::Duration,
}

async fn stall_first(State(stall): State<Stall>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let held = (stall.holds)(&parts, &String::from_utf8_lossy(&bytes));
    if held
        && !stall
            .stalled
            .swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        tokio::time::sleep(stall.lifetime + std::time::Duration::from_millis(1500)).await;
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// `check` alone against an embedded server that holds the first request `holds` past
/// `lifetime`: it passes.
async fn passes_a_stall(
    check: &str,
    holds: fn(&axum::http::request::Parts, &str) -> bool,
    lifetime: std::time::Duration,
) {
    let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stall = Stall {
        stalled: stalled.clone(),
        holds,
        lifetime,
    };
    let layer = from_fn_with_state(stall, stall_first);
    let server = Embedded::start_with(move |app| app.layer(layer))
        .await
        .expect("the embedded server starts");
    let selection = Selection {
        only: vec![check.into()],
        ..Selection::default()
    };
    let report = run(&server.target(), &selection, DEFAULT_JOBS, |_| {}).await;
    assert!(
        stalled.load(std::sync::atomic::Ordering::SeqCst),
        "{check} sent no request to hold"
    );
    assert_eq!(not_passed(&report), BTreeSet::new(), "{}", report.summary());
    assert_eq!(report.count(Status::Pass), 1, "{}", report.summary());
}

/// Whether the request's query carries a cursor and `also`.
fn cursor_and(parts: &axum::http::request::Parts, also: &str) -> bool {
    let query = parts.uri.query().unwrap_or_default();
    query.contains("cursor=") && query.contains(also)
}

#[tokio::test]
async fn a_stream_resumed_with_a_cursor_past_its_lifetime_is_tried_again_not_failed() {
    let resume = |parts: &axum::http::request::Parts, _: &str| {
        parts.uri.path().ends_with("/stream") && cursor_and(parts, "")
    };
    passes_a_stall(
        "agent.sse.resume",
        resume,
        intent_conformance::embedded::CURSOR_TTL,
    )
    .await;
}

#[tokio::test]
async fn a_log_read_whose_cursor_outlives_its_lifetime_starts_again_without_one() {
    let second_page = |parts: &axum::http::request::Parts, _: &str| cursor_and(parts, "limit=2");
    passes_a_stall(
        "agent.events.round-trip",
        second_page,
        intent_conformance::embedded::CURSOR_TTL,
    )
    .await;
}

#[tokio::test]
async fn a_build_that_expires_before_its_commit_is_made_again_not_inconclusive() {
    // The commit of one of `pipeline.commit-resimulates`'s two spends of 0.6.
    let spend = |_: &axum::http::request::Parts, body: &str| {
        body.contains("\"attestation\"") && body.contains("600000000000000000")
    };
    passes_a_stall(
        "pipeline.commit-resimulates",
        spend,
        intent_conformance::embedded::BUILD_TTL,
    )
    .await;
}

fn not_passed(report: &Report) -> BTreeSet<String> {
    report
        .outcomes
        .iter()
        .filter(|outcome| !matches!(outcome.status, Status::Pass | Status::Disabled))
        .map(|outcome| {
            format!(
                "{} ({}: {})",
                outcome.id,
                outcome.status.as_str(),
                outcome.message.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_server_passes_every_check_at_any_number_of_jobs() {
    let (report, _) = suite(None, DEFAULT_JOBS).await;
    assert!(not_passed(&report).is_empty(), "{:#?}", not_passed(&report));
    // The verdicts do not depend on how many checks run at once, nor does the report's order.
    let (one_at_a_time, _) = suite(None, 1).await;
    let verdicts = |report: &Report| -> Vec<(String, Status)> {
        report
            .outcomes
            .iter()
            .map(|outcome| (outcome.id.clone(), outcome.status))
            .collect()
    };
    assert_eq!(verdicts(&report), verdicts(&one_at_a_time));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let missed: Vec<_> = report.coverage.iter().filter(|o| !o.succeeded()).collect();
    assert!(
        missed.is_empty(),
        "{}: each operation needs a check that gets a success from it (a check in \
         conformance/src/checks, or a link that the stateful checks follow; docs/contributing.md, \
         An operation, end to end)",
        report.coverage_summary()
    );
    // The JSON report holds against the schema published for other tools.
    let path = intent_tests::workspace_root().join("conformance/report.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::draft202012::new(&schema).expect("the report schema compiles");
    let json = serde_json::to_value(&report).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&json)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    println!(
        "full suite against the embedded server: {} checks in {} ms",
        report.outcomes.len(),
        report.millis
    );
}

/// A fault's failures fingerprint the same in two runs, against two servers with their own
/// ports, sessions, times and cursors: a baseline of the first knows every break of the second.
#[tokio::test(flavor = "multi_thread")]
async fn the_same_faults_fingerprint_the_same_in_two_runs_on_other_ids_times_and_ports() {
    use intent_conformance::baseline::{Baseline, compare};
    let faults = [
        Fault::LeaksSessions,
        Fault::SkipsSequence,
        Fault::ExtraSimulationField,
        Fault::DeleteKeepsSession,
    ];
    // The first run of each is the one every fault's test judges.
    let seconds = futures_util::future::join_all(faults.iter().map(|fault| suite(Some(*fault), 1)));
    let (firsts, seconds) = tokio::join!(tokio::task::spawn_blocking(fault_runs), seconds);
    let firsts = firsts.expect("the fault suites run");
    for (fault, (second, _)) in faults.iter().zip(&seconds) {
        let at = Fault::ALL.iter().position(|each| each == fault).unwrap();
        let (first, _) = &firsts[at];
        let baseline = Baseline::of(first);
        assert!(!baseline.known.is_empty(), "{fault:?} fails something");
        let mut second = second.clone();
        let compared = compare(&mut second, &baseline, false);
        assert!(compared.new.is_empty(), "{fault:?}: {:#?}", compared.new);
        assert!(!second.failed(), "{fault:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_fault_fails_exactly_its_checks_and_every_normative_check_has_a_fault() {
    let reports = tokio::task::spawn_blocking(fault_runs)
        .await
        .expect("the fault suites run");
    let mut wrong = Vec::new();
    let mut caught = BTreeSet::new();
    for (fault, (report, tokens)) in Fault::ALL.iter().zip(reports) {
        // Behind any broken deployment, the console stays readable.
        let console = intent_conformance::report::console(report);
        let long = console.lines().find(|line| line.chars().count() > 300);
        assert!(long.is_none(), "{fault:?}: {long:?}");
        // Each failure over HTTP keeps its exchanges and a line that sends its last request
        // again, and no token is anywhere in the report.
        for outcome in report
            .outcomes
            .iter()
            .filter(|outcome| outcome.status == Status::Fail && outcome.category != Category::Mcp)
        {
            let answered = outcome.exchanges.last().is_some_and(|exchange| {
                exchange.status.is_some() && exchange.url.starts_with("http://127.0.0.1:")
            });
            assert!(answered, "{fault:?}: {} kept no exchange", outcome.id);
            let reproduce = outcome.reproduce.as_deref().unwrap_or_default();
            assert!(
                reproduce.starts_with("curl -sS -X "),
                "{fault:?}: {reproduce}"
            );
        }
        let json = serde_json::to_string(report).unwrap();
        for token in tokens {
            assert!(
                !json.contains(token.as_str()),
                "{fault:?}: a token in the report"
            );
        }
        let ids = |keep: fn(Status) -> bool| -> BTreeSet<&str> {
            report
                .outcomes
                .iter()
                .filter(|outcome| keep(outcome.status))
                .map(|outcome| outcome.id.as_str())
                .collect()
        };
        let failed = ids(|status| status == Status::Fail);
        let expected: BTreeSet<&str> = report
            .outcomes
            .iter()
            .map(|outcome| outcome.id.as_str())
            .filter(|id| {
                fault
                    .breaks()
                    .iter()
                    .any(|pattern| match pattern.strip_suffix('*') {
                        Some(prefix) => id.starts_with(prefix),
                        None => id == pattern,
                    })
            })
            .collect();
        // A check the deployment's catalog cannot serve skips and names its input, and one whose
        // means the deployment refuses is inconclusive: no verdict.
        let unpassed: BTreeSet<&str> = report
            .outcomes
            .iter()
            .filter(|outcome| !matches!(outcome.status, Status::Pass | Status::Disabled))
            .filter(|outcome| {
                outcome.status != Status::Skip
                    || !outcome.message.as_deref().is_some_and(|message| {
                        message.contains("set inputs.") || message.starts_with("inconclusive")
                    })
            })
            .map(|outcome| outcome.id.as_str())
            .collect();
        if failed != expected || unpassed != expected {
            wrong.push(format!(
                "{fault:?}: expected {expected:?} to fail, got {:#?}",
                not_passed(report)
            ));
        }
        // A normative check counts as caught only by a failure at the normative level.
        caught.extend(
            report
                .outcomes
                .iter()
                .filter(|outcome| outcome.status == Status::Fail)
                .filter(|outcome| outcome.level == Level::Normative)
                .map(|outcome| outcome.id.as_str()),
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    let uncaught: Vec<&str> = reports[0]
        .0
        .outcomes
        .iter()
        .filter(|outcome| {
            outcome.level == Level::Normative && !caught.contains(outcome.id.as_str())
        })
        .map(|outcome| outcome.id.as_str())
        .collect();
    assert!(
        uncaught.is_empty(),
        "normative checks no fault fails: {uncaught:?}"
    );
}

/// The `deployment` checks against `first` with `peer` as its second address.
async fn deployment_checks(
    first: &intent_tests::TestServer,
    peer: &intent_tests::TestServer,
) -> Vec<(String, Status, Option<String>)> {
    use intent_conformance::target::{AGENT_SCOPES, PIPELINE_SCOPES};
    use intent_conformance::target::{Settings, Target};
    use intent_server::auth::resource::Resource;
    let tokens = Tokens::default()
        .with(
            Role::Agent,
            first.token("conformance", Resource::Agent, &AGENT_SCOPES),
        )
        .with(
            Role::Pipeline,
            first.token("conformance", Resource::Pipeline, &PIPELINE_SCOPES),
        );
    let settings = Settings {
        peer_url: Some(peer.base_url().to_owned()),
        ..Settings::default()
    };
    let target = Target::new(first.base_url(), tokens, settings);
    let selection = Selection {
        only: vec!["deployment".into()],
        ..Selection::default()
    };
    let report = run(&target, &selection, DEFAULT_JOBS, |_| {}).await;
    report
        .outcomes
        .iter()
        .filter(|outcome| outcome.status != Status::Disabled)
        .map(|outcome| (outcome.id.clone(), outcome.status, outcome.message.clone()))
        .collect()
}

/// Two instances on one PostgreSQL database pass every `deployment` check, and two that share
/// their keys but not their database (the fault) fail every one. Needs
/// `INTENT_TEST_DATABASE_URL`; passes trivially without it.
#[tokio::test(flavor = "multi_thread")]
async fn deployment_checks_pass_one_database_and_fail_two() {
    let first = intent_tests::TestServer::start().await;
    if first.database_url().is_none() {
        eprintln!("skipped: set INTENT_TEST_DATABASE_URL to run the deployment checks");
        return;
    }
    let peer = first.peer_with(|config| config).await;
    let outcomes = deployment_checks(&first, &peer).await;
    assert_eq!(outcomes.len(), 4);
    for (id, status, message) in &outcomes {
        assert_eq!(*status, Status::Pass, "{id}: {message:?}");
    }
    let detached = first.detached_peer().await;
    for (id, status, message) in deployment_checks(&first, &detached).await {
        assert_eq!(
            status,
            Status::Fail,
            "{id} must fail on separate databases: {message:?}"
        );
    }
}

/// Each app of the account as `GET /v1/account/apps` lists it, with whether it is installed and
/// its credentials' presence as `GET .../secrets` lists them.
async fn account_state(target: &Target) -> Vec<(Value, Value, Vec<(Value, Value)>)> {
    let token = target.role(Role::Account).await.unwrap();
    let get = |path: String| {
        let token = token.clone();
        async move {
            let reply = target
                .request(reqwest::Method::GET, &path)
                .bearer(&token)
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status, 200, "{path}: {}", reply.text);
            reply.body
        }
    };
    let mut state = Vec::new();
    for app in get("/v1/account/apps".into()).await["apps"]
        .as_array()
        .unwrap()
    {
        let path = format!("/v1/account/apps/{}/secrets", app["id"]);
        let credentials = get(path).await["credentials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|credential| (credential["name"].clone(), credential["present"].clone()))
            .collect();
        state.push((app["id"].clone(), app["installed"].clone(), credentials));
    }
    state
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_leaves_the_account_as_it_found_it() {
    let server = Embedded::start().await.unwrap();
    let target = server.target();
    let before = account_state(&target).await;
    let selection = Selection {
        skip: vec!["limits.rate-limit".into(), "deployment".into()],
        ..Selection::default()
    };
    let report = run(&target, &selection, DEFAULT_JOBS, |_| {}).await;
    assert!(!report.failed(), "{:#?}", not_passed(&report));
    // What a check stopped halfway leaves: its credentials saved and its app installed.
    let install = intent_conformance::checks::subjects::install(&target)
        .await
        .unwrap();
    let token = target.role(Role::Account).await.unwrap();
    let app = format!("/v1/account/apps/{}", install.application_id);
    let mut left = Vec::new();
    for (name, value) in &install.credentials {
        let path = format!("{app}/secrets/{name}");
        let saved = target
            .request(reqwest::Method::PUT, &path)
            .bearer(&token)
            .json(&json!({ "value": value }))
            .send()
            .await
            .unwrap();
        assert_eq!(saved.status, 200, "{}", saved.text);
        left.push(path);
    }
    let installed = target
        .request(reqwest::Method::POST, &app)
        .bearer(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(installed.status, 200, "{}", installed.text);
    left.push(app);
    let cleanup = target.clean_up().await;
    assert!(cleanup.left.is_empty(), "{cleanup:?}");
    assert!(
        left.iter().all(|path| cleanup.removed.contains(path)),
        "{cleanup:?}"
    );
    let sessions: Vec<&String> = cleanup
        .removed
        .iter()
        .filter(|path| path.starts_with("/v1/agent/sessions/"))
        .collect();
    // However many the checks and the links they follow leave: some do, and each is gone.
    assert!(!sessions.is_empty(), "{cleanup:?}");
    // The same apps installed, no credential saved, and no session of the run readable.
    let after = account_state(&target).await;
    assert_eq!(before, after);
    let saved: Vec<_> = after
        .iter()
        .flat_map(|(_, _, credentials)| credentials)
        .filter(|(_, present)| present == &json!(true))
        .collect();
    assert!(saved.is_empty(), "{saved:?}");
    let token = target.role(Role::Agent).await.unwrap();
    for path in sessions {
        let reply = target
            .request(reqwest::Method::GET, path)
            .bearer(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status, 404, "{path}: {}", reply.text);
    }
    let again = target.clean_up().await;
    assert!(
        again.removed.is_empty() && again.left.is_empty(),
        "{again:?}"
    );
}

/// The events a run tells, as its reporters hear them: each check's start, then what it
/// asserted, exchanged and met, then its end, summing to its outcome; the run's start and end
/// around them all.
#[tokio::test(flavor = "multi_thread")]
async fn the_events_of_a_run_tell_each_check_in_order_and_sum_to_its_outcome() {
    use intent_conformance::suite::CheckEvent;
    let server = Embedded::start().await.expect("the embedded server starts");
    let target = server.target();
    let selection = Selection {
        // Turns and streams make exchanges and assertions; `schema.responses` runs alone after
        // them and cites the responses it judged.
        only: vec![
            "agent.turns".into(),
            "agent.sse".into(),
            "schema.responses".into(),
        ],
        ..Selection::default()
    };
    let mut events = Vec::new();
    let report = run(&target, &selection, DEFAULT_JOBS, |event| {
        events.push(event.clone())
    })
    .await;
    let selected = report
        .outcomes
        .iter()
        .filter(|outcome| outcome.status != Status::Disabled)
        .count();
    assert!(matches!(
        events.first(),
        Some(CheckEvent::RunStarted { selected: told, total, .. })
            if *told == selected && *total == report.outcomes.len()
    ));
    assert!(matches!(
        events.last(),
        Some(CheckEvent::RunFinished { .. })
    ));
    let finished: Vec<usize> = events
        .iter()
        .filter_map(|event| match event {
            CheckEvent::Finished { done, outcome, .. } => {
                assert!(outcome.exchanges.is_empty(), "exchanges come as events");
                Some(*done)
            }
            _ => None,
        })
        .collect();
    assert_eq!(finished, (1..=report.outcomes.len()).collect::<Vec<_>>());
    for outcome in report
        .outcomes
        .iter()
        .filter(|o| o.status != Status::Disabled)
    {
        let told: Vec<&CheckEvent> = events
            .iter()
            .filter(|event| match event {
                CheckEvent::Started { check }
                | CheckEvent::Assertion { check, .. }
                | CheckEvent::Exchange { check, .. }
                | CheckEvent::Warning { check, .. } => *check == outcome.id,
                CheckEvent::Finished { outcome: ended, .. } => ended.id == outcome.id,
                _ => false,
            })
            .collect();
        let id = &outcome.id;
        assert!(
            matches!(told.first(), Some(CheckEvent::Started { .. })),
            "{id}"
        );
        assert!(
            matches!(told.last(), Some(CheckEvent::Finished { .. })),
            "{id}"
        );
        let count = |kind: fn(&CheckEvent) -> bool| told.iter().filter(|e| kind(e)).count();
        let assertions = count(|e| matches!(e, CheckEvent::Assertion { .. }));
        let exchanges = count(|e| matches!(e, CheckEvent::Exchange { .. }));
        assert_eq!(assertions, outcome.assertions, "{id}");
        assert_eq!(exchanges, outcome.exchanges.len(), "{id}");
        assert!(outcome.assertions > 0, "{id} asserted something");
    }
    let exchanged = events
        .iter()
        .filter(|e| matches!(e, CheckEvent::Exchange { .. }));
    assert!(exchanged.count() > 10, "the turns and streams were told");
}
