//! Stateful sequences from the `links` of openapi.json (category `stateful`): one check per
//! operation that starts a chain (it has links, and no other operation links to it). The check
//! calls it with the run's inputs, then follows every link of each answer, breadth first and
//! each link once, with the values the link names and every other required input generated from
//! its schema (the same under the same `--seed`; an `Idempotency-Key` is always fresh). Links to
//! a `DELETE` are followed last, so that no step deletes what a later one reads.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use reqwest::Method;
use serde_json::{Value, json};

use super::{encode, fresh_key, role_of, run_on_operation};
use crate::checks::{Category, Check};
use crate::finding::{Finding, Verdict, ensure};
use crate::generate::Rng;
use crate::means::Chat;
use crate::spec::{Level, Operation, spec};
use crate::target::{Reply, Target};

/// The most steps one sequence takes.
const MOST_STEPS: usize = 16;

pub(super) fn checks() -> Vec<Check> {
    roots()
        .into_iter()
        .map(|operation| Check {
            id: format!("stateful.{}", operation.id).into(),
            category: Category::Stateful,
            requirement: format!(
                "Following the links of openapi.json from this operation (to {}), with every other input generated from its schema, each answer MUST be a status the operation declares, hold against its schema and be no server error outside the error envelope (one inside it is a profile assertion), and the id each link passes MUST resolve (no 404).",
                reached(operation).join(", ")
            )
            .leak(),
            section: "4",
            rests_on: vec![&operation.reference],
            operation: Some(operation),
            run: run_on_operation!(sequence),
        })
        .collect()
}

/// The operations a sequence from `root` can reach through the links of their successes, in
/// the order it meets them (`root` itself when a link leads back to it).
fn reached(root: &'static Operation) -> Vec<&'static str> {
    let mut seen: Vec<&'static str> = Vec::new();
    let mut queue = VecDeque::from([root]);
    while let Some(operation) = queue.pop_front() {
        for next in success_links(operation).filter_map(|(_, link)| operation_of(link)) {
            if !seen.contains(&next.id.as_str()) {
                seen.push(&next.id);
                queue.push_back(next);
            }
        }
    }
    seen
}

/// The links of every success `operation` may answer, status by status.
fn success_links(
    operation: &'static Operation,
) -> impl Iterator<Item = (&'static str, &'static Value)> {
    (200..300).flat_map(move |status| links(operation, status))
}

/// The links of `operation`'s answer `status`, by name.
fn links(operation: &Operation, status: u16) -> Vec<(&'static str, &'static Value)> {
    let object = spec()
        .operation_object(&operation.method, &operation.template)
        .expect("operations come from the document");
    let links = object
        .pointer(&format!("/responses/{status}/links"))
        .and_then(Value::as_object);
    links
        .into_iter()
        .flatten()
        .map(|(name, link)| (name.as_str(), spec().resolve(link)))
        .collect()
}

/// The links of an answer with `status`: the document's for that status, and for another
/// success those of the success the document gives links (a deployment may answer any 2xx
/// where the document shows none).
fn answer_links(operation: &Operation, status: u16) -> Vec<(&'static str, &'static Value)> {
    let exact = links(operation, status);
    if !exact.is_empty() || !(200..300).contains(&status) {
        return exact;
    }
    (200..300)
        .map(|status| links(operation, status))
        .find(|links| !links.is_empty())
        .unwrap_or_default()
}

/// The operations that start a chain: with links in a success answer, and the target of no
/// other operation's link.
fn roots() -> Vec<&'static Operation> {
    let operations = spec().operations();
    let targets: BTreeSet<&str> = operations
        .iter()
        .flat_map(|operation| {
            success_links(operation)
                .filter_map(|(_, link)| link["operationId"].as_str())
                .filter(|id| *id != operation.id)
        })
        .collect();
    operations
        .iter()
        .filter(|operation| {
            success_links(operation).next().is_some() && !targets.contains(operation.id.as_str())
        })
        .collect()
}

/// One step of a sequence: what was sent and what answered.
struct Step {
    /// `operationId`, or `link (operationId)`.
    name: String,
    operation: &'static Operation,
    /// The path, query and header parameters sent, by name.
    parameters: BTreeMap<String, Value>,
    body: Option<Value>,
    reply: Reply,
}

/// A link to follow: its name, its object and the step whose answer holds it.
struct Next {
    name: &'static str,
    link: &'static Value,
    from: usize,
}

