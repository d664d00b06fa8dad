//! Negative checks derived from openapi.json, like a schema fuzzer's negative phase but
//! deterministic: from each operation's request example and schema, and from its query
//! parameters, requests that break exactly one rule. A case is normative when the rule it breaks
//! is. Our profile refuses each with a 4xx in the error envelope and changes nothing; the document
//! states the rules, not how a request that breaks one is met, so the normative level asks only
//! that an error come in the envelope and that the session still hold its schema.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::agent_actions::pending_action;
use super::{encode, read, run, start_turn};
use crate::checks::{Category, Check};
use crate::finding::excerpt;
use crate::finding::{Finding, Verdict, ensure, skip};
use crate::means::Decision;
use crate::spec::{Operation, spec};
use crate::target::{Role, Target};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "schema.negative.normative".into(),
            category: Category::Schema,
            requirement: "A request that breaks a normative rule of openapi.json (a member's type, `null` where it is not nullable, a body that is not an object, a parameter's type or bound) MUST NOT be answered with an error outside the envelope, and MUST leave the session holding its schema (being refused with a 4xx and changing nothing is a profile assertion).",
            section: "4, 7",
            rests_on: vec![
                "#/components/schemas/SessionUpdate",
                "#/components/schemas/ActionResolutionRequest",
                "#/components/parameters/Wait",
            ],
            operation: None,
            run: run!(normative),
        },
        Check {
            id: "schema.negative.profile".into(),
            category: Category::Schema,
            requirement: "A request that breaks a rule of the reference profile in openapi.json (types, nullability, required and unexpected members, lengths, enums, bounds and patterns of its request schemas and parameters) MUST be refused with a 4xx in the error envelope and MUST change nothing.",
            section: "4, 7",
            rests_on: vec![
                "#/components/schemas/PipelineBuildRequest",
                "#/components/schemas/ChatStartRequest",
                "#/components/schemas/CredentialValue",
            ],
            operation: None,
            run: run!(profile),
        },
    ]
}

/// One request derived from the document that breaks one rule.
struct Case {
    operation: &'static Operation,
    /// The query that follows the path (`?name=value`), or nothing.
    query: String,
    body: Option<Value>,
    /// The rule it breaks, for the report.
    breaks: String,
    /// Whether that rule is a choice of the reference profile.
    profile: bool,
}

/// The JSON pointer of `operation`'s object in the document, such as
/// `#/paths/~1v1~1agent~1chat/post`.
fn operation_pointer(operation: &Operation) -> String {
    let escaped = operation.template.replace('~', "~0").replace('/', "~1");
    format!("#/paths/{escaped}/{}", operation.method.to_lowercase())
}

/// Whether the operation or its object as a whole is a choice of the profile.
fn operation_profile(operation: &Operation) -> bool {
    spec().is_profile(&format!("{} {}", operation.method, operation.template))
}

/// Whether the rule `keyword` of the element at `pointer` (or the element as a whole) is a
/// choice of the profile: the element is marked, or it or its `schema` lists the keyword in
/// `x-profile-fills`.
fn marked(pointer: &str, keyword: &str) -> bool {
    let fills = |pointer: &str| {
        spec()
            .element(pointer)
            .and_then(|element| element.get("x-profile-fills"))
            .and_then(Value::as_array)
            .is_some_and(|fills| fills.iter().any(|fill| fill == keyword))
    };
    spec().is_profile(pointer) || fills(pointer) || fills(&format!("{pointer}/schema"))
}

/// The schema at `pointer` with its `$ref`s followed, and the pointer it was found at.
fn resolved(pointer: String) -> (String, Value) {
    intent_models::openapi::resolve_at(spec().document(), &pointer)
}

/// A value of another JSON type than `schema`'s.
fn wrong_type(schema: &Value) -> Value {
    match schema["type"].as_str() {
        Some("string") => json!(12345),
        _ => json!("conformance"),
    }
}

