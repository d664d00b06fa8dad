//! A third team's deployment of the same document: a front before the reference server whose
//! every means differs from both ours and [`crate::another_team`]'s, and that can be broken on a
//! fact the document states, through the poll or the stream.
//!
//! Where it differs (each a gap of the document):
//! - a page's cursor is the query parameter `page_token`, a stream's `resume`; `cursor` and
//!   `Last-Event-ID` are not read (parts 4.2 and 6 do not show them);
//! - a turn starts with `{ "prompt", "thread" }` and is answered 200 `{ "thread", "turn" }`
//!   (part 4.2 does not show the chat request, answer or status);
//! - every entry names its kind in `kind` and its turn in `turn.id`; a turn's state is a
//!   `lifecycle` entry with `turn.phase`, an action an `approval` entry with `approval.id`,
//!   `approval.rev` and `approval.envelope` (the Build), a result a `decided` entry (part 2.13
//!   does not show the entries);
//! - an action is resolved with `PUT /v1/agent/sessions/{sessionId}/approvals/{actionId}`, keyed
//!   by `X-Request-Id`, its result `{ "decision": "yes" | "no", "of": digest }` (part 4.2 does not
//!   show the path, method or result); the reference path is no route here;
//! - a Build is presented for commit as `{ "envelope": <Build> }` (part 4.1);
//! - an error carries its code in `error.reason` (part 7).

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use intent_conformance::checks::Status;
use intent_conformance::discover::discover;
use intent_conformance::embedded::Embedded;
use intent_conformance::suite::{DEFAULT_JOBS, Report, Selection, run};

use crate::fronts::{failed_normative, is_event_stream, json_response, with_status};

/// A fault on a fact the document states, which `--level normative` must fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A resolution is refused with 403 whatever the token holds (5.6: `agent:actions:resolve`
    /// grants it).
    ResolutionForbidden,
    /// A stream opened with a cursor it never issued starts from the beginning (7.3).
    StreamIgnoresBadCursor,
}

impl Fault {
    pub(crate) const ALL: [Fault; 2] = [Fault::ResolutionForbidden, Fault::StreamIgnoresBadCursor];

    /// The checks a run against this fault takes, and the normative checks it must fail.
    pub(crate) fn breaks(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Fault::ResolutionForbidden => (&["auth.grants"], &["auth.grants"]),
            Fault::StreamIgnoresBadCursor => (
                &["agent.events.invalid-cursor"],
                &["agent.events.invalid-cursor"],
            ),
        }
    }
}

/// The front's state: its faults and the cursors its pages issued.
#[derive(Default)]
pub(crate) struct ThirdTeam {
    faults: Vec<Fault>,
    cursors: Mutex<HashSet<String>>,
}

impl ThirdTeam {
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
        "cursorParameter": "page_token",
        "streamCursor": { "query": "resume" },
        "chat": { "body": { "prompt": "{message}", "thread": "{sessionId}" },
                  "sessionId": "/thread", "turnId": "/turn" },
        "turnState": { "kind": "/kind", "value": "lifecycle", "turnId": "/turn/id",
                       "state": "/turn/phase" },
        "action": { "kind": "/kind", "value": "approval", "turnId": "/turn/id",
                    "actionId": "/approval/id", "revision": "/approval/rev",
                    "build": "/approval/envelope" },
        "resolution": { "method": "PUT",
                        "path": "/v1/agent/sessions/{sessionId}/approvals/{actionId}",
                        "idempotencyHeader": "X-Request-Id",
                        "result": { "decision": "{outcome}", "of": "{digest}" },
                        "approve": "yes", "reject": "no",
                        "resultEntry": { "kind": "/kind", "value": "decided",
                                         "actionId": "/approval", "outcome": "/decision" } },
        "commit": { "body": { "envelope": "{build}" } },
        "errorCode": "/error/reason"
    })
}

/// An answer in this deployment's error envelope.
fn refusal(status: StatusCode, reason: &str) -> Response {
    let envelope = json!({ "error": { "reason": reason, "detail": "refused by the third team" } });
    json_response(status, &envelope)
}