async fn sequence(target: &Target, root: &'static Operation) -> Verdict {
    let mut rng = Rng::new(target.settings.seed, &root.id);
    let body = root_body(target, root, &mut rng).await?;
    let (first, _) = send(target, root, BTreeMap::new(), Some(body), &mut rng).await?;
    if (400..500).contains(&first.reply.status) {
        let what = format!(
            "{} refused the run's inputs with {}, so no link could be followed",
            first.name, first.reply.status
        );
        return match root.id.as_str() {
            "startChat" => Err(crate::means::inconclusive("chat", what)),
            id => crate::finding::skip(format!(
                "inconclusive: {what}; set inputs.{id} in the config file"
            )),
        };
    }
    if !(200..300).contains(&first.reply.status) {
        return crate::finding::fail(format!(
            "{} answered {} to the run's inputs, so no link could be followed: {}",
            first.name,
            first.reply.status,
            crate::finding::excerpt(&first.reply.text)
        ));
    }
    let mut steps = vec![first];
    let mut broken: Vec<(Level, String)> = Vec::new();
    judge(&steps[0], None, &mut broken);
    let mut followed: BTreeSet<(String, &str)> = BTreeSet::new();
    let mut queue: VecDeque<Next> = VecDeque::new();
    let mut last: Vec<Next> = Vec::new();
    let mut enqueue =
        |steps: &[Step], from: usize, queue: &mut VecDeque<Next>, last: &mut Vec<Next>| {
            let step = &steps[from];
            for (name, link) in answer_links(step.operation, step.reply.status) {
                if !followed.insert((step.operation.id.clone(), name)) {
                    continue;
                }
                let next = Next { name, link, from };
                match operation_of(link) {
                    Some(operation) if operation.method == "DELETE" => last.push(next),
                    Some(_) => queue.push_back(next),
                    None => {}
                }
            }
        };
    enqueue(&steps, 0, &mut queue, &mut last);
    while steps.len() < MOST_STEPS {
        let Some(next) = queue.pop_front().or_else(|| last.pop()) else {
            break;
        };
        let operation = operation_of(next.link).expect("enqueued links name an operation");
        let from = &steps[next.from];
        let mut given = BTreeMap::new();
        for (name, expression) in next.link["parameters"].as_object().into_iter().flatten() {
            let name = name.rsplit('.').next().unwrap_or(name);
            match evaluate(expression, from, &target.settings.means.chat) {
                Some(value) => given.insert(name.to_owned(), value),
                None => {
                    broken.push((
                        level_of(next.link),
                        format!(
                            "link {}: {expression} names nothing in {}",
                            next.name, from.name
                        ),
                    ));
                    continue;
                }
            };
        }
        let chat = &target.settings.means.chat;
        let body = next
            .link
            .get("requestBody")
            .and_then(|b| evaluate(b, from, chat));
        // A Build presented back to a lifecycle endpoint goes as `profile.commit` says (part 4.1
        // does not show the body).
        let body = body.map(|body| {
            let commit = super::LIFECYCLE.contains(&operation.template.as_str())
                && crate::spec::presents_build(&body);
            if commit {
                crate::finding::through_means("commit", false);
                target.settings.means.commit.request(&body)
            } else {
                body
            }
        });
        let (mut step, generated) = send(target, operation, given, body, &mut rng).await?;
        step.name = format!("{} ({})", next.name, operation.id);
        let promise = (!generated).then_some(next.link);
        judge(&step, promise, &mut broken);
        steps.push(step);
        enqueue(&steps, steps.len() - 1, &mut queue, &mut last);
    }
    let path: Vec<String> = steps
        .iter()
        .map(|step| format!("{} {}", step.name, step.reply.status))
        .collect();
    let (normative, profile): (Vec<_>, Vec<_>) = broken
        .into_iter()
        .partition(|(level, _)| *level == Level::Normative);
    for (_, finding) in &profile {
        crate::finding::profile(false, || {
            format!("{finding}; sequence: {}", path.join(", "))
        });
    }
    ensure(normative.is_empty(), || {
        let findings: Vec<&str> = normative.iter().map(|(_, text)| text.as_str()).collect();
        format!("{}; sequence: {}", findings.join("; "), path.join(", "))
    })
}

/// The operation a link names by `operationId`.
fn operation_of(link: &Value) -> Option<&'static Operation> {
    let id = link["operationId"].as_str()?;
    spec()
        .operations()
        .iter()
        .find(|operation| operation.id == id)
}

/// The level of what a link promises: profile when the link is a choice of our profile.
fn level_of(link: &Value) -> Level {
    if link.get("x-profile").is_some() {
        Level::Profile
    } else {
        Level::Normative
    }
}

