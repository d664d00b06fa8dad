//! openapi.json as the suite reads it: its operations, the schema of each response, and which
//! elements rest on our reference profile.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::finding::Broke;
use intent_models::schema::{SchemaValidator, Schemas};

/// An answer [`Spec::judge`] finds wrong: the level it breaks, what is wrong, and how, for
/// fingerprints.
#[derive(Debug, Clone)]
pub struct Judged {
    /// Normative, or profile.
    pub level: Level,
    /// What is wrong, one line each, values quoted.
    pub errors: Vec<String>,
    /// How it broke, without values.
    pub broke: Vec<Broke>,
}

/// Whether every deployment must pass a check, or only one that follows our reference profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Rests only on what the interface document states.
    Normative,
    /// Rests on at least one element of openapi.json marked `x-profile: reference`.
    Profile,
}

impl Level {
    /// `normative` or `profile`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normative => "normative",
            Self::Profile => "profile",
        }
    }
}

/// The document this build of the suite checks against.
pub const OPENAPI: &str = include_str!("../../openapi.json");

/// One operation of the document.
#[derive(Debug)]
pub struct Operation {
    /// Upper-case HTTP method.
    pub method: String,
    /// The path template, such as `/v1/agent/sessions/{sessionId}`.
    pub template: String,
    /// Its `operationId`.
    pub id: String,
    /// `METHOD /path`, as a check's `rests_on` names it.
    pub reference: String,
    segments: Vec<String>,
}

impl Operation {
    fn matches(&self, method: &str, path: &str) -> bool {
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        self.method == method
            && segments.len() == self.segments.len()
            && self
                .segments
                .iter()
                .zip(&segments)
                .all(|(template, actual)| template.starts_with('{') || template == actual)
    }
}

/// The parsed document with its converted schemas, as written and in its normative view.
pub struct Spec {
    document: Value,
    schemas: Schemas,
    normative_document: Value,
    normative_schemas: Schemas,
    operations: Vec<Operation>,
    validators: Mutex<HashMap<String, Option<Arc<SchemaValidator>>>>,
}

/// Schema keywords that a parent's `x-profile-fills` can name; the normative view drops them.
const FILLABLE_KEYWORDS: [&str; 12] = [
    "required",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minProperties",
    "additionalProperties",
    "oneOf",
    "type",
    "enum",
    "pattern",
    "format",
];

/// `document` as every deployment must follow it: an element marked `x-profile: reference`
/// accepts anything (a schema becomes `{}`, an operation has no responses to hold to), and a
/// schema keyword that its object lists in `x-profile-fills` is gone.
fn normative_view(mut document: Value) -> Value {
    fn open(value: &mut Value) {
        match value {
            Value::Object(members) => {
                if members.get("x-profile").and_then(Value::as_str) == Some("reference") {
                    members.clear();
                    return;
                }
                let fills: Vec<String> = members
                    .get("x-profile-fills")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|fill| fill.as_str().map(str::to_owned))
                    .collect();
                for fill in fills {
                    if FILLABLE_KEYWORDS.contains(&fill.as_str()) {
                        members.remove(&fill);
                    }
                }
                members.values_mut().for_each(open);
            }
            Value::Array(items) => items.iter_mut().for_each(open),
            _ => {}
        }
    }
    open(&mut document);
    let view = document.clone();
    inclusive(&mut document, &view);
    document
}

/// Each `oneOf` of `document` with a branch that accepts anything (in `view`) made an `anyOf`:
/// a value that holds against another branch holds against that one too, so "one of" can only
/// mean "or" (part 4.1: "a portable chain-specific Build or a commit result").
fn inclusive(value: &mut Value, view: &Value) {
    match value {
        Value::Object(members) => {
            let open = members
                .get("oneOf")
                .and_then(Value::as_array)
                .is_some_and(|branches| {
                    branches.iter().any(|branch| {
                        resolve_in(view, branch)
                            .as_object()
                            .is_some_and(|b| b.is_empty())
                    })
                });
            if open && let Some(branches) = members.remove("oneOf") {
                members.insert("anyOf".into(), branches);
            }
            members
                .values_mut()
                .for_each(|member| inclusive(member, view));
        }
        Value::Array(items) => items.iter_mut().for_each(|item| inclusive(item, view)),
        _ => {}
    }
}

