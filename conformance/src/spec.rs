//! openapi.json as the suite reads it: its operations, the schema of each response, and which
//! elements rest on our reference profile.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::finding::Broke;
use intent_models::openapi::Document;
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

/// Its normative view (`spec/normative.json`, written by `cargo xtask codegen` by the rule of
/// `docs/profile.md`): what every deployment must do.
pub const NORMATIVE: &str = include_str!("../../spec/normative.json");

pub use intent_models::openapi::Operation;

/// The parsed document with its converted schemas, as written and in its normative view.
pub struct Spec {
    document: Document,
    schemas: Schemas,
    normative: Document,
    normative_schemas: Schemas,
    validators: Mutex<HashMap<String, Option<Arc<SchemaValidator>>>>,
}

/// Whether a lifecycle request `body` presents a Build for commit: it is one, or holds one at
/// any depth, as a `profile.commit` template may put it (`attestation` marks a Build, part 2.1).
pub(crate) fn presents_build(body: &Value) -> bool {
    match body {
        Value::Object(members) => {
            members.contains_key("attestation") || members.values().any(presents_build)
        }
        Value::Array(items) => items.iter().any(presents_build),
        _ => false,
    }
}

/// The bundled document and its normative view, parsed once.
pub fn spec() -> &'static Spec {
    static SPEC: LazyLock<Spec> = LazyLock::new(|| {
        let document = Document::parse(OPENAPI).expect("openapi.json is JSON");
        let normative = Document::parse(NORMATIVE).expect("spec/normative.json is JSON");
        Spec::new(document, normative).expect("openapi.json has component schemas")
    });
    &SPEC
}

impl Spec {
    /// Converts the schemas of `document` and of its normative view `normative`.
    pub fn new(
        document: Document,
        normative: Document,
    ) -> Result<Self, intent_models::schema::Error> {
        Ok(Self {
            schemas: Schemas::from_openapi(document.value())?,
            normative_schemas: Schemas::from_openapi(normative.value())?,
            document,
            normative,
            validators: Mutex::default(),
        })
    }

    /// The whole document.
    pub fn document(&self) -> &Value {
        self.document.value()
    }

    /// Every operation, in document order.
    pub fn operations(&self) -> &[Operation] {
        self.document.operations()
    }

    /// The operation a request for `method` and `path` (without query) is an instance of.
    pub fn operation(&self, method: &str, path: &str) -> Option<&Operation> {
        self.document.operation(method, path)
    }

    /// The operation object of `method` and `template`.
    pub fn operation_object(&self, method: &str, template: &str) -> Option<&Value> {
        Some(&self.document.by_template(method, template)?.object)
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
        let declared = operation
            .responses
            .iter()
            .find(|(declared, _)| *declared == status.to_string());
        let Some((_, response)) = declared else {
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
    /// or a status the normative view does not declare). A status stands by its own response,
    /// its range's (`2XX`, where the document gives no success status) or, for an error,
    /// `default`.
    pub fn normative_response(
        &self,
        operation: &Operation,
        status: u16,
    ) -> Option<Arc<SchemaValidator>> {
        let normative = self
            .normative
            .by_template(&operation.method, &operation.template)?;
        let key = format!(
            "normative {} {} {status}",
            operation.method, operation.template
        );
        self.cached(key, || {
            let schema = normative.response_schema(status)?;
            self.normative_schemas.inline(schema).ok()
        })
    }

    /// Whether the normative view declares `status` itself for `operation` (not by its class or
    /// `default`): 401 and 403 on the lifecycle endpoints (parts 5.5 and 7.2).
    pub fn normative_declares(&self, operation: &Operation, status: u16) -> bool {
        self.normative
            .by_template(&operation.method, &operation.template)
            .is_some_and(|normative| {
                let status = status.to_string();
                normative
                    .responses
                    .iter()
                    .any(|(declared, _)| *declared == status)
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
    /// against: [`Self::normative_response`], but where the success declares
    /// `x-answer-to-build-request` (the lifecycle endpoints, part 4.1: "200 PipelineBuild"), a
    /// success to a request that presents no Build holds against the schema it names.
    pub fn normative_answer(
        &self,
        operation: &Operation,
        request: Option<&Value>,
        status: u16,
    ) -> Option<Arc<SchemaValidator>> {
        let build_answer = self
            .normative
            .by_template(&operation.method, &operation.template)
            .and_then(|normative| normative.response(status))
            .and_then(|response| response["x-answer-to-build-request"].as_str())
            .and_then(|pointer| pointer.strip_prefix("#/components/schemas/"));
        match build_answer {
            Some(name) if (200..300).contains(&status) && !request.is_some_and(presents_build) => {
                self.normative_component(name)
            }
            _ => self.normative_response(operation, status),
        }
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
        let key = format!("{} {} body", operation.method, operation.template);
        self.cached(key, || self.schemas.inline(operation.body.as_ref()?).ok())
    }

    /// The request body schema of `operation` in the normative view: what every deployment must
    /// accept of a client.
    pub fn normative_request_body(&self, operation: &Operation) -> Option<Arc<SchemaValidator>> {
        let key = format!("normative {} {} body", operation.method, operation.template);
        self.cached(key, || {
            let normative = self
                .normative
                .by_template(&operation.method, &operation.template)?;
            self.normative_schemas.inline(normative.body.as_ref()?).ok()
        })
    }

    /// A validator for the schema of `operation`'s path or query parameter `name`.
    pub fn parameter(&self, operation: &Operation, name: &str) -> Option<Arc<SchemaValidator>> {
        let key = format!(
            "{} {} parameter {name}",
            operation.method, operation.template
        );
        self.cached(key, || {
            self.schemas.inline(&operation.parameter(name)?.schema).ok()
        })
    }

    /// A validator for the schema of `operation`'s parameter `name` in the normative view, and
    /// whether the view requires it; `None` where the view has no such parameter (one of our
    /// profile's, such as the cursor).
    pub fn normative_parameter(
        &self,
        operation: &Operation,
        name: &str,
    ) -> Option<(Option<Arc<SchemaValidator>>, bool)> {
        let normative = self
            .normative
            .by_template(&operation.method, &operation.template)?;
        let parameter = normative.parameter(name)?;
        let key = format!(
            "normative {} {} parameter {name}",
            operation.method, operation.template
        );
        let schema = self.cached(key, || {
            self.normative_schemas.inline(&parameter.schema).ok()
        });
        Some((schema, parameter.required))
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

    /// Follows local `$ref`s.
    pub fn resolve<'a>(&'a self, value: &'a Value) -> &'a Value {
        self.document.resolve(value)
    }

    /// The element a check rests on: `METHOD /path` or a `#/...` pointer.
    pub fn element(&self, reference: &str) -> Option<&Value> {
        match reference.strip_prefix('#') {
            Some(pointer) => self.document().pointer(pointer),
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
                self.document()
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