/// What the root is sent: the run's inputs where the deployment decides what is valid (a chat
/// message, a build request), else a body generated from its schema.
async fn root_body(target: &Target, root: &Operation, rng: &mut Rng) -> Result<Value, Finding> {
    match root.id.as_str() {
        "startChat" => {
            let message = super::subjects::chat(target, "conformance: follow the links");
            Ok(target.settings.means.chat.request(message, None))
        }
        "evmBuild" | "svmStage" => super::subjects::build_request(target, &root.template).await,
        _ => Ok(request_schema(root)
            .map(|schema| crate::generate::value(schema, rng))
            .unwrap_or(Value::Null)),
    }
}

/// The JSON schema of `operation`'s request body.
fn request_schema(operation: &Operation) -> Option<&'static Value> {
    let object = spec().operation_object(&operation.method, &operation.template)?;
    spec()
        .resolve(object.get("requestBody")?)
        .pointer("/content/application~1json/schema")
}

/// Sends `operation` with the `given` parameters and `body`, every other required parameter
/// (and a required body) generated; the step, and whether a path parameter was generated.
async fn send(
    target: &Target,
    operation: &'static Operation,
    given: BTreeMap<String, Value>,
    body: Option<Value>,
    rng: &mut Rng,
) -> Result<(Step, bool), Finding> {
    let object = spec()
        .operation_object(&operation.method, &operation.template)
        .expect("operations come from the document");
    let mut path = operation.template.clone();
    let mut query = Vec::new();
    let mut headers = Vec::new();
    let mut parameters = BTreeMap::new();
    let mut generated = false;
    for parameter in object["parameters"].as_array().into_iter().flatten() {
        let parameter = spec().resolve(parameter);
        let (Some(name), Some(place)) = (parameter["name"].as_str(), parameter["in"].as_str())
        else {
            continue;
        };
        let value = match given.get(name) {
            Some(value) => value.clone(),
            None if parameter["required"] == json!(true) => {
                generated |= place == "path";
                if name.eq_ignore_ascii_case("idempotency-key") {
                    json!(fresh_key("stateful"))
                } else {
                    crate::generate::value(&parameter["schema"], rng)
                }
            }
            None => continue,
        };
        let text = match &value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        match place {
            "path" => path = path.replace(&format!("{{{name}}}"), &encode(&text)),
            "query" => query.push(format!("{name}={}", encode(&text))),
            "header" => headers.push((name, text)),
            _ => {}
        }
        parameters.insert(name.to_owned(), value);
    }
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let body = body.or_else(|| {
        let request_body = spec().resolve(object.get("requestBody")?);
        (request_body["required"] == json!(true))
            .then(|| request_schema(operation))
            .flatten()
            .map(|schema| crate::generate::value(schema, rng))
    });
    let token = target.role(role_of(operation)).await?;
    let method = Method::from_bytes(operation.method.as_bytes())
        .map_err(|e| Finding::Error(format!("{}: {e}", operation.id)))?;
    let mut call = target.request(method, &path).bearer(&token);
    for (name, value) in &headers {
        call = call.header(name, value);
    }
    if let Some(body) = &body {
        call = call.json(body);
    }
    let reply = call.send().await?;
    let step = Step {
        name: operation.id.clone(),
        operation,
        parameters,
        body,
        reply,
    };
    Ok((step, generated))
}

/// The value of a link's runtime expression (`$response.body#/id`, `$request.path.sessionId`,
/// `$response.header.Location`...) in `step`; a constant stands for itself. The session and turn
/// of a chat answer are read where `chat` (`profile.chat`) says.
fn evaluate(expression: &Value, step: &Step, chat: &Chat) -> Option<Value> {
    let Some(text) = expression.as_str().filter(|text| text.starts_with('$')) else {
        return Some(expression.clone());
    };
    let (source, pointer) = match text.split_once('#') {
        Some((source, pointer)) => (source, Some(pointer)),
        None => (text, None),
    };
    let value = match source {
        "$response.body" => step.reply.body.clone(),
        "$request.body" => step.body.clone()?,
        _ => {
            if let Some(name) = source.strip_prefix("$response.header.") {
                json!(step.reply.headers.get(name)?.to_str().ok()?)
            } else {
                let name = ["$request.path.", "$request.query.", "$request.header."]
                    .iter()
                    .find_map(|prefix| source.strip_prefix(prefix))?;
                step.parameters.get(name)?.clone()
            }
        }
    };
    let pointer = match (step.operation.id.as_str(), source, pointer) {
        ("startChat", "$response.body", Some("/sessionId")) => Some(chat.session_id.as_str()),
        ("startChat", "$response.body", Some("/turnId")) => Some(chat.turn_id.as_str()),
        (_, _, pointer) => pointer,
    };
    match pointer {
        Some(pointer) => value.pointer(pointer).cloned(),
        None => Some(value),
    }
}