/// Values that break one rule of `schema`, each with the rule's keyword and a description.
fn breaking_values(schema: &Value) -> Vec<(&'static str, String, Value)> {
    let mut values = Vec::new();
    if schema["type"].is_string() {
        values.push(("type", "a value of another type".into(), wrong_type(schema)));
    }
    if schema["nullable"] != json!(true) {
        values.push((
            "nullable",
            "null, which is not nullable".into(),
            Value::Null,
        ));
    }
    if let Some(max) = schema["maxLength"].as_u64().filter(|max| *max < 100_000) {
        let long = "x".repeat(max as usize + 1);
        values.push(("maxLength", format!("{} characters", max + 1), json!(long)));
    }
    if schema["enum"].is_array() {
        let off = json!("conformance-not-in-enum");
        values.push(("enum", "a value off its enum".into(), off));
    }
    if let Some(min) = schema["minimum"].as_i64() {
        values.push((
            "minimum",
            format!("{}, under its minimum", min - 1),
            json!(min - 1),
        ));
    }
    if let Some(max) = schema["maximum"].as_i64() {
        values.push((
            "maximum",
            format!("{}, over its maximum", max + 1),
            json!(max + 1),
        ));
    }
    if schema["pattern"].is_string() {
        let off = json!("conformance pattern");
        values.push(("pattern", "a value off its pattern".into(), off));
    }
    values
}

/// The cases of `operation`'s body: each member of the schema branch its example (or `base`)
/// takes, broken one rule at a time, a required member left out, an unexpected member, and a
/// body of another type. Only bodies the schema refuses are kept.
fn body_cases(operation: &'static Operation, base: Option<Value>) -> Vec<Case> {
    let (method, template) = (&operation.method, &operation.template);
    let base = base.or_else(|| {
        spec()
            .request_examples(method, template)
            .into_iter()
            .next()
            .cloned()
    });
    let (Some(base), Some(validator)) = (base, spec().request_body(operation)) else {
        return Vec::new();
    };
    let body_pointer = format!(
        "{}/requestBody/content/application~1json/schema",
        operation_pointer(operation)
    );
    let (mut pointer, mut schema) = resolved(body_pointer);
    // A `oneOf` or `anyOf`: the branch whose required members the example has.
    for combinator in ["oneOf", "anyOf"] {
        let branches = schema[combinator].as_array().cloned().unwrap_or_default();
        let taken = (0..branches.len())
            .map(|index| resolved(format!("{pointer}/{combinator}/{index}")))
            .find(|(_, branch)| {
                branch["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .all(|member| base.get(member).is_some())
            });
        if let Some(branch) = taken {
            (pointer, schema) = branch;
        }
    }
    // The operation or the schema as a whole may be the profile's, which makes every rule in it so.
    let whole = operation_profile(operation) || spec().is_profile(&pointer);
    let mut cases = Vec::new();
    let mut push = |body: Value, breaks: String, profile: bool| {
        if !validator.is_valid(&body) {
            cases.push(Case {
                operation,
                query: String::new(),
                body: Some(body),
                breaks,
                profile: whole || profile,
            });
        }
    };
    push(
        json!("conformance"),
        "the body is not an object".into(),
        marked(&pointer, "type"),
    );
    let Value::Object(base) = base else {
        return cases;
    };
    for member in schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, _)| name)
    {
        let (member_pointer, member_schema) = resolved(format!("{pointer}/properties/{member}"));
        for (keyword, what, value) in breaking_values(&member_schema) {
            let mut body = base.clone();
            body.insert(member.clone(), value);
            let profile = marked(&member_pointer, keyword);
            push(
                Value::Object(body),
                format!("`{member}` is {what}"),
                profile,
            );
        }
    }
    for member in schema["required"].as_array().into_iter().flatten() {
        let member = member.as_str().unwrap_or_default();
        let mut body = base.clone();
        body.remove(member);
        let what = format!("the required `{member}` is missing");
        push(Value::Object(body), what, marked(&pointer, "required"));
    }
    if schema["additionalProperties"] == json!(false) {
        let mut body: Map<String, Value> = base.clone();
        body.insert("conformanceUnexpected".into(), json!(1));
        let what = "an unexpected member `conformanceUnexpected`".into();
        push(
            Value::Object(body),
            what,
            marked(&pointer, "additionalProperties"),
        );
    }
    cases
}

