//! What the proxy finds wrong in one exchange, judged with the suite's own validators and
//! levels: the request is the client's to get right, the status, the body and each SSE frame
//! the server's. A violation names where and which rule, never a value, which may be a secret.

use std::sync::Arc;

use intent_models::schema::{self, SchemaValidator};
use percent_encoding::percent_decode_str;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::Serialize;
use serde_json::Value;

use crate::spec::{Level, Operation, spec};
use crate::sse::Frame;

/// Which side of an exchange broke the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The app: its request.
    Client,
    /// The deployment: its answer.
    Server,
}

impl Side {
    /// The side as logs and reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// One way an exchange broke openapi.json.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Breach {
    /// Who broke it.
    pub side: Side,
    /// The `operationId`, or `METHOD path` for a request that is no operation of the document.
    pub operation: String,
    /// Where: a JSON pointer under the part of the exchange, such as `/body/message`,
    /// `/query/wait`, `/header/authorization`, `/status`, `/sse/event` or `/sse/data/cursor`.
    pub pointer: String,
    /// The rule broken: a JSON Schema keyword, `security`, `responses`, `paths` or `id`.
    pub keyword: String,
    /// Whether every deployment and client must keep the rule, or only our reference profile.
    pub level: Level,
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} broke {} at {} ({}, {})",
            self.side.as_str(),
            self.operation,
            self.pointer,
            self.keyword,
            self.level.as_str()
        )
    }
}

/// A request as the proxy received it.
pub struct Request<'a> {
    /// Upper-case method.
    pub method: &'a str,
    /// The path and its query.
    pub path: &'a str,
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// Its body.
    pub body: &'a [u8],
}

/// The operation `request` is an instance of, `None` outside `/v1/` (OAuth, health, metadata)
/// and for a CORS preflight (`OPTIONS`), which are not judged, and what the client broke.
pub fn request(request: &Request<'_>) -> (Option<&'static Operation>, Vec<Breach>) {
    let (route, query) = request.path.split_once('?').unwrap_or((request.path, ""));
    if !route.starts_with("/v1/") || request.method == "OPTIONS" {
        return (None, Vec::new());
    }
    let Some(operation) = spec().operation(request.method, route) else {
        let violation = Breach {
            side: Side::Client,
            operation: format!("{} {route}", request.method),
            pointer: "/path".into(),
            keyword: "paths".into(),
            level: Level::Normative,
        };
        return (None, vec![violation]);
    };
    let mut found = Found::new(Side::Client, operation);
    let bearer = request
        .headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.get(..7))
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer "));
    if !bearer {
        found.push("/header/authorization", "security", Level::Normative);
    }
    parameters(operation, request, route, query, &mut found);
    if let Some(schema) = spec().request_body(operation) {
        let normative = spec().normative_request_body(operation);
        let body = serde_json::from_slice(request.body).ok();
        found.body("/body", body.as_ref(), normative.as_deref(), Some(&schema));
    }
    (Some(operation), found.violations)
}

/// What the server broke in answering `operation`'s `request` (its body) with `status` and
/// `body` (empty for a stream, whose frames are judged one by one).
pub fn response(operation: &Operation, request: &[u8], status: u16, body: &[u8]) -> Vec<Breach> {
    let mut found = Found::new(Side::Server, operation);
    // The normative view judges every status (its own, its class's, or `default` for an error);
    // a status our profile does not declare is a profile violation.
    let request: Option<Value> = serde_json::from_slice(request).ok();
    let normative = spec().normative_answer(operation, request.as_ref(), status);
    let profile = spec().response(operation, status);
    if profile.is_err() {
        found.push("/status", "responses", Level::Profile);
    }
    let body = serde_json::from_slice(body).ok();
    let profile = profile.ok().flatten();
    found.body(
        "/body",
        body.as_ref(),
        normative.as_deref(),
        profile.as_deref(),
    );
    found.violations
}

/// What the server broke in one frame of `operation`'s event stream (part 6): only `page`,
/// `message` and `resync` events and a page's data an EventPage; a page's id its cursor and no
/// id on a message at the profile level.
pub(crate) fn frame(operation: &Operation, frame: &Frame) -> Vec<Breach> {
    let mut found = Found::new(Side::Server, operation);
    match frame.event.as_str() {
        _ if frame.is_comment() => {}
        "page" => {
            let normative = spec().normative_component("EventPage");
            let profile = spec().component("EventPage");
            let page: Option<Value> = serde_json::from_str(&frame.data).ok();
            found.body(
                "/sse/data",
                page.as_ref(),
                normative.as_deref(),
                profile.as_deref(),
            );
            let cursor = page.as_ref().and_then(|page| page["cursor"].as_str());
            // A page's id being its cursor, and a message having none, are our profile's.
            if frame.id.is_none() || frame.id.as_deref() != cursor {
                found.push("/sse/id", "id", Level::Profile);
            }
        }
        "message" if frame.id.is_some() => found.push("/sse/id", "id", Level::Profile),
        "message" | "resync" => {}
        _ => found.push("/sse/event", "enum", Level::Normative),
    }
    found.violations
}

