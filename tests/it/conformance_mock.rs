//! The suite against a static mock made from openapi.json, as a mock generator makes one: it
//! checks the bearer, the body and the query parameters of each request against the document
//! and answers with the operation's success example. It has the shapes and no behaviour, so the
//! suite must pass none of its behaviour checks; the shape and limit checks it passes are listed.

use std::collections::BTreeSet;

use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::Response;
use intent_conformance::checks::Status;
use intent_conformance::spec::{Operation, spec};
use intent_conformance::suite::{DEFAULT_JOBS, Selection, run};
use intent_conformance::target::{Role, Settings, Target, Tokens};
use serde_json::{Value, json};

fn envelope(status: StatusCode, code: &str, message: &str) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({ "error": { "code": code, "message": message } }).to_string(),
        ))
        .unwrap()
}

/// The first query parameter of `operation` whose value breaks its schema.
fn bad_parameter(operation: &Operation, query: &str) -> Option<String> {
    let object = spec().operation_object(&operation.method, &operation.template)?;
    for parameter in object["parameters"].as_array().into_iter().flatten() {
        let parameter = spec().resolve(parameter);
        let name = parameter["name"].as_str().unwrap_or_default();
        let Some(value) = query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
        else {
            continue;
        };
        let value = match parameter["schema"]["type"].as_str() {
            Some("integer") => value.parse::<i64>().map_or(json!(value), |n| json!(n)),
            _ => json!(value),
        };
        let validator = spec().inline(&parameter["schema"])?;
        if !validator.is_valid(&value) {
            return Some(name.to_owned());
        }
    }
    None
}

/// The operation's lowest success status and its example: JSON, or the text of another type.
fn success(operation: &Operation) -> (StatusCode, Option<(String, String)>) {
    let object = spec()
        .operation_object(&operation.method, &operation.template)
        .unwrap();
    let (status, response) = object["responses"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(status, _)| status.starts_with('2'))
        .min_by_key(|(status, _)| status.as_str())
        .unwrap();
    let status = StatusCode::from_u16(status.parse().unwrap()).unwrap();
    let example = spec().resolve(response)["content"]
        .as_object()
        .and_then(|content| content.iter().next())
        .and_then(|(kind, media)| {
            let example = media
                .get("example")
                .or_else(|| {
                    let examples = media.get("examples")?.as_object()?;
                    spec().resolve(examples.values().next()?).get("value")
                })?
                .clone();
            let text = match example {
                Value::String(text) if kind != "application/json" => text,
                other => other.to_string(),
            };
            Some((kind.clone(), text))
        });
    (status, example)
}

async fn mock(request: Request) -> Response {
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let Some(operation) = spec().operation(&method, &path) else {
        return envelope(StatusCode::NOT_FOUND, "not_found", "no such operation");
    };
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.len() > "Bearer ".len() && value.starts_with("Bearer "));
    if !bearer {
        return envelope(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a bearer token is required",
        );
    }
    if let Some(name) = bad_parameter(operation, &query) {
        return envelope(StatusCode::BAD_REQUEST, "invalid_parameter", &name);
    }
    if let Some(validator) = spec().request_body(operation) {
        let bytes = to_bytes(request.into_body(), usize::MAX).await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !validator.is_valid(&body) {
            return envelope(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the body breaks the schema",
            );
        }
    }
    let (status, example) = success(operation);
    let mut response = Response::builder().status(status);
    let body = match example {
        Some((kind, text)) => {
            response = response.header(header::CONTENT_TYPE, kind);
            Body::from(text)
        }
        None => Body::empty(),
    };
    response.body(body).unwrap()
}

/// The checks that pass against the mock: shapes, limits and the Build's digest, which hold of
/// the document's examples and of its request validation alone, and the link sequences of
/// `startChat` and `evmBuild`, whose every step answers a declared example (an id the mock
/// answers for any value resolves). Every behaviour check fails. Any other link sequence passes
/// or skips for want of an input, whatever links openapi.json adds.
const PASSED_BY_THE_MOCK: [&str; 15] = [
    "account.statement",
    "limits.step",
    "limits.wait",
    "pipeline.apps",
    "pipeline.operation-descriptor",
    "pipeline.skill-call",
    "schema.error-envelope",
    "schema.event-page",
    "schema.media-type",
    "schema.negative.normative",
    "schema.negative.profile",
    "schema.responses",
    "schema.simulation",
    "stateful.evmBuild",
    "stateful.startChat",
];

#[tokio::test(flavor = "multi_thread")]
async fn a_static_mock_passes_no_behaviour_check() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, axum::Router::new().fallback(mock))
            .await
            .unwrap()
    });
    let token = || "mock-token";
    let tokens = Role::all().iter().fold(Tokens::default(), |tokens, &role| {
        tokens.with(role, token())
    });
    let target = Target::new(&base, tokens, Settings::default());
    let report = run(&target, &Selection::default(), DEFAULT_JOBS, |_| {}).await;
    let other_sequence =
        |id: &str| id.starts_with("stateful.") && !PASSED_BY_THE_MOCK.contains(&id);
    for outcome in report.outcomes.iter().filter(|o| other_sequence(&o.id)) {
        let status = outcome.status;
        assert!(
            matches!(status, Status::Pass | Status::Skip),
            "{}: {status:?} {:?}",
            outcome.id,
            outcome.message
        );
    }
    let passed: BTreeSet<&str> = report
        .outcomes
        .iter()
        .filter(|outcome| outcome.status == Status::Pass)
        .map(|outcome| outcome.id.as_str())
        .filter(|id| !other_sequence(id))
        .collect();
    let expected: BTreeSet<&str> = PASSED_BY_THE_MOCK.into_iter().collect();
    assert_eq!(passed, expected, "{}", report.summary());
}
