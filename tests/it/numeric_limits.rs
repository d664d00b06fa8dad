//! Every numeric bound a request meets in openapi.json, tried through HTTP at the bound and one
//! past it. At the bound, the request passes validation (whatever the service then says of it);
//! one past, it is 400 `invalid_request` (a body) or `invalid_parameter` (a path or query
//! parameter). An `int64` without a stated bound is bounded by its type, compared exactly: 2^63
//! is out of range, not rounded into it.

use std::sync::atomic::{AtomicU64, Ordering};

use intent_server::auth::resource::Resource;
use intent_tests::{TestServer, operations, resolve};
use serde_json::Value;

/// The most negative integer below `i64::MIN` that JSON's usual float reading keeps apart from
/// it (the next `f64`): without arbitrary precision, -2^63 - 1 reads as -2^63 itself.
const PAST_I64_MIN: &str = "-9223372036854777856";

/// One numeric member of a request: where it sits, and its bounds as JSON number text.
#[derive(Debug)]
struct Bound {
    /// `operationId` and the member's pointer or the parameter's name.
    what: String,
    /// The least value the schema admits, and the first value below it.
    min: Option<(String, String)>,
    /// The greatest value the schema admits, and the first value above it.
    max: Option<(String, String)>,
}

/// The bounds of an integer or number schema, from `minimum`/`maximum` or its `int64` format.
fn bounds(what: String, schema: &Value) -> Bound {
    let int64 = schema["format"] == "int64";
    let stated = |key: &str| schema[key].as_i64();
    let min = match stated("minimum") {
        Some(min) => Some((min.to_string(), (min - 1).to_string())),
        None if int64 => Some((i64::MIN.to_string(), PAST_I64_MIN.to_owned())),
        None => None,
    };
    let max = match stated("maximum") {
        Some(max) => Some((max.to_string(), (max + 1).to_string())),
        None if int64 => Some((i64::MAX.to_string(), (i64::MAX as u64 + 1).to_string())),
        None => None,
    };
    Bound { what, min, max }
}

