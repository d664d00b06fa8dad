//! What the tests that put a front before the real server share: the front's refusals, an SDK
//! client of the server behind a front, and the events a followed log delivers.

use std::collections::BTreeSet;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use intent_conformance::checks::Status;
use intent_conformance::embedded::Embedded;
use intent_conformance::spec::Level;
use intent_conformance::suite::Report;
use intent_conformance::target::Role;
use intent_models::AgentEvent;
use intent_sdk::agent::LogItem;
use intent_sdk::{Intent, Resource, RetryPolicy, StaticToken};
use serde_json::{Value, json};

/// An answer of `status` with `body` as JSON.
pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("a response")
}

/// Whether an answer with `headers` is an event stream.
pub(crate) fn is_event_stream(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|kind| kind.starts_with("text/event-stream"))
}

/// Unix seconds now.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}

/// A refusal in the error envelope: `status` with `code`, and `Retry-After` when given.
pub(crate) fn refusal(status: u16, code: &str, retry_after: Option<&str>) -> Response {
    let envelope = json!({ "error": { "code": code, "message": "refused by the front" } });
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(seconds) = retry_after {
        response = response.header(header::RETRY_AFTER, seconds);
    }
    response
        .body(Body::from(envelope.to_string()))
        .expect("a response")
}

/// The embedded reference server with `front` applied to its router, and an SDK client of it
/// that holds an Agent token and retries by `retry`. The server stops when dropped.
pub(crate) async fn sdk_behind(
    front: impl FnOnce(Router) -> Router,
    retry: RetryPolicy,
) -> (Embedded, Intent) {
    let server = Embedded::start_with(front)
        .await
        .expect("the embedded server starts");
    let token = server
        .target()
        .role(Role::Agent)
        .await
        .expect("an agent token");
    let intent = Intent::builder(server.base())
        .token(Resource::Agent, StaticToken::new(token))
        .retry(retry)
        .build()
        .expect("an SDK client");
    (server, intent)
}

/// The events `stream` delivers up to the one at `seq`, each item within `within`; every item
/// must be read without an error.
pub(crate) async fn events_up_to(
    stream: impl futures_util::Stream<Item = Result<LogItem, intent_sdk::Error>>,
    seq: u64,
    within: Duration,
) -> Vec<AgentEvent> {
    let mut stream = Box::pin(stream);
    let mut events: Vec<AgentEvent> = Vec::new();
    while events.last().is_none_or(|event| event.seq() < seq) {
        let item = tokio::time::timeout(within, stream.next())
            .await
            .expect("an item in time")
            .expect("the stream goes on")
            .expect("the stream reads every entry");
        if let LogItem::Event { event, .. } = item {
            events.push(*event);
        }
    }
    events
}

/// The normative checks `report` failed.
/// The outcomes of `report` with `status`, each with its message.
pub(crate) fn with_status(report: &Report, status: Status) -> Vec<String> {
    report
        .outcomes
        .iter()
        .filter(|outcome| outcome.status == status)
        .map(|outcome| format!("{}: {:?}", outcome.id, outcome.message))
        .collect()
}

pub(crate) fn failed_normative(report: &Report) -> BTreeSet<&str> {
    report
        .outcomes
        .iter()
        .filter(|outcome| outcome.status == Status::Fail && outcome.level == Level::Normative)
        .map(|outcome| outcome.id.as_str())
        .collect()
}