/// The cases of `operation`'s query parameters: each broken one rule at a time. Operations that
/// answer a stream are left out, since a wrongly accepted request would not end.
fn query_cases(operation: &'static Operation) -> Vec<Case> {
    let (method, template) = (&operation.method, &operation.template);
    let Some(object) = spec().operation_object(method, template) else {
        return Vec::new();
    };
    if object
        .pointer("/responses/200/content/text~1event-stream")
        .is_some()
    {
        return Vec::new();
    }
    let whole = operation_profile(operation);
    let mut cases = Vec::new();
    for index in 0..object["parameters"].as_array().map_or(0, Vec::len) {
        let (pointer, parameter) = resolved(format!(
            "{}/parameters/{index}",
            operation_pointer(operation)
        ));
        if parameter["in"] != "query" {
            continue;
        }
        let name = parameter["name"].as_str().unwrap_or_default();
        let Some(validator) = spec().inline(&parameter["schema"]) else {
            continue;
        };
        for (keyword, what, value) in breaking_values(&parameter["schema"]) {
            // A query value is text: a string parameter has no other type to send.
            let textual = keyword == "type" && parameter["schema"]["type"] == "string";
            if keyword == "nullable" || textual || validator.is_valid(&value) {
                continue;
            }
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            cases.push(Case {
                operation,
                query: format!("?{name}={}", encode(&text)),
                body: None,
                breaks: format!("query `{name}` is {what}"),
                profile: whole || marked(&pointer, keyword),
            });
        }
    }
    cases
}

async fn normative(target: &Target) -> Verdict {
    refused(target, false).await
}

async fn profile(target: &Target) -> Verdict {
    refused(target, true).await
}

/// What the refused requests could have changed: the session they name and the statement.
async fn state(target: &Target, agent: &str, session: &str) -> Result<Value, Finding> {
    let session = read(target, agent, &format!("/v1/agent/sessions/{session}")).await?;
    let mut state = json!({ "session": [session["title"], session["archived"]] });
    // The statement is compared when the deployment answers it; its own check judges it.
    if let Ok(account) = &target.role(Role::Account).await {
        let path = "/v1/account/statement";
        let statement = target
            .request(Method::GET, path)
            .bearer(account)
            .send()
            .await?;
        if statement.status == 200 {
            state["statement"] = statement.body["lines"].clone();
        }
    }
    Ok(state)
}