/// The schema a request member at `pointer` (of an example body) meets, following `$ref`s and
/// the `oneOf` branch whose properties hold the member.
fn schema_at(schema: &'static Value, segments: &[&str]) -> Option<&'static Value> {
    let schema = resolve(schema);
    let Some((first, rest)) = segments.split_first() else {
        return Some(schema);
    };
    for branches in ["oneOf", "anyOf", "allOf"] {
        for branch in schema[branches].as_array().into_iter().flatten() {
            if let Some(found) = schema_at(branch, segments) {
                return Some(found);
            }
        }
    }
    if first.parse::<usize>().is_ok() && schema.get("items").is_some() {
        return schema_at(&schema["items"], rest);
    }
    schema["properties"]
        .get(*first)
        .and_then(|property| schema_at(property, rest))
}

/// `value` with each empty array given one item, the item schema's own `example` where it has
/// one, so that the bounds of items that request examples leave empty are tried too.
fn with_item_examples(value: &Value, schema: &'static Value) -> Value {
    fn fill(value: &mut Value, root: &'static Value, path: &mut Vec<String>) {
        match value {
            Value::Array(items) if items.is_empty() => {
                let segments: Vec<&str> = path.iter().map(String::as_str).collect();
                let example = schema_at(root, &segments)
                    .map(|array| resolve(&array["items"]))
                    .and_then(|item| item.get("example"));
                items.extend(example.cloned());
            }
            Value::Array(items) => {
                for (index, item) in items.iter_mut().enumerate() {
                    path.push(index.to_string());
                    fill(item, root, path);
                    path.pop();
                }
            }
            Value::Object(map) => {
                for (key, member) in map.iter_mut() {
                    path.push(key.clone());
                    fill(member, root, path);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut value = value.clone();
    fill(&mut value, schema, &mut Vec::new());
    value
}

/// Every integer member of `value`, as JSON pointer segments.
fn integers(value: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Number(number) if number.is_i64() || number.is_u64() => out.push(path.clone()),
        Value::Object(map) => {
            for (key, value) in map {
                path.push(key.clone());
                integers(value, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (index, value) in items.iter().enumerate() {
                path.push(index.to_string());
                integers(value, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The bearer token an operation asks for: its resource and its one scope.
fn token_for(server: &TestServer, operation: &Value) -> String {
    let resource = operation["x-resource"]
        .as_str()
        .and_then(Resource::from_name)
        .expect("every operation names its resource");
    let scopes: Vec<&str> = operation["security"][0]["oauth2"]
        .as_array()
        .expect("every operation names its scopes")
        .iter()
        .map(|scope| scope.as_str().expect("a scope is text"))
        .collect();
    server.token("alice", resource, &scopes)
}

/// `method path` of `operation` with `body` as raw JSON text (so that numbers go out exactly as
/// written), and a fresh value in each header the operation requires (an `Idempotency-Key`).
async fn send(
    server: &TestServer,
    token: &str,
    (method, path, operation): (&str, &str, &'static Value),
    body: Option<String>,
) -> (u16, Value) {
    static FRESH: AtomicU64 = AtomicU64::new(0);
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", server.base_url()))
        .bearer_auth(token);
    for parameter in operation["parameters"].as_array().into_iter().flatten() {
        let parameter = resolve(parameter);
        if parameter["in"] == "header" && parameter["required"] == true {
            let name = parameter["name"].as_str().expect("a parameter has a name");
            let value = format!("limits-{}", FRESH.fetch_add(1, Ordering::Relaxed));
            request = request.header(name, value);
        }
    }
    if let Some(body) = body {
        request = request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `example` with the member at `segments` written as the number `text`.
fn with_number(example: &Value, segments: &[String], text: &str) -> String {
    const MARK: &str = "@@number@@";
    let mut body = example.clone();
    let pointer: String = segments.iter().map(|s| format!("/{s}")).collect();
    *body.pointer_mut(&pointer).expect("the member exists") = Value::String(MARK.into());
    body.to_string().replace(&format!("\"{MARK}\""), text)
}

/// Tries both ends of `bound`: each limit must pass validation, and the value one past it must
/// be refused with `code`. Returns how many ends it tried.
async fn try_bound(
    bound: &Bound,
    code: &str,
    mut call: impl AsyncFnMut(&str) -> (u16, Value),
) -> usize {
    let what = &bound.what;
    let mut tried = 0;
    for (at, past) in [&bound.min, &bound.max].into_iter().flatten() {
        let (status, body) = call(at).await;
        assert!(
            !(status == 400 && body["error"]["code"] == code),
            "{what} = {at} is within bounds, yet refused: {body}"
        );
        let (status, body) = call(past).await;
        assert_eq!(status, 400, "{what} = {past} is out of bounds: {body}");
        assert_eq!(body["error"]["code"], code, "{what} = {past}: {body}");
        tried += 1;
    }
    tried
}

#[tokio::test]
async fn every_numeric_bound_of_a_request_holds_at_the_bound_and_refuses_one_past() {
    let server = TestServer::start().await;
    let session = {
        let (method, path, start) = operations()
            .into_iter()
            .find(|(_, _, operation)| operation["operationId"] == "startChat")
            .expect("openapi.json has startChat");
        let token = token_for(&server, start);
        let body = Some(r#"{"message":"hello"}"#.into());
        let (status, body) = send(&server, &token, (&method, path, start), body).await;
        assert!((200..300).contains(&status), "{status} {body}");
        body["sessionId"]
            .as_str()
            .expect("a started turn names its session")
            .to_owned()
    };
    let mut tried = 0;
    // Body members tried, as schema paths (array indices as 0).
    let mut covered = std::collections::BTreeSet::new();
    for (method, path, operation) in operations() {
        let id = operation["operationId"]
            .as_str()
            .expect("every operation has an id");
        let token = token_for(&server, operation);
        let media = &operation["requestBody"]["content"]["application/json"];
        // The body of a request that varies only a parameter: the operation's own example.
        let body = media["examples"]
            .as_object()
            .and_then(|examples| examples.values().next())
            .map(|example| &example["value"])
            .or(media.get("example"))
            .map(Value::to_string);
        // Request bodies: every integer member of every example.
        let body_url = path
            .replace("{sessionId}", &session)
            .replace("{actionId}", "act_none");
        for example in media["examples"].as_object().into_iter().flatten() {
            let example = &with_item_examples(&example.1["value"], &media["schema"]);
            let mut members = Vec::new();
            integers(example, &mut Vec::new(), &mut members);
            for segments in members {
                let refs: Vec<&str> = segments.iter().map(String::as_str).collect();
                // A member of a free-form object (an operation's `input`) has no schema here.
                let Some(schema) = schema_at(&media["schema"], &refs) else {
                    continue;
                };
                let bound = bounds(format!("{id} /{}", refs.join("/")), schema);
                covered.insert(schema_path(&refs));
                tried += try_bound(&bound, "invalid_request", async |value: &str| {
                    send(
                        &server,
                        &token,
                        (&method, &body_url, operation),
                        Some(with_number(example, &segments, value)),
                    )
                    .await
                })
                .await;
            }
        }
        // Path and query parameters.
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            let parameter = resolve(parameter);
            let schema = resolve(&parameter["schema"]);
            if schema["type"] != "integer" {
                continue;
            }
            let name = parameter["name"].as_str().expect("a parameter has a name");
            let bound = bounds(format!("{id} {name}"), schema);
            let url = |value: &str| {
                let filled = path
                    .replace("{sessionId}", &session)
                    .replace("{name}", "API_KEY")
                    .replace(&format!("{{{name}}}"), value);
                match parameter["in"].as_str() {
                    Some("query") => format!("{filled}?{name}={value}"),
                    _ => filled,
                }
            };
            tried += try_bound(&bound, "invalid_parameter", async |value: &str| {
                send(
                    &server,
                    &token,
                    (&method, &url(value), operation),
                    body.clone(),
                )
                .await
            })
            .await;
        }
    }
    // Every bound a request schema states is carried by some example, so none goes untried.
    let mut stated = Vec::new();
    for (_, _, operation) in operations() {
        let media = &operation["requestBody"]["content"]["application/json"];
        if !media.is_null() {
            stated_bounds(
                &media["schema"],
                String::new(),
                &mut Vec::new(),
                &mut stated,
            );
        }
    }
    stated.retain(|path| !covered.contains(path));
    assert!(
        stated.is_empty(),
        "bounds no request example carries: {stated:?}"
    );
    assert!(tried >= 80, "only {tried} bound ends were tried");
}

/// A member's pointer as a schema path: array indices become 0.
fn schema_path(segments: &[&str]) -> String {
    segments
        .iter()
        .map(|s| {
            if s.parse::<usize>().is_ok() {
                "/0".to_owned()
            } else {
                format!("/{s}")
            }
        })
        .collect()
}

/// Schema paths of every `minimum` or `maximum` stated under `schema`.
fn stated_bounds(
    schema: &'static Value,
    at: String,
    seen: &mut Vec<&'static str>,
    out: &mut Vec<String>,
) {
    if let Some(reference) = schema["$ref"].as_str() {
        if seen.contains(&reference) {
            return;
        }
        seen.push(reference);
        stated_bounds(resolve(schema), at, seen, out);
        seen.pop();
        return;
    }
    if schema.get("minimum").is_some() || schema.get("maximum").is_some() {
        out.push(at.clone());
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        stated_bounds(property, format!("{at}/{name}"), seen, out);
    }
    if schema.get("items").is_some() {
        stated_bounds(&schema["items"], format!("{at}/0"), seen, out);
    }
    for branches in ["oneOf", "anyOf", "allOf"] {
        for branch in schema[branches].as_array().into_iter().flatten() {
            stated_bounds(branch, at.clone(), seen, out);
        }
    }
}