/// `entry` of the reference log in this deployment's shape.
fn entry(ours: &Value) -> Value {
    let Some(ours) = ours.as_object() else {
        return ours.clone();
    };
    let mut theirs: Map<String, Value> = ours.clone();
    let kind = theirs.remove("type").unwrap_or(Value::Null);
    let turn = theirs.remove("turnId").unwrap_or(Value::Null);
    let (kind, turn) = match kind.as_str() {
        Some("turn_state") => {
            let phase = theirs.remove("state").unwrap_or(Value::Null);
            ("lifecycle".into(), json!({ "id": turn, "phase": phase }))
        }
        Some("action") => {
            let action = theirs.remove("action").unwrap_or(Value::Null);
            let approval = json!({ "id": action["actionId"], "rev": action["revision"],
                "title": action["title"], "envelope": action["build"] });
            theirs.insert("approval".into(), approval);
            ("approval".into(), json!({ "id": turn }))
        }
        Some("action_result") => {
            let action = theirs.remove("actionId").unwrap_or(Value::Null);
            let result = theirs.remove("result").unwrap_or(Value::Null);
            let decision = match result["outcome"].as_str() {
                Some("approved") => json!("yes"),
                Some("rejected") => json!("no"),
                _ => result["outcome"].clone(),
            };
            theirs.insert("approval".into(), action);
            theirs.insert("decision".into(), decision);
            ("decided".into(), json!({ "id": turn }))
        }
        _ => (kind, json!({ "id": turn })),
    };
    theirs.insert("kind".into(), kind);
    theirs.insert("turn".into(), turn);
    Value::Object(theirs)
}

/// A page of the reference log in this deployment's shape; records the cursor it issues.
fn page(team: &ThirdTeam, page: &mut Value) {
    if let Some(cursor) = page["cursor"].as_str() {
        team.cursors.lock().unwrap().insert(cursor.to_owned());
    }
    if let Some(events) = page["events"].as_array_mut() {
        for event in events.iter_mut() {
            *event = entry(event);
        }
    }
}