/// Sends every case of the level (`profile` or normative). At the profile's level each must get
/// a 4xx envelope and the session and statement must read the same afterwards. At the normative
/// level the document states the rules, not that a request breaking one is refused rather than
/// clamped or ignored: an error must come in the envelope (part 7.1), and the session must still
/// hold its normative schema afterwards; refusing and changing nothing are profile assertions.
async fn refused(target: &Target, profile: bool) -> Verdict {
    let agent = &target.role(Role::Agent).await?;
    let (session, _) = start_turn(target, agent, None, "hello").await?;
    let mut cases: Vec<Case> = spec()
        .operations()
        .iter()
        .flat_map(|operation| {
            let mut cases = body_cases(operation, None);
            cases.extend(query_cases(operation));
            cases
        })
        .filter(|case| case.profile == profile)
        .collect();
    if cases.is_empty() {
        return skip("openapi.json yields no case of this level");
    }
    // A resolution's cases go to an action the run raised, through `profile.resolution`.
    let resolves = cases
        .iter()
        .any(|case| case.operation.id == "resolveAction");
    let action = match resolves {
        true => match pending_action(target, agent).await {
            Ok(pending) => Ok(pending),
            Err(Finding::Skip(reason)) => Err(reason),
            Err(other) => return Err(other),
        },
        false => Err("no case resolves an action".to_owned()),
    };
    // A resolution's cases break one rule of the body that would resolve the action raised, so
    // that no other (its digest, its revision) is what a refusal answers.
    if let Ok(pending) = &action {
        let resolution = spec()
            .operations()
            .iter()
            .find(|operation| operation.id == "resolveAction");
        if let Some(operation) = resolution {
            let base = pending.body(target, pending.revision, Decision::Reject);
            cases.retain(|case| case.operation.id != "resolveAction");
            let theirs = body_cases(operation, Some(base));
            cases.extend(theirs.into_iter().filter(|case| case.profile == profile));
        }
    }
    let before = state(target, agent, &session).await?;
    let (mut unrefused, mut outside, mut unreached) = (Vec::new(), Vec::new(), Vec::new());
    let mut paths: BTreeMap<&str, String> = BTreeMap::new();
    let mut sent = 0;
    for case in &cases {
        let Ok(token) = &target.role(super::role_of(case.operation)).await else {
            continue;
        };
        let operation = case.operation;
        let (path, method, idempotency) = if operation.id == "resolveAction" {
            match &action {
                Ok(pending) => {
                    let means = &target.settings.means.resolution;
                    let path = means.path(&pending.session, &pending.action);
                    (path, means.http_method(), means.idempotency_header.as_str())
                }
                Err(reason) => {
                    unreached.push(format!("{} ({}): {reason}", operation.id, case.breaks));
                    continue;
                }
            }
        } else {
            // One path per operation: its cases differ in their body or query alone.
            let path = match paths.get(operation.id.as_str()) {
                Some(path) => path.clone(),
                None => {
                    let path = super::subjects::path_of(target, operation, &session, "").await;
                    paths.insert(operation.id.as_str(), path.clone());
                    path
                }
            };
            let method = operation
                .method
                .parse()
                .expect("the document's methods parse");
            (path, method, "Idempotency-Key")
        };
        let path = format!("{path}{}", case.query);
        let mut request = target
            .request(method.clone(), &path)
            .bearer(token)
            .header(idempotency, &super::fresh_key("negative"));
        if let Some(body) = &case.body {
            request = request.json(body);
        }
        let reply = request.send().await?;
        let mut line = format!("{method} {} ({})", excerpt(&path), case.breaks);
        if let Some(body) = &case.body {
            let _ = write!(line, " {}", excerpt(&body.to_string()));
        }
        let _ = write!(line, " -> {} {}", reply.status, excerpt(&reply.text));
        // A route or thing that is not there is no refusal of the rule the case breaks.
        if matches!(reply.status, 404 | 405) {
            unreached.push(line);
            continue;
        }
        sent += 1;
        let enveloped = reply.body.get("error").is_some();
        if !((400..500).contains(&reply.status) && enveloped) {
            if reply.status >= 400 && !enveloped {
                outside.push(line.clone());
            }
            unrefused.push(line);
        }
    }
    if sent == 0 {
        return skip(format!(
            "inconclusive: no case of this level reached its subject: {}",
            unreached.join("; ")
        ));
    }
    if !unreached.is_empty() {
        crate::finding::warn(format!(
            "{} invalid requests did not reach their subject and judge nothing: {}",
            unreached.len(),
            unreached
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    let listed = |lines: &[String]| {
        lines
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    };
    let after = state(target, agent, &session).await?;
    if profile {
        ensure(unrefused.is_empty(), || {
            format!(
                "{} of {sent} invalid requests were not refused with a 4xx envelope: {}",
                unrefused.len(),
                listed(&unrefused)
            )
        })?;
        return ensure(before == after, || {
            format!(
                "the refused requests changed the session or statement: {before} became {after}"
            )
        });
    }
    crate::finding::profile(unrefused.is_empty(), || {
        format!(
            "{} of {sent} invalid requests were not refused with a 4xx envelope, as the profile \
             refuses them: {}",
            unrefused.len(),
            listed(&unrefused)
        )
    });
    crate::finding::profile(before == after, || {
        format!("the invalid requests changed the session or statement: {before} became {after}")
    });
    ensure(outside.is_empty(), || {
        format!(
            "{} of {sent} invalid requests got an error outside the envelope: {}",
            outside.len(),
            listed(&outside)
        )
    })?;
    let read_back = read(target, agent, &format!("/v1/agent/sessions/{session}")).await?;
    let Some(schema) = spec().normative_component("Session") else {
        return Err(Finding::Error("openapi.json has no Session".into()));
    };
    let errors = schema.errors(&read_back);
    ensure(errors.is_empty(), || {
        format!(
            "after the invalid requests, the session no longer holds its schema: {}",
            errors.join("; ")
        )
    })
}