/// Whether a lifecycle request `body` presents a Build for commit: it is one, or holds one as a
/// member (`attestation` marks a Build, part 2.1).
fn presents_build(body: &Value) -> bool {
    let is_build = |value: &Value| value.get("attestation").is_some();
    is_build(body)
        || body
            .as_object()
            .is_some_and(|members| members.values().any(is_build))
}

/// The response `document` declares for `operation` and `status`, with its `$ref` followed; for
/// an error status it does not name, its `default` when `default` is given (part 7.2: any other
/// status falls to the error envelope).
fn declared<'a>(
    document: &'a Value,
    operation: &Operation,
    status: u16,
    default: bool,
) -> Option<&'a Value> {
    let responses = document
        .get("paths")?
        .get(&operation.template)?
        .get(operation.method.to_lowercase())?
        .get("responses")?;
    let response = responses.get(status.to_string()).or_else(|| {
        (default && status >= 400)
            .then(|| responses.get("default"))
            .flatten()
    })?;
    Some(resolve_in(document, response))
}

/// Follows a local `$ref` of `document` once.
fn resolve_in<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
    value
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|reference| document.pointer(reference.trim_start_matches('#')))
        .unwrap_or(value)
}

/// The bundled document, parsed once.
pub fn spec() -> &'static Spec {
    static SPEC: LazyLock<Spec> = LazyLock::new(|| {
        let document: Value = serde_json::from_str(OPENAPI).expect("openapi.json is JSON");
        Spec::new(document).expect("openapi.json has component schemas")
    });
    &SPEC
}

