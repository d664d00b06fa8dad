//! The suite against deployments that differ from the reference server only where the interface
//! leaves room: a layer in front of the reference server changes event kinds, error codes, key
//! order and profile objects. The normative level must pass through each variation; at level
//! `all`, the profile findings must name what differed.

use std::sync::Arc;

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use futures_util::StreamExt;
use intent_conformance::check::Status;
use intent_conformance::embedded::Embedded;
use intent_conformance::run::{Report, Selection, run};
use serde_json::{Value, json};

/// One way a deployment may differ from the reference server and still follow the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variation {
    /// User-message entries have another kind name, and every entry an extra member (parts 2.11
    /// and 6: the shape of event entries and their kind names are not shown).
    EventKinds,
    /// Error codes other than `invalid_cursor` are other words (part 7).
    ErrorCodes,
    /// Error envelopes carry a bare string code (part 7: the content of `error` is not shown).
    BareErrorCodes,
    /// Every JSON object is written with its keys in reverse order.
    ReorderedKeys,
    /// Objects of our profile's schemas carry an extra member.
    ProfileExtraMembers,
}

impl Variation {
    const ALL: [Variation; 5] = [
        Variation::EventKinds,
        Variation::ErrorCodes,
        Variation::BareErrorCodes,
        Variation::ReorderedKeys,
        Variation::ProfileExtraMembers,
    ];

    /// What the profile findings at level `all` must mention, where our profile differs.
    fn named(self) -> Option<&'static str> {
        match self {
            Variation::EventKinds => Some("user_input"),
            Variation::ErrorCodes => Some("E_"),
            // The profile reads a bare code as the code: nothing differs.
            Variation::BareErrorCodes => None,
            Variation::ReorderedKeys => None,
            // The profile's objects are open to members it does not name.
            Variation::ProfileExtraMembers => None,
        }
    }
}

/// The page or entry list in `body` with its user messages renamed and a member added to every
/// entry.
fn vary_events(body: &mut Value) {
    for event in body["events"].as_array_mut().into_iter().flatten() {
        if event["type"] == "message" && event["role"] == "user" {
            event["type"] = json!("user_input");
            if let Some(members) = event.as_object_mut() {
                members.remove("role");
            }
        }
        event["x-trace"] = json!("t-1");
    }
}

/// JSON text of `value` with every object's keys in reverse order.
fn reversed(value: &Value) -> String {
    match value {
        Value::Object(members) => {
            let inner: Vec<String> = members
                .iter()
                .rev()
                .map(|(key, member)| format!("{}:{}", Value::from(key.as_str()), reversed(member)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(reversed).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

/// Whether a response of `method` `path` is an object of a schema our profile fills.
fn profile_object(method: &str, path: &str) -> bool {
    (method == "POST" && path == "/v1/agent/chat")
        || (method == "GET"
            && (path == "/v1/account/apps"
                || path == "/v1/account/statement"
                || path == "/v1/pipeline/skills"
                || path.ends_with("/secrets")))
}

/// Varies a JSON body of `method` `path` answered with `status`.
fn vary_json(variation: Variation, method: &str, path: &str, status: u16, body: &mut Value) {
    let events_page = method == "GET" && path.starts_with("/v1/agent/chat/");
    match variation {
        Variation::EventKinds if events_page && status == 200 => vary_events(body),
        Variation::ErrorCodes | Variation::BareErrorCodes if status >= 400 => {
            let code = body
                .pointer("/error/code")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned();
            if code == "invalid_cursor" {
                return;
            }
            if variation == Variation::ErrorCodes {
                body["error"]["code"] = json!(format!("E_{code}"));
            } else {
                *body = json!({ "error": code });
            }
        }
        Variation::ProfileExtraMembers if status < 300 && profile_object(method, path) => {
            body["x-vendor"] = json!({ "region": "eu" });
        }
        _ => {}
    }
}

/// One SSE chunk with the data of its `page` events varied.
fn vary_sse(chunk: &Bytes) -> Bytes {
    let text = String::from_utf8_lossy(chunk);
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| match line.strip_prefix("data:") {
            Some(data) => match serde_json::from_str::<Value>(data.trim()) {
                Ok(mut page) if page.get("events").is_some() => {
                    vary_events(&mut page);
                    format!("data: {page}")
                }
                _ => line.to_owned(),
            },
            None => line.to_owned(),
        })
        .collect();
    Bytes::from(lines.join("\n"))
}

async fn vary(State(variation): State<Arc<Variation>>, request: Request, next: Next) -> Response {
    let variation = *variation;
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let (mut parts, body) = response.into_parts();
    let kind = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if kind.starts_with("text/event-stream") {
        if variation != Variation::EventKinds {
            return Response::from_parts(parts, body);
        }
        let stream = body
            .into_data_stream()
            .map(|chunk| chunk.map(|chunk| vary_sse(&chunk)));
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    vary_json(variation, &method, &path, status, &mut value);
    parts.headers.remove(header::CONTENT_LENGTH);
    let text = if variation == Variation::ReorderedKeys {
        reversed(&value)
    } else {
        value.to_string()
    };
    Response::from_parts(parts, Body::from(text))
}

/// The suite at `level` against the reference server behind `variation`.
async fn suite(variation: Variation, normative_only: bool) -> Report {
    let state = Arc::new(variation);
    let server = Embedded::start_with(move |app| app.layer(from_fn_with_state(state, vary)))
        .await
        .expect("the embedded server starts");
    let selection = Selection {
        skip: vec!["limits.rate-limit".into(), "deployment".into()],
        normative_only,
        ..Selection::default()
    };
    run(&server.target(), &selection, |_, _, _| {}).await
}

fn broken(report: &Report) -> Vec<String> {
    report
        .outcomes
        .iter()
        .filter(|outcome| matches!(outcome.status, Status::Fail | Status::Error | Status::Skip))
        .map(|outcome| format!("{}: {:?}", outcome.id, outcome.message))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_normative_level_passes_every_variation_the_interface_allows() {
    let reports = futures_util::future::join_all(
        Variation::ALL
            .iter()
            .map(|variation| suite(*variation, true)),
    )
    .await;
    for (variation, report) in Variation::ALL.iter().zip(&reports) {
        assert!(
            broken(report).is_empty(),
            "{variation:?} at level normative: {:#?}",
            broken(report)
        );
        assert!(report.count(Status::Pass) > 30, "{}", report.summary());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn at_level_all_the_profile_findings_name_what_differed() {
    let varied: Vec<Variation> = Variation::ALL
        .into_iter()
        .filter(|variation| variation.named().is_some())
        .collect();
    let reports =
        futures_util::future::join_all(varied.iter().map(|variation| suite(*variation, false)))
            .await;
    for (variation, report) in varied.iter().zip(&reports) {
        let needle = variation.named().expect("filtered");
        let named = report.outcomes.iter().any(|outcome| {
            outcome.status == Status::Fail
                && outcome.level == intent_conformance::spec::Level::Profile
                && outcome
                    .message
                    .as_deref()
                    .is_some_and(|m| m.contains(needle))
        });
        assert!(
            named,
            "{variation:?} at level all: no profile failure names {needle:?}: {:#?}",
            broken(report)
        );
    }
}
