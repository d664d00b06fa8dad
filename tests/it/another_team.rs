//! A deployment another team built from the same document: a front before the reference server
//! that differs from our profile everywhere the document leaves room, all at once, and can be
//! broken on a fact the document states.
//!
//! Where it differs (each a gap of the document):
//! - the cursor query parameter is `after`; `cursor` is not read (part 4.2: its name is not shown);
//!   a stream resumes from the `Last-Event-ID` header alone (part 6 does not show how);
//! - the chat request is `{ "input", "session" }` and its answer `{ "session": { "id" },
//!   "turn": { "id" } }`; a body with `message` is refused (part 4.2: shapes not shown);
//! - a Build is presented for commit as `{ "build": <Build> }`, and a commit answers
//!   `{ "outcome", "receipt" }` (part 4.1: the request body and commit result are not shown);
//! - a PATCH of a session needs both `title` and `archived` (part 4.2: which is required is not
//!   shown);
//! - another account's session is refused with 403, a missing one with 404 (part 1: ownership
//!   comes from the caller; the status is not shown);
//! - refusals other than `invalid_cursor` are 422 (part 7: other statuses fall to the envelope);
//! - a `wait` above 30000 is held as 1000 ms, not refused (part 8 states the bound, not how a
//!   larger one is met); a page holds at most three events (part 2.11: the page size is not
//!   shown);
//! - and, beneath, the variations of [`crate::conformance_variations`]: other event kinds, bare
//!   error codes, reversed keys, extra members, another catalog and a rate limit.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Value, json};

use intent_conformance::embedded::CURSOR_TTL;

use crate::fronts::{is_event_stream, json_response, now, refusal};

/// A fault on a fact the document states, which `--level normative` must fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A malformed or foreign cursor is ignored: the poll answers the reconcile page (7.3).
    IgnoresBadCursor,
    /// An expired cursor is answered 400 `invalid_cursor` (7.4).
    ExpiredIs400,
    /// An expired cursor is ignored: the poll answers the reconcile page (7.4).
    IgnoresExpiry,
    /// A Build past its `expiresAt` is committed (3.1, 7.6).
    CommitsExpired,
    /// Simulations lack `gas` (2.2).
    SimulationWithoutGas,
    /// Builds lack `attestation` (2.1).
    BuildWithoutAttestation,
    /// svm/stage answers a token without `pipeline:execute` with 401, not 403 (5.5).
    StageForbiddenIs401,
    /// SSE `page` events are named `snapshot` (6).
    RenamedPageEvents,
    /// Event pages tell the latest turn's state beside `events`, as a string and a boolean
    /// (2.11: lifecycle changes are entries, never separate top-level fields).
    StateBesideEvents,
}

impl Fault {
    pub(crate) const ALL: [Fault; 9] = [
        Fault::IgnoresBadCursor,
        Fault::ExpiredIs400,
        Fault::IgnoresExpiry,
        Fault::CommitsExpired,
        Fault::SimulationWithoutGas,
        Fault::BuildWithoutAttestation,
        Fault::StageForbiddenIs401,
        Fault::RenamedPageEvents,
        Fault::StateBesideEvents,
    ];

    /// The checks (or categories) a run against this fault takes, and the normative checks it
    /// must fail.
    pub(crate) fn breaks(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Fault::IgnoresBadCursor => (
                &["agent.events"],
                &["agent.events.invalid-cursor", "agent.events.foreign-cursor"],
            ),
            Fault::ExpiredIs400 | Fault::IgnoresExpiry => {
                (&["agent.events"], &["agent.events.expired-cursor"])
            }
            Fault::CommitsExpired => (&["pipeline"], &["pipeline.commit-expired"]),
            Fault::SimulationWithoutGas => (
                &["pipeline.build", "schema"],
                &["pipeline.build", "schema.simulation", "schema.responses"],
            ),
            Fault::BuildWithoutAttestation => (
                &["pipeline.build", "schema.responses"],
                &["pipeline.build", "schema.responses"],
            ),
            Fault::StageForbiddenIs401 => (&["auth.matrix.svmStage"], &["auth.matrix.svmStage"]),
            Fault::RenamedPageEvents => (&["agent.sse"], &["agent.sse.events"]),
            Fault::StateBesideEvents => (
                &["agent.events", "schema.event-page"],
                &["schema.event-page"],
            ),
        }
    }
}