/// The query of an events request as the reference server reads it: `page_token` (a page) or
/// `resume` (a stream) becomes `cursor`, and no other cursor is read.
fn events_query(team: &ThirdTeam, query: &str, stream: bool) -> String {
    let ours = if stream { "resume" } else { "page_token" };
    query
        .split('&')
        .filter_map(|pair| match pair.split_once('=') {
            Some((name, value)) if name == ours => {
                let unknown = !team.cursors.lock().unwrap().contains(value);
                let ignored = stream && unknown && team.has(Fault::StreamIgnoresBadCursor);
                (!ignored).then(|| format!("cursor={value}"))
            }
            Some(("cursor" | "page_token" | "resume", _)) => None,
            _ => (!pair.is_empty()).then(|| pair.to_owned()),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The reference server's path of the resolution at `PUT .../approvals/{actionId}`.
fn resolution_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/v1/agent/sessions/")?;
    let (session, action) = rest.split_once("/approvals/")?;
    (!action.contains('/'))
        .then(|| format!("/v1/agent/sessions/{session}/actions/{action}/resolve"))
}

/// A resolution body of this deployment as the reference server takes it.
fn resolution_body(theirs: Value) -> Value {
    let Value::Object(mut body) = theirs else {
        return theirs;
    };
    if let Some(Value::Object(result)) = body.get_mut("result") {
        let outcome = match result.remove("decision") {
            Some(decision) if decision == "yes" => json!("approved"),
            Some(decision) if decision == "no" => json!("rejected"),
            Some(other) => other,
            None => Value::Null,
        };
        if !outcome.is_null() {
            result.insert("outcome".into(), outcome);
        }
        if let Some(digest) = result.remove("of") {
            result.insert("digest".into(), digest);
        }
    }
    Value::Object(body)
}

/// One SSE chunk with the pages of its `page` events in this deployment's shape.
fn stream_chunk(team: &ThirdTeam, chunk: &Bytes) -> Bytes {
    let text = String::from_utf8_lossy(chunk);
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| match line.strip_prefix("data:") {
            Some(data) => match serde_json::from_str::<Value>(data.trim()) {
                Ok(mut data) if data.get("events").is_some() => {
                    page(team, &mut data);
                    format!("data: {data}")
                }
                _ => line.to_owned(),
            },
            None => line.to_owned(),
        })
        .collect();
    Bytes::from(lines.join("\n"))
}

/// The front: translates the client's request to the reference server's, and its answer back.
pub(crate) async fn front(
    State(team): State<Arc<ThirdTeam>>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let mut request_body: Option<Value> = serde_json::from_slice(&bytes).ok();
    let is_chat = parts.method == Method::POST && path == "/v1/agent/chat";
    let is_events = parts.method == Method::GET && path.starts_with("/v1/agent/chat/");
    let is_lifecycle = parts.method == Method::POST
        && (path.ends_with("/evm/build") || path.ends_with("/svm/stage"));
    if path.ends_with("/resolve") && path.starts_with("/v1/agent/sessions/") {
        return refusal(StatusCode::NOT_FOUND, "no_route");
    }

    // The request, as the reference server takes it.
    let mut uri = None;
    if is_events {
        let stream = path.ends_with("/stream");
        parts.headers.remove("last-event-id");
        let query = events_query(&team, &query, stream);
        uri = Some(if query.is_empty() {
            path.clone()
        } else {
            format!("{path}?{query}")
        });
    }
    if parts.method == Method::PUT
        && let Some(ours) = resolution_path(&path)
    {
        if team.has(Fault::ResolutionForbidden) && matches!(request_body, Some(Value::Object(_))) {
            return refusal(StatusCode::FORBIDDEN, "insufficient_scope");
        }
        parts.method = Method::POST;
        parts.headers.remove("idempotency-key");
        if let Some(key) = parts.headers.remove("x-request-id") {
            parts
                .headers
                .insert(HeaderName::from_static("idempotency-key"), key);
        }
        request_body = request_body.map(resolution_body);
        uri = Some(ours);
    }
    if is_chat {
        let Some(Value::Object(theirs)) = &request_body else {
            return refusal(StatusCode::BAD_REQUEST, "not_an_object");
        };
        if theirs.contains_key("message") {
            return refusal(StatusCode::BAD_REQUEST, "unknown_member");
        }
        let mut ours = json!({ "message": theirs.get("prompt").cloned().unwrap_or(Value::Null) });
        if let Some(thread) = theirs.get("thread").filter(|thread| !thread.is_null()) {
            ours["sessionId"] = thread.clone();
        }
        request_body = Some(ours);
    }
    if is_lifecycle && let Some(Value::Object(theirs)) = &request_body {
        if theirs.contains_key("attestation") || theirs.contains_key("build") {
            return refusal(StatusCode::BAD_REQUEST, "present_it_as_envelope");
        }
        if let Some(build) = theirs.get("envelope") {
            request_body = Some(build.clone());
        }
    }
    if let Some(uri) = uri {
        parts.uri = uri.parse::<Uri>().expect("a path");
    }
    let sent = match &request_body {
        Some(body) => Bytes::from(body.to_string()),
        None => bytes,
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    let response = next.run(Request::from_parts(parts, Body::from(sent))).await;

    // The answer, as this deployment gives it.
    let (mut parts, body) = response.into_parts();
    if is_event_stream(&parts.headers) {
        let stream = body
            .into_data_stream()
            .map(move |chunk| chunk.map(|chunk| stream_chunk(&team, &chunk)));
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let Ok(mut answer) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    if let Some(error) = answer.get_mut("error").and_then(Value::as_object_mut) {
        if let Some(code) = error.remove("code") {
            error.insert("reason".into(), code);
        }
        if let Some(message) = error.remove("message") {
            error.insert("detail".into(), message);
        }
    }
    if is_chat && parts.status.is_success() {
        parts.status = StatusCode::OK;
        answer = json!({ "thread": answer["sessionId"], "turn": answer["turnId"] });
    }
    if is_events && parts.status.is_success() {
        page(&team, &mut answer);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(answer.to_string()))
}

/// The suite at the normative level against this deployment, broken by `faults`, with `means`
/// as the config file's `profile` (none: a token source alone); `only` the checks to take (all
/// when empty).
async fn suite(faults: &[Fault], means: Option<Value>, only: &[&str]) -> Report {
    let team = ThirdTeam::new(faults);
    let server = Embedded::start_with(move |app| app.layer(from_fn_with_state(team, front)))
        .await
        .expect("the embedded server starts");
    let selection = Selection {
        only: only.iter().map(|id| id.to_string()).collect(),
        skip: vec!["limits.rate-limit".into(), "deployment".into()],
        normative_only: true,
    };
    let mut target = server.target();
    if let Some(means) = means {
        target.settings.means = serde_json::from_value(means).expect("a profile");
    }
    run(&target, &selection, DEFAULT_JOBS, |_| {}).await
}

/// Whether an outcome of `report` went through `key` and the deployment proved it.
fn proved(report: &Report, key: &str) -> bool {
    report
        .outcomes
        .iter()
        .flat_map(|outcome| &outcome.means)
        .any(|means| means.key == key && means.verified)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_third_team_whose_every_means_differs_passes_with_its_profile_and_is_never_failed_without()
 {
    let keys: Vec<String> = its_profile()
        .as_object()
        .expect("a profile is an object")
        .keys()
        .cloned()
        .collect();
    let partial = keys.iter().map(|key| {
        let mut partial = its_profile();
        partial.as_object_mut().unwrap().remove(key);
        suite(&[], Some(partial), &[])
    });
    // A pointer set wrong: the chat answer's turn read as its session.
    let mut mispointed = its_profile();
    mispointed["chat"]["sessionId"] = json!("/turn");
    let (configured, alone, mispointed, partial) = tokio::join!(
        suite(&[], Some(its_profile()), &[]),
        suite(&[], None, &[]),
        suite(&[], Some(mispointed), &[]),
        futures_util::future::join_all(partial),
    );
    // With its profile: nothing fails or errs, the checks that rest on each means pass, and
    // every means was proved on the deployment.
    let unpassed: Vec<String> = [Status::Fail, Status::Error]
        .into_iter()
        .flat_map(|status| with_status(&configured, status))
        .collect();
    assert!(unpassed.is_empty(), "{unpassed:#?}");
    for id in [
        "auth.grants",
        "agent.events.invalid-cursor",
        "agent.sse.resume",
        "pipeline.commit",
        "schema.negative.normative",
    ] {
        let outcome = configured.outcomes.iter().find(|outcome| outcome.id == id);
        assert_eq!(
            outcome.map(|outcome| outcome.status),
            Some(Status::Pass),
            "{id}: {:?}",
            outcome.map(|outcome| &outcome.message)
        );
    }
    for key in &keys {
        assert!(proved(&configured, key), "profile.{key} was never proved");
    }
    let inconclusive: Vec<String> = with_status(&configured, Status::Skip)
        .into_iter()
        .filter(|line| line.contains("profile."))
        .collect();
    assert!(inconclusive.is_empty(), "{inconclusive:#?}");
    // Without a profile, with a pointer set wrong, or less any one key: nothing fails, and an
    // inconclusive check names each key missing or wrong but `errorCode`, which only a code of
    // our profile is read through.
    let chat = "chat".to_owned();
    let runs = [(None, &alone), (Some(&chat), &mispointed)]
        .into_iter()
        .chain(keys.iter().map(Some).zip(&partial));
    for (missing, report) in runs {
        let failed = with_status(report, Status::Fail);
        assert!(
            failed.is_empty(),
            "without profile.{missing:?}: {failed:#?}"
        );
        let Some(key) = missing.filter(|key| *key != "errorCode") else {
            continue;
        };
        let named = report.outcomes.iter().any(|outcome| {
            outcome.status == Status::Skip
                && outcome
                    .message
                    .as_deref()
                    .is_some_and(|message| message.contains(&format!("profile.{key}")))
        });
        let skipped = with_status(report, Status::Skip);
        assert!(
            named,
            "without profile.{key}, no check names it: {skipped:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_fault_on_a_stated_fact_fails_the_third_teams_deployment() {
    let reports = futures_util::future::join_all(Fault::ALL.iter().map(|fault| {
        suite(
            std::slice::from_ref(fault),
            Some(its_profile()),
            fault.breaks().0,
        )
    }))
    .await;
    for (fault, report) in Fault::ALL.iter().zip(&reports) {
        let expected: BTreeSet<&str> = fault.breaks().1.iter().copied().collect();
        assert!(
            expected.is_subset(&failed_normative(report)),
            "{fault:?}: {:#?}",
            report
                .outcomes
                .iter()
                .filter(|outcome| outcome.status != Status::Disabled)
                .map(|outcome| format!("{}: {:?}", outcome.id, outcome.message))
                .collect::<Vec<_>>()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_writes_the_profile_of_the_third_team_and_nothing_for_ours() {
    let team = ThirdTeam::new(&[]);
    let theirs = Embedded::start_with(move |app| app.layer(from_fn_with_state(team, front)))
        .await
        .expect("the embedded server starts");
    let ours = Embedded::start().await.expect("the embedded server starts");
    let (theirs, ours) = (theirs.target(), ours.target());
    let (theirs, ours) = tokio::join!(discover(&theirs), discover(&ours));
    let (theirs, ours) = (theirs.expect("a discovery"), ours.expect("a discovery"));
    assert!(ours.profile.is_empty(), "{:#?}", ours.notes);
    let expected = its_profile();
    for key in [
        "chat",
        "cursorParameter",
        "streamCursor",
        "turnState",
        "action",
        "errorCode",
    ] {
        assert_eq!(
            theirs.profile.get(key),
            expected.get(key),
            "{key}: {:#?}",
            theirs.notes
        );
    }
    let resolution = &theirs.profile["resolution"];
    assert_eq!(resolution["method"], expected["resolution"]["method"]);
    assert_eq!(resolution["path"], expected["resolution"]["path"]);
    // What it found reaches the deployment: the means it names are ones a run takes.
    let found: intent_conformance::means::Means =
        serde_json::from_value(Value::Object(theirs.profile)).expect("a profile");
    assert_eq!(found.cursor_parameter, "page_token");
}