/// What is wrong with `step`'s answer: a server error, an undeclared status or a body its
/// schema refuses, and, for a link whose ids all came from the answer before (`promise`), a 404.
/// Everything about an operation of our profile is a profile finding.
fn judge(step: &Step, promise: Option<&Value>, broken: &mut Vec<(Level, String)>) {
    let reply = &step.reply;
    let profiled = spec().is_profile(&step.operation.reference);
    let at = |level: Level| if profiled { Level::Profile } else { level };
    let what = format!("{} answered {}", step.name, reply.status);
    // Any status may carry the envelope (part 7.2): a server error in it is the profile's to
    // avoid, one outside it breaks part 7.1.
    if reply.status >= 500 {
        let level = match reply.body.get("error") {
            Some(_) => Level::Profile,
            None => Level::Normative,
        };
        broken.push((at(level), format!("{what}, a server error")));
    }
    if let Some(judged) = spec().judge(
        step.operation,
        step.body.as_ref(),
        (reply.status, &reply.body, &reply.text),
    ) {
        let errors = judged.errors.join(", ");
        broken.push((at(judged.level), format!("{what}: {errors}")));
    }
    if let Some(link) = promise
        && reply.status == 404
    {
        let level = at(level_of(link));
        broken.push((
            level,
            format!("{what}: the id its link passed does not resolve"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;

    fn step(id: &str, status: u16, body: Value) -> Step {
        let operation = spec().operations().iter().find(|o| o.id == id).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("location", HeaderValue::from_static("/v1/x"));
        Step {
            name: id.to_owned(),
            operation,
            parameters: [("sessionId".to_owned(), json!("ses_1"))].into(),
            body: Some(json!({ "message": "hi" })),
            reply: Reply {
                status,
                headers,
                text: body.to_string(),
                body,
            },
        }
    }

    #[test]
    fn the_chains_start_where_no_other_operation_links_to() {
        let roots: Vec<&str> = roots().iter().map(|o| o.id.as_str()).collect();
        assert_eq!(roots, ["startChat", "evmBuild", "svmStage"]);
    }

    #[test]
    fn runtime_expressions_read_the_step_before() {
        let step = step("startChat", 202, json!({ "sessionId": "ses_2", "n": 1 }));
        let chat = Chat::default();
        let read = |expression: &str| evaluate(&json!(expression), &step, &chat);
        assert_eq!(read("$response.body#/sessionId"), Some(json!("ses_2")));
        assert_eq!(read("$response.body#/n"), Some(json!(1)));
        assert_eq!(read("$response.body#/missing"), None);
        assert_eq!(read("$request.path.sessionId"), Some(json!("ses_1")));
        assert_eq!(read("$request.body#/message"), Some(json!("hi")));
        assert_eq!(read("$response.header.location"), Some(json!("/v1/x")));
        assert_eq!(read("constant"), Some(json!("constant")));
    }

    #[test]
    fn a_link_whose_id_does_not_resolve_is_a_finding_at_the_links_level() {
        let link = &links(
            operation_of(&json!({"operationId": "getSession"})).unwrap(),
            200,
        )[0]
        .1;
        let missing = step(
            "updateSession",
            404,
            json!({"error": {"code": "not_found", "message": "no"}}),
        );
        let mut broken = Vec::new();
        judge(&missing, Some(link), &mut broken);
        assert_eq!(broken.len(), 1, "{broken:?}");
        assert_eq!(broken[0].0, Level::Profile);
        assert!(broken[0].1.ends_with("does not resolve"), "{broken:?}");
        // A 404 for an id the sequence generated is no broken promise.
        broken.clear();
        judge(&missing, None, &mut broken);
        assert!(broken.is_empty(), "{broken:?}");
        // A server error in the envelope is the profile's to avoid; one outside it breaks 7.1.
        let failed = step(
            "getSession",
            500,
            json!({"error": {"code": "internal", "message": "x"}}),
        );
        judge(&failed, None, &mut broken);
        assert_eq!(broken[0].0, Level::Profile, "{broken:?}");
        broken.clear();
        judge(&step("getSession", 500, json!("boom")), None, &mut broken);
        assert_eq!(broken[0].0, Level::Normative, "{broken:?}");
    }
}