/// The front's state: the faults it carries, and the sessions, Builds and cursors it has seen.
#[derive(Default)]
pub(crate) struct AnotherTeam {
    faults: Vec<Fault>,
    sessions: Mutex<HashSet<String>>,
    issued: Mutex<HashSet<String>>,
    /// Each cursor a page of a session gave, with when.
    cursors: Mutex<HashMap<(String, String), Instant>>,
}

impl AnotherTeam {
    pub(crate) fn new(faults: &[Fault]) -> Arc<Self> {
        Arc::new(Self {
            faults: faults.to_vec(),
            ..Self::default()
        })
    }

    fn has(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }
}

/// The config file's `profile` that reaches this deployment.
pub(crate) fn its_profile() -> Value {
    json!({
        "cursorParameter": "after",
        "chat": { "body": { "input": "{message}", "session": "{sessionId}" },
                  "sessionId": "/session/id", "turnId": "/turn/id" },
        "commit": { "body": { "build": "{build}" } },
        "streamCursor": { "header": "Last-Event-ID" }
    })
}

/// The query with `after` read as the server's `cursor`, and `cursor` not read.
fn translated_query(query: &str) -> String {
    query
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.starts_with("cursor="))
        .map(|pair| match pair.split_once('=') {
            Some(("after", value)) => format!("cursor={value}"),
            Some(("wait", value)) if value.parse::<u64>().is_ok_and(|wait| wait > 30_000) => {
                "wait=1000".to_owned()
            }
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The session id of an agent path, `/v1/agent/chat/{id}...` or `/v1/agent/sessions/{id}...`.
fn session_of(path: &str) -> Option<&str> {
    let rest = path
        .strip_prefix("/v1/agent/chat/")
        .or_else(|| path.strip_prefix("/v1/agent/sessions/"))?;
    rest.split('/').next()
}

/// The error code of an envelope, whether an object with `code` or a bare string.
fn code(body: &Value) -> Option<&str> {
    let error = body.get("error")?;
    error.as_str().or_else(|| error["code"].as_str())
}

/// Removes `gas` from every simulation in `value`.
fn drop_gas(value: &mut Value) {
    match value {
        Value::Object(members) => {
            if let Some(Value::Object(simulation)) = members.get_mut("simulation") {
                simulation.remove("gas");
            }
            members.values_mut().for_each(drop_gas);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_gas),
        _ => {}
    }
}

/// The front: translates the client's request to the reference server's, and its answer back.
pub(crate) async fn front(
    State(team): State<Arc<AnotherTeam>>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let method = parts.method.as_str().to_owned();
    let mut request_body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let is_chat = method == "POST" && path == "/v1/agent/chat";
    let is_lifecycle =
        method == "POST" && (path.ends_with("/evm/build") || path.ends_with("/svm/stage"));
    let is_events = method == "GET" && path.starts_with("/v1/agent/chat/");
    let unprocessable = |code: &str| refusal(422, code, None);

    // The request, as the reference server takes it.
    if is_events {
        let mut query = translated_query(&query);
        let join = |query: &str, pair: &str| {
            [query, pair]
                .into_iter()
                .filter(|part| !part.is_empty())
                .collect::<Vec<_>>()
                .join("&")
        };
        if path.ends_with("/stream") {
            // A stream resumes from `Last-Event-ID` alone.
            let pairs = query.split('&').filter(|pair| !pair.starts_with("cursor="));
            query = pairs.collect::<Vec<_>>().join("&");
            let resumed = parts.headers.get("last-event-id");
            if let Some(cursor) = resumed.and_then(|value| value.to_str().ok()) {
                query = join(&query, &format!("cursor={cursor}"));
            }
        } else if !query.split('&').any(|pair| pair.starts_with("limit=")) {
            // Pages of three events unless asked otherwise.
            query = join(&query, "limit=3");
        }
        let session = session_of(&path).unwrap_or_default().to_owned();
        let cursor = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("cursor="))
            .map(str::to_owned);
        if let Some(cursor) = cursor {
            let issued = team
                .cursors
                .lock()
                .unwrap()
                .get(&(session, cursor))
                .copied();
            let ignored = (team.has(Fault::IgnoresBadCursor) && issued.is_none())
                || (team.has(Fault::IgnoresExpiry)
                    && issued.is_some_and(|at| at.elapsed() > CURSOR_TTL));
            if ignored {
                query = translated_query(&query.replace("cursor=", "ignored="));
            }
        }
        let uri = if query.is_empty() {
            path.clone()
        } else {
            format!("{path}?{query}")
        };
        parts.uri = uri.parse::<Uri>().expect("a path");
    }
    if is_chat {
        if request_body.get("message").is_some() {
            return unprocessable("unknown_member");
        }
        let mut translated = json!({ "message": request_body["input"] });
        if let Some(session) = request_body.get("session").filter(|s| !s.is_null()) {
            translated["sessionId"] = session.clone();
        }
        request_body = translated;
    }
    let committing = is_lifecycle && request_body.get("build").is_some();
    if is_lifecycle {
        if request_body.get("attestation").is_some() {
            return unprocessable("present_a_build_as_build");
        }
        if committing {
            request_body = request_body["build"].take();
            let expired = request_body["expiresAt"]
                .as_i64()
                .is_some_and(|at| at < now());
            let digest = request_body["digest"].as_str().unwrap_or_default();
            let issued = team.issued.lock().unwrap().contains(digest);
            if team.has(Fault::CommitsExpired) && expired && issued {
                let receipt = json!({ "outcome": "accepted", "receipt": digest });
                return json_response(StatusCode::OK, &receipt);
            }
        }
    }
    if method == "PATCH"
        && path.starts_with("/v1/agent/sessions/")
        && (request_body.get("title").is_none() || request_body.get("archived").is_none())
    {
        return unprocessable("title_and_archived_required");
    }
    let sent_body = if request_body.is_null() {
        bytes
    } else {
        Bytes::from(request_body.to_string())
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    let response = next
        .run(Request::from_parts(parts, Body::from(sent_body)))
        .await;

    // The answer, as this deployment gives it.
    let status = response.status();
    let (mut parts, body) = response.into_parts();
    if is_event_stream(&parts.headers) {
        if !team.has(Fault::RenamedPageEvents) {
            return Response::from_parts(parts, body);
        }
        let stream = body.into_data_stream().map(|chunk| {
            chunk.map(|chunk| {
                let text =
                    String::from_utf8_lossy(&chunk).replace("event: page", "event: snapshot");
                Bytes::from(text)
            })
        });
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let Ok(mut answer) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let mut status = status;
    if is_chat && status.is_success() {
        let (session, turn) = (answer["sessionId"].clone(), answer["turnId"].clone());
        if let Some(session) = session.as_str() {
            team.sessions.lock().unwrap().insert(session.to_owned());
        }
        answer = json!({ "session": { "id": session }, "turn": { "id": turn } });
    }
    if is_lifecycle && status.is_success() {
        if committing {
            answer = json!({ "outcome": "accepted", "receipt": answer["digest"] });
        } else {
            if let Some(digest) = answer["digest"].as_str() {
                team.issued.lock().unwrap().insert(digest.to_owned());
            }
            if team.has(Fault::SimulationWithoutGas) {
                drop_gas(&mut answer);
            }
            if team.has(Fault::BuildWithoutAttestation)
                && let Some(members) = answer.as_object_mut()
            {
                members.remove("attestation");
            }
        }
    }
    let known =
        session_of(&path).is_some_and(|session| team.sessions.lock().unwrap().contains(session));
    if status == StatusCode::NOT_FOUND && known {
        status = StatusCode::FORBIDDEN;
        answer = json!({ "error": "not_yours" });
    }
    if is_events
        && status.is_success()
        && let (Some(session), Some(cursor)) = (session_of(&path), answer["cursor"].as_str())
    {
        let key = (session.to_owned(), cursor.to_owned());
        team.cursors
            .lock()
            .unwrap()
            .entry(key)
            .or_insert_with(Instant::now);
    }
    if team.has(Fault::StateBesideEvents)
        && is_events
        && status.is_success()
        && let Some(page) = answer.as_object_mut()
    {
        page.insert("turnState".into(), json!("complete"));
        page.insert("done".into(), json!(true));
    }
    let mut invalid_cursor = code(&answer) == Some("invalid_cursor");
    if team.has(Fault::ExpiredIs400) && is_events && status == StatusCode::GONE {
        status = StatusCode::BAD_REQUEST;
        answer = json!({ "error": "invalid_cursor" });
        invalid_cursor = true;
    }
    if team.has(Fault::StageForbiddenIs401)
        && path.ends_with("/svm/stage")
        && status == StatusCode::FORBIDDEN
    {
        status = StatusCode::UNAUTHORIZED;
    }
    if status == StatusCode::BAD_REQUEST && !invalid_cursor {
        status = StatusCode::UNPROCESSABLE_ENTITY;
    }
    parts.status = status;
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(answer.to_string()))
}