/// The violations of one side in one exchange, as they are found.
struct Found {
    side: Side,
    operation: String,
    /// The level of what the operation itself rests on: an operation of our profile breaks
    /// nothing normative.
    ceiling: Level,
    violations: Vec<Breach>,
}

impl Found {
    fn new(side: Side, operation: &Operation) -> Self {
        let reference = format!("{} {}", operation.method, operation.template);
        Self {
            side,
            operation: operation.id.clone(),
            ceiling: spec().level(&[reference.as_str()]),
            violations: Vec::new(),
        }
    }

    fn push(&mut self, pointer: &str, keyword: &str, level: Level) {
        let level = if self.ceiling == Level::Profile {
            Level::Profile
        } else {
            level
        };
        self.violations.push(Breach {
            side: self.side,
            operation: self.operation.clone(),
            pointer: pointer.to_owned(),
            keyword: keyword.to_owned(),
            level,
        });
    }

    /// Judges a JSON body (`None`: not JSON) at `under`: normatively against `normative` when
    /// there is one, and only when that holds, against the profile's schema.
    fn body(
        &mut self,
        under: &str,
        body: Option<&Value>,
        normative: Option<&SchemaValidator>,
        profile: Option<&SchemaValidator>,
    ) {
        let Some(value) = body else {
            match (normative, profile) {
                (Some(_), _) => self.push(under, "type", Level::Normative),
                (None, Some(_)) => self.push(under, "type", Level::Profile),
                (None, None) => {}
            }
            return;
        };
        let normative = normative.map(|schema| schema.violations(value));
        match normative.filter(|found| !found.is_empty()) {
            Some(violations) => self.push_all(under, violations, Level::Normative),
            None => {
                let profile = profile.map(|schema| schema.violations(value));
                self.push_all(under, profile.unwrap_or_default(), Level::Profile);
            }
        }
    }

    /// Pushes each schema violation found in a body at `under`.
    fn push_all(&mut self, under: &str, violations: Vec<schema::Violation>, level: Level) {
        for violation in violations {
            let pointer = format!("{under}{}", violation.pointer.trim_end_matches('/'));
            self.push(&pointer, &violation.keyword, level);
        }
    }
}

/// The path, query and header parameters of `operation` against their schemas: a missing
/// required one, or a value its schema refuses (numbers and booleans read from their text).
fn parameters(
    operation: &Operation,
    request: &Request<'_>,
    route: &str,
    query: &str,
    found: &mut Found,
) {
    let Some(object) = spec().operation_object(&operation.method, &operation.template) else {
        return;
    };
    let segments: Vec<&str> = route.split('/').collect();
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    for parameter in object["parameters"].as_array().into_iter().flatten() {
        let parameter = spec().resolve(parameter);
        let (Some(name), Some(place)) = (parameter["name"].as_str(), parameter["in"].as_str())
        else {
            continue;
        };
        let value = match place {
            "query" => pairs
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone()),
            "path" => {
                let template = format!("{{{name}}}");
                operation
                    .template
                    .split('/')
                    .position(|segment| segment == template)
                    .and_then(|index| segments.get(index))
                    .map(|segment| percent_decode_str(segment).decode_utf8_lossy().into_owned())
            }
            "header" => request
                .headers
                .get(name)
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
            _ => continue,
        };
        let pointer = format!("/{place}/{name}");
        // Judged normatively as the normative view has it (its schema, whether it is required),
        // and only where that holds, as our profile has it.
        let normative = spec().normative_parameter(operation, name);
        let Some(value) = value else {
            if parameter["required"] == true {
                let stated = normative.as_ref().is_some_and(|(_, required)| *required);
                let level = if stated {
                    Level::Normative
                } else {
                    Level::Profile
                };
                found.push(&pointer, "required", level);
            }
            continue;
        };
        let typed = typed(&value, &parameter["schema"]);
        let broken = |schema: Option<Arc<SchemaValidator>>| {
            schema.and_then(|schema| schema.violations(&typed).first().map(|v| v.keyword.clone()))
        };
        if let Some(keyword) = broken(normative.and_then(|(schema, _)| schema)) {
            found.push(&pointer, &keyword, Level::Normative);
        } else if let Some(keyword) = broken(spec().parameter(operation, name)) {
            found.push(&pointer, &keyword, Level::Profile);
        }
    }
}

/// A parameter's text as the JSON value its schema describes.
fn typed(text: &str, schema: &Value) -> Value {
    let parsed = match spec().resolve(schema)["type"].as_str() {
        Some("integer") => text.parse::<i64>().ok().map(Value::from),
        Some("number") => text.parse::<f64>().ok().map(Value::from),
        Some("boolean") => text.parse::<bool>().ok().map(Value::from),
        _ => None,
    };
    parsed.unwrap_or_else(|| Value::String(text.to_owned()))
}