impl Spec {
    /// Reads `document`'s operations and converts its schemas.
    pub fn new(document: Value) -> Result<Self, intent_models::schema::Error> {
        let schemas = Schemas::from_openapi(&document)?;
        let mut operations = Vec::new();
        for (template, item) in document["paths"].as_object().into_iter().flatten() {
            for (method, object) in item.as_object().into_iter().flatten() {
                if ["get", "put", "post", "delete", "patch"].contains(&method.as_str()) {
                    operations.push(Operation {
                        reference: format!("{} {template}", method.to_uppercase()),
                        method: method.to_uppercase(),
                        template: template.clone(),
                        id: object["operationId"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        segments: template.split('/').map(str::to_owned).collect(),
                    });
                }
            }
        }
        let normative_document = normative_view(document.clone());
        let normative_schemas = Schemas::from_openapi(&normative_document)?;
        Ok(Self {
            document,
            schemas,
            normative_document,
            normative_schemas,
            operations,
            validators: Mutex::default(),
        })
    }

    /// The whole document.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// Every operation, in document order.
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// The operation a request for `method` and `path` (without query) is an instance of.
    pub fn operation(&self, method: &str, path: &str) -> Option<&Operation> {
        // A literal segment beats a parameter: `/apps/{id}` must not swallow `/apps/x/secrets`.
        self.operations
            .iter()
            .filter(|op| op.matches(method, path))
            .max_by_key(|op| op.segments.iter().filter(|s| !s.starts_with('{')).count())
    }

    /// The operation object of `method` and `template`.
    pub fn operation_object(&self, method: &str, template: &str) -> Option<&Value> {
        self.document
            .get("paths")?
            .get(template)?
            .get(method.to_lowercase())
    }

    /// A validator for a component schema.
    pub fn component(&self, name: &str) -> Option<Arc<SchemaValidator>> {
        self.cached(format!("#/components/schemas/{name}"), || {
            self.schemas.component(name).ok()
        })
    }

    /// The schema of `operation`'s JSON response for `status`: `Ok(None)` when that response has
    /// no JSON body, `Err` when the document does not declare the status at all.
    pub fn response(
        &self,
        operation: &Operation,
        status: u16,
    ) -> Result<Option<Arc<SchemaValidator>>, String> {
        let Some(response) = declared(&self.document, operation, status, false) else {
            return Err(format!(
                "{} {} does not declare status {status}",
                operation.method, operation.template
            ));
        };
        let key = format!("{} {} {status}", operation.method, operation.template);
        Ok(self.cached(key, || {
            let schema = response.pointer("/content/application~1json/schema")?;
            self.schemas.inline(schema).ok()
        }))
    }

    /// The schema every deployment's answer to `operation` with `status` must hold against:
    /// `None` when the interface leaves that answer open (an operation or schema of our profile,
    /// or a status the document declares only as a profile fill).
    pub fn normative_response(
        &self,
        operation: &Operation,
        status: u16,
    ) -> Option<Arc<SchemaValidator>> {
        let response = declared(&self.normative_document, operation, status, true)?;
        let key = format!(
            "normative {} {} {status}",
            operation.method, operation.template
        );
        self.cached(key, || {
            let schema = response.pointer("/content/application~1json/schema")?;
            self.normative_schemas.inline(schema).ok()
        })
    }

    /// What is wrong with `operation`'s answer `status` with `body` (`text` as received), at the
    /// level it breaks: normative when the normative view refuses it, else profile (a status
    /// only our profile declares, a body only our profile's schemas refuse). `None` when right.
    pub fn judge(
        &self,
        operation: &Operation,
        request: Option<&Value>,
        (status, body, text): (u16, &Value, &str),
    ) -> Option<Judged> {
        let at = Some(operation.id.as_str());
        let refused = |validator: &SchemaValidator| -> (Vec<String>, Vec<Broke>) {
            if body.is_null() {
                let not_json = "not a JSON body";
                let error = format!("{not_json}: {}", crate::finding::excerpt(text));
                return (vec![error], vec![Broke::assertion(not_json)]);
            }
            let errors = validator.errors(body);
            let errors = errors.iter().map(|e| crate::finding::excerpt(e)).collect();
            let violations = validator.violations(body);
            let broke = violations.iter().map(|v| Broke::schema(at, v)).collect();
            (errors, broke)
        };
        let judged = |level, (errors, broke): (Vec<String>, Vec<Broke>)| Judged {
            level,
            errors,
            broke,
        };
        match self.normative_answer(operation, request, status) {
            Some(validator) if !validator.is_valid(body) => {
                return Some(judged(Level::Normative, refused(&validator)));
            }
            _ => {}
        }
        match self.response(operation, status) {
            Err(undeclared) => {
                let broke = Broke::assertion(&undeclared);
                Some(judged(Level::Profile, (vec![undeclared], vec![broke])))
            }
            Ok(Some(validator)) if !validator.is_valid(body) => {
                Some(judged(Level::Profile, refused(&validator)))
            }
            Ok(_) => None,
        }
    }

    /// The schema every deployment's answer `status` to `operation`'s `request` must hold
    /// against: [`Self::normative_response`], but a lifecycle endpoint's success (its 200 is
    /// `PipelineLifecycleResponse`) answers a request that presents no Build with a Build (part
    /// 4.1: "200 PipelineBuild").
    pub fn normative_answer(
        &self,
        operation: &Operation,
        request: Option<&Value>,
        status: u16,
    ) -> Option<Arc<SchemaValidator>> {
        let lifecycle = declared(&self.document, operation, 200, false)
            .and_then(|response| response.pointer("/content/application~1json/schema/$ref"))
            == Some(&Value::from(
                "#/components/schemas/PipelineLifecycleResponse",
            ));
        if lifecycle && (200..300).contains(&status) && !request.is_some_and(presents_build) {
            return self.normative_component("PipelineBuild");
        }
        self.normative_response(operation, status)
    }

    /// A validator for a component schema in the normative view: what every deployment's
    /// instances must hold against.
    pub fn normative_component(&self, name: &str) -> Option<Arc<SchemaValidator>> {
        self.cached(format!("normative #/components/schemas/{name}"), || {
            self.normative_schemas.component(name).ok()
        })
    }

    /// A validator for the JSON request body of `operation`, when it takes one.
    pub fn request_body(&self, operation: &Operation) -> Option<Arc<SchemaValidator>> {
        self.request_schema("", &self.document, &self.schemas, operation)
    }

    /// The request body schema of `operation` in the normative view: what every deployment must
    /// accept of a client.
    pub fn normative_request_body(&self, operation: &Operation) -> Option<Arc<SchemaValidator>> {
        let (document, schemas) = (&self.normative_document, &self.normative_schemas);
        self.request_schema("normative ", document, schemas, operation)
    }

    /// The request body schema of `operation` in one view of the document (`document` and its
    /// converted `schemas`), cached under `view`.
    fn request_schema(
        &self,
        view: &str,
        document: &Value,
        schemas: &Schemas,
        operation: &Operation,
    ) -> Option<Arc<SchemaValidator>> {
        let key = format!("{view}{} {} body", operation.method, operation.template);
        self.cached(key, || {
            let object = document
                .get("paths")?
                .get(&operation.template)?
                .get(operation.method.to_lowercase())?;
            let schema = object.pointer("/requestBody/content/application~1json/schema")?;
            schemas.inline(schema).ok()
        })
    }

    /// A validator for the schema of `operation`'s path or query parameter `name`.
    pub fn parameter(&self, operation: &Operation, name: &str) -> Option<Arc<SchemaValidator>> {
        let key = format!(
            "{} {} parameter {name}",
            operation.method, operation.template
        );
        self.cached(key, || {
            let object = self.operation_object(&operation.method, &operation.template)?;
            let parameter = object["parameters"]
                .as_array()?
                .iter()
                .map(|parameter| self.resolve(parameter))
                .find(|parameter| parameter["name"] == name)?;
            self.schemas.inline(&parameter["schema"]).ok()
        })
    }

    /// A validator for an inline schema of the document, such as a parameter's.
    pub fn inline(&self, schema: &Value) -> Option<SchemaValidator> {
        self.schemas.inline(schema).ok()
    }

    fn cached(
        &self,
        key: String,
        make: impl FnOnce() -> Option<SchemaValidator>,
    ) -> Option<Arc<SchemaValidator>> {
        let mut validators = self.validators.lock().expect("validator cache");
        validators
            .entry(key)
            .or_insert_with(|| make().map(Arc::new))
            .clone()
    }

    /// Follows a local `$ref` once.
    pub fn resolve<'a>(&'a self, value: &'a Value) -> &'a Value {
        resolve_in(&self.document, value)
    }

    /// The element a check rests on: `METHOD /path` or a `#/...` pointer.
    pub fn element(&self, reference: &str) -> Option<&Value> {
        match reference.strip_prefix('#') {
            Some(pointer) => self.document.pointer(pointer),
            None => {
                let (method, template) = reference.split_once(' ')?;
                self.operation_object(method, template)
            }
        }
    }

    /// Whether the element `reference` is a choice of our profile: it carries
    /// `x-profile: reference`, or its parent lists it in `x-profile-fills`.
    pub fn is_profile(&self, reference: &str) -> bool {
        let marked = self
            .element(reference)
            .and_then(|element| element.get("x-profile"))
            .and_then(Value::as_str)
            == Some("reference");
        let filled = reference
            .strip_prefix('#')
            .and_then(|pointer| pointer.rsplit_once('/'))
            .and_then(|(parent, key)| {
                self.document
                    .pointer(parent)?
                    .get("x-profile-fills")?
                    .as_array()
                    .map(|fills| (key, fills))
            })
            .is_some_and(|(key, fills)| fills.iter().any(|fill| fill == key));
        marked || filled
    }

    /// `Profile` when any of `references` is a choice of our profile, else `Normative`.
    pub fn level(&self, references: &[&str]) -> Level {
        let profiled = references
            .iter()
            .any(|reference| self.is_profile(reference));
        if profiled {
            Level::Profile
        } else {
            Level::Normative
        }
    }

    /// The request examples of an operation that are not Builds (have no `digest`): its
    /// `example`, or the values of its `examples`.
    pub fn request_examples(&self, method: &str, template: &str) -> Vec<&Value> {
        let Some(content) = self
            .operation_object(method, template)
            .and_then(|object| object.pointer("/requestBody/content/application~1json"))
        else {
            return Vec::new();
        };
        let examples: Vec<&Value> = match content.get("example") {
            Some(example) => vec![example],
            None => content["examples"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(_, example)| self.resolve(example).get("value"))
                .collect(),
        };
        examples
            .into_iter()
            .filter(|value| value.get("digest").is_none())
            .collect()
    }

    /// The first request example of an operation that has the member `member` and is not a
    /// Build.
    pub fn request_example(&self, method: &str, template: &str, member: &str) -> Option<Value> {
        self.request_examples(method, template)
            .into_iter()
            .find(|value| value.get(member).is_some())
            .cloned()
    }
}
