//! openapi.json read once: its operations with their parameters, bodies and responses (every
//! `$ref` followed), a request's operation by path matching, and the normative view
//! ([`normative`]), by the rule `docs/profile.md` states.

use serde_json::{Map, Value, json};

/// The HTTP methods an OpenAPI Path Item Object can hold, lower-case.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// A parsed OpenAPI document and its operations, in document order.
#[derive(Debug, Clone)]
pub struct Document {
    value: Value,
    operations: Vec<Operation>,
}

/// One operation, read from its Operation Object.
#[derive(Debug, Clone)]
pub struct Operation {
    /// Upper-case HTTP method.
    pub method: String,
    /// The path template, such as `/v1/agent/sessions/{sessionId}`.
    pub template: String,
    /// Its `operationId` (empty when it has none).
    pub id: String,
    /// `METHOD /path`, as a check names the operation it rests on.
    pub reference: String,
    /// The resource whose token it needs (`x-resource`), when named.
    pub resource: Option<String>,
    /// The OAuth scopes of its first `security` requirement.
    pub scopes: Vec<String>,
    /// Its parameters, each `$ref` followed.
    pub parameters: Vec<Parameter>,
    /// The schema of its JSON request body, when it takes one.
    pub body: Option<Value>,
    /// Its responses by status (`200`, `2XX`, `default`), each `$ref` followed.
    pub responses: Vec<(String, Value)>,
    /// Whether the whole operation is our profile's (`x-profile: reference`).
    pub profile: bool,
    /// The Operation Object as written.
    pub object: Value,
    segments: Vec<String>,
}

/// One parameter of an operation.
#[derive(Debug, Clone)]
pub struct Parameter {
    /// Its name.
    pub name: String,
    /// Where it goes: `path`, `query` or `header`.
    pub location: String,
    /// Whether a request must carry it.
    pub required: bool,
    /// Its schema (`{}` when it gives none).
    pub schema: Value,
    /// Whether it is our profile's (`x-profile: reference`).
    pub profile: bool,
}

impl Document {
    /// Reads the operations of `value`, an OpenAPI 3.0 document.
    pub fn new(value: Value) -> Self {
        let operations = operation_objects(&value)
            .map(|(template, method, object)| Operation::read(&value, method, template, object))
            .collect();
        Self { value, operations }
    }

    /// Parses `text` as JSON and reads it.
    pub fn parse(text: &str) -> serde_json::Result<Self> {
        serde_json::from_str(text).map(Self::new)
    }

    /// The whole document.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// Every operation, in document order.
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// The operation called `id`.
    pub fn by_id(&self, id: &str) -> Option<&Operation> {
        self.operations.iter().find(|op| op.id == id)
    }

    /// The operation of `method` (any case) and `template`.
    pub fn by_template(&self, method: &str, template: &str) -> Option<&Operation> {
        self.operations
            .iter()
            .find(|op| op.method.eq_ignore_ascii_case(method) && op.template == template)
    }

    /// The operation a request for `method` and `path` (without query) is an instance of. A
    /// literal segment beats a parameter: `/apps/{id}` does not swallow `/apps/x/secrets`.
    pub fn operation(&self, method: &str, path: &str) -> Option<&Operation> {
        self.operations
            .iter()
            .filter(|op| op.matches(method, path))
            .max_by_key(|op| op.segments.iter().filter(|s| !is_parameter(s)).count())
    }

    /// `value` with its local `$ref`s followed until it is none.
    pub fn resolve<'a>(&'a self, value: &'a Value) -> &'a Value {
        resolve(&self.value, value)
    }

    /// The component schema called `name`.
    pub fn schema(&self, name: &str) -> Option<&Value> {
        self.value.get("components")?.get("schemas")?.get(name)
    }
}

impl Operation {
    fn read(document: &Value, method: &str, template: &str, object: &Value) -> Self {
        let parameters = object["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|parameter| {
                let parameter = resolve(document, parameter);
                Parameter {
                    name: text(&parameter["name"]),
                    location: text(&parameter["in"]),
                    required: parameter["required"] == true,
                    schema: parameter
                        .get("schema")
                        .cloned()
                        .unwrap_or_else(|| Value::Object(Map::new())),
                    profile: is_marked(parameter),
                }
            })
            .collect();
        let responses = statuses(&object["responses"])
            .map(|(status, response)| (status.clone(), resolve(document, response).clone()))
            .collect();
        let scopes = object["security"][0]["oauth2"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        Self {
            method: method.to_uppercase(),
            template: template.to_owned(),
            id: text(&object["operationId"]),
            reference: format!("{} {template}", method.to_uppercase()),
            resource: object["x-resource"].as_str().map(str::to_owned),
            scopes,
            parameters,
            body: object
                .pointer("/requestBody/content/application~1json/schema")
                .cloned(),
            responses,
            profile: is_marked(object),
            object: object.clone(),
            segments: template.split('/').map(str::to_owned).collect(),
        }
    }

    /// The path's segments, `None` where a parameter stands (`/a/{id}` is `"", "a", None`).
    pub fn segments(&self) -> impl Iterator<Item = Option<&str>> {
        self.segments
            .iter()
            .map(|s| (!is_parameter(s)).then_some(s.as_str()))
    }

    /// Whether a request for `method` (any case) and `path` is an instance of this operation.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        self.method.eq_ignore_ascii_case(method)
            && segments.len() == self.segments.len()
            && self
                .segments
                .iter()
                .zip(&segments)
                .all(|(template, actual)| is_parameter(template) || template == actual)
    }

    /// The response declared for `status`: its own, else its range's (`2XX`), else for an
    /// error status `default` (part 7.2: any other status falls to the error envelope).
    pub fn response(&self, status: u16) -> Option<&Value> {
        let exact = status.to_string();
        let range = format!("{}XX", status / 100);
        let find = |key: &str| {
            self.responses
                .iter()
                .find(|(declared, _)| declared == key)
                .map(|(_, response)| response)
        };
        find(&exact)
            .or_else(|| find(&range))
            .or_else(|| (status >= 400).then(|| find("default")).flatten())
    }

    /// The schema of the JSON body of the response for `status` ([`Self::response`]).
    pub fn response_schema(&self, status: u16) -> Option<&Value> {
        self.response(status)?
            .pointer("/content/application~1json/schema")
    }

    /// Whether its success answers `text/event-stream`.
    pub fn streams(&self) -> bool {
        self.responses.iter().any(|(status, response)| {
            status.starts_with('2') && response.pointer("/content/text~1event-stream").is_some()
        })
    }

    /// Its parameter `name`.
    pub fn parameter(&self, name: &str) -> Option<&Parameter> {
        self.parameters.iter().find(|p| p.name == name)
    }
}

/// Every Operation Object of `document` as `(template, lower-case method, object)`, in document
/// order.
pub fn operation_objects(document: &Value) -> impl Iterator<Item = (&str, &str, &Value)> {
    let items = document["paths"].as_object().into_iter().flatten();
    items.flat_map(|(template, item)| {
        let members = item.as_object().into_iter().flatten();
        members
            .filter(|(method, _)| METHODS.contains(&method.as_str()))
            .map(move |(method, object)| (template.as_str(), method.as_str(), object))
    })
}

/// Every Operation Object of `document`, to change.
pub fn operation_objects_mut(document: &mut Value) -> impl Iterator<Item = &mut Value> {
    let items = document.get_mut("paths").and_then(Value::as_object_mut);
    items.into_iter().flat_map(|items| {
        items
            .values_mut()
            .filter_map(Value::as_object_mut)
            .flat_map(|item| item.iter_mut())
            .filter(|(method, _)| METHODS.contains(&method.as_str()))
            .map(|(_, object)| object)
    })
}

/// The responses of a Responses Object by status (`200`, `2XX`, `default`), its extensions
/// left out.
pub fn statuses(responses: &Value) -> impl Iterator<Item = (&String, &Value)> {
    responses.as_object().into_iter().flat_map(statuses_in)
}

/// The members of a Responses Object's `members` that are statuses, not extensions.
fn statuses_in(members: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    members
        .iter()
        .filter(|(status, _)| !status.starts_with("x-"))
}

fn is_parameter(segment: &str) -> bool {
    segment.starts_with('{') && segment.ends_with('}')
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// The element of `document` that the local `$ref` `reference` (`#/...`) names.
pub fn target<'a>(document: &'a Value, reference: &str) -> Option<&'a Value> {
    document.pointer(reference.strip_prefix('#')?)
}

/// `value` with its local `$ref`s into `document` followed until it is none (a `$ref` that
/// names nothing is left as it stands).
pub fn resolve<'a>(document: &'a Value, mut value: &'a Value) -> &'a Value {
    // A cycle of references is bounded by the document's size.
    for _ in 0..64 {
        match value
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|reference| target(document, reference))
        {
            Some(target) => value = target,
            None => break,
        }
    }
    value
}

/// The element at the JSON pointer `at` (`#/...`) of `document` with its `$ref`s followed, and
/// the pointer it was found at (`Value::Null` where nothing is).
pub fn resolve_at(document: &Value, at: &str) -> (String, Value) {
    let mut at = at.to_owned();
    for _ in 0..64 {
        let element = target(document, &at);
        match element
            .and_then(|element| element.get("$ref"))
            .and_then(Value::as_str)
        {
            Some(reference) => at = reference.to_owned(),
            None => return (at, element.cloned().unwrap_or(Value::Null)),
        }
    }
    (at, Value::Null)
}

/// Whether `value` carries `x-profile: reference`.
pub fn is_marked(value: &Value) -> bool {
    value.get("x-profile").and_then(Value::as_str) == Some("reference")
}

/// The keywords that `value`'s `x-profile-fills` lists.
pub fn fills(value: &Value) -> Vec<&str> {
    value.as_object().into_iter().flat_map(listed).collect()
}

/// The keywords that the `x-profile-fills` of an object's `members` lists.
fn listed(members: &Map<String, Value>) -> impl Iterator<Item = &str> {
    let fills = members.get("x-profile-fills").and_then(Value::as_array);
    fills.into_iter().flatten().filter_map(Value::as_str)
}
/// Keywords OAS 3.0.3 requires of the object that holds them: a fill of one of them stays in
/// the normative view, still listed in its `x-profile-fills`, as the one mark left there.
const REQUIRED_KEYWORDS: [&str; 3] = ["default", "authorizationUrl", "tokenUrl"];

/// `document` as every deployment must follow it, by the rule of `docs/profile.md`:
/// - an element marked `x-profile: reference` is gone: an operation (with its path when it was
///   the path's last), a parameter, response or other component (with every `$ref` to it), a
///   property (with its `required` entry), any other member; a component schema, or a branch
///   of a `oneOf` or `anyOf`, accepts anything instead (`{}`);
/// - a keyword its object lists in `x-profile-fills` is gone, but for one OAS requires
///   ([`REQUIRED_KEYWORDS`]); a response that lists `status` there (its key) stands as its
///   class (`200` as `2XX`: any success);
/// - a success response marked `x-profile: reference`, where no other success stays, leaves
///   `2XX` with its description and no content: the operation succeeds, with a body not shown;
/// - a `oneOf` with a branch that accepts anything is an `anyOf` (a value that holds against
///   another branch holds against that one too, so "one of" can only mean "or");
/// - no `x-profile`, `x-profile-note` or `x-profile-fills` is left but the marks of kept fills.
pub fn normative(document: &Value) -> Value {
    let mut view = document.clone();
    if let Some(schemas) = view
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for schema in schemas.values_mut().filter(|schema| is_marked(schema)) {
            *schema = Value::Object(Map::new());
        }
    }
    let removed = removed_components(document);
    prune(&mut view, &removed, Place::Other);
    let snapshot = view.clone();
    inclusive(&mut view, &snapshot);
    if let Some(paths) = view.get_mut("paths").and_then(Value::as_object_mut) {
        paths.retain(|_, item| {
            item.as_object()
                .is_some_and(|item| item.keys().any(|key| METHODS.contains(&key.as_str())))
        });
    }
    view
}

/// The `$ref` targets of the components other than schemas (parameters, responses, headers,
/// ...) marked `x-profile: reference`: a reference to one goes with it.
fn removed_components(document: &Value) -> Vec<String> {
    let mut removed = Vec::new();
    for (kind, members) in document["components"].as_object().into_iter().flatten() {
        for (name, member) in members.as_object().into_iter().flatten() {
            if kind != "schemas" && is_marked(member) {
                removed.push(format!("#/components/{kind}/{name}"));
            }
        }
    }
    removed
}

/// Where a value stands, for what a mark in it removes.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// A Responses Object: a response that fills its `status` stands as its class.
    Responses,
    /// The branches of a `oneOf` or `anyOf`: a marked one accepts anything.
    Branches,
    /// Anywhere else.
    Other,
}

/// Whether `value` leaves the view where it stands: it is marked, or refers to what is.
fn goes(value: &Value, removed: &[String]) -> bool {
    let referred = value
        .get("$ref")
        .and_then(Value::as_str)
        .is_some_and(|target| removed.iter().any(|r| r == target));
    is_marked(value) || referred
}

fn prune(value: &mut Value, removed: &[String], place: Place) {
    match value {
        Value::Array(items) if place == Place::Branches => {
            for item in items.iter_mut() {
                if is_marked(item) {
                    *item = Value::Object(Map::new());
                } else {
                    prune(item, removed, Place::Other);
                }
            }
        }
        Value::Array(items) => {
            items.retain(|item| !goes(item, removed));
            for item in items.iter_mut() {
                prune(item, removed, Place::Other);
            }
        }
        Value::Object(members) => {
            let filled: Vec<String> = listed(members).map(str::to_owned).collect();
            if place == Place::Responses {
                // A response that fills `status`: the document gives no status of its class.
                let filled_statuses: Vec<String> = statuses_in(members)
                    .filter(|(_, response)| fills(response).contains(&"status"))
                    .map(|(status, _)| status.clone())
                    .collect();
                for status in filled_statuses {
                    if let Some(response) = members.remove(&status) {
                        let class = status.chars().next().unwrap_or('2');
                        members.insert(format!("{class}XX"), response);
                    }
                }
                // A success the profile marks whole: the operation still succeeds, so its class
                // stays, without content, or `default` (the error envelope) would cover it.
                let success = |status: &str| status.starts_with('2');
                let kept = statuses_in(members).any(|(status, r)| success(status) && !is_marked(r));
                let marked = statuses_in(members)
                    .find(|(status, r)| success(status) && is_marked(r))
                    .map(|(_, r)| r["description"].as_str().unwrap_or("Success").to_owned());
                if let (Some(description), false) = (marked, kept) {
                    members.retain(|status, r| !(success(status) && is_marked(r)));
                    members.insert("2XX".into(), json!({ "description": description }));
                }
            }
            let mut kept = Vec::new();
            for fill in filled {
                if REQUIRED_KEYWORDS.contains(&fill.as_str()) {
                    if members.contains_key(&fill) {
                        kept.push(Value::String(fill));
                    }
                } else {
                    members.remove(&fill);
                }
            }
            for mark in ["x-profile", "x-profile-fills", "x-profile-note"] {
                members.remove(mark);
            }
            if !kept.is_empty() {
                members.insert("x-profile-fills".into(), Value::Array(kept));
            }
            let mut dropped = Vec::new();
            if let Some(properties) = members.get_mut("properties").and_then(Value::as_object_mut) {
                properties.retain(|name, property| {
                    let stays = !is_marked(property);
                    if !stays {
                        dropped.push(Value::String(name.clone()));
                    }
                    stays
                });
            }
            if let Some(required) = members.get_mut("required").and_then(Value::as_array_mut) {
                required.retain(|name| !dropped.contains(name));
            }
            members.retain(|_, member| !goes(member, removed));
            for (key, member) in members.iter_mut() {
                let place = match key.as_str() {
                    "responses" => Place::Responses,
                    "oneOf" | "anyOf" => Place::Branches,
                    _ => Place::Other,
                };
                prune(member, removed, place);
            }
        }
        _ => {}
    }
}

/// Each `oneOf` of `value` with a branch that accepts anything (in `view`) made an `anyOf`.
fn inclusive(value: &mut Value, view: &Value) {
    match value {
        Value::Object(members) => {
            let open = members
                .get("oneOf")
                .and_then(Value::as_array)
                .is_some_and(|branches| {
                    branches.iter().any(|branch| {
                        resolve(view, branch)
                            .as_object()
                            .is_some_and(|b| b.keys().all(|k| k == "description"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document() -> Value {
        json!({
            "openapi": "3.0.3",
            "servers": [{ "url": "{base}", "variables": { "base": {
                "default": "http://127.0.0.1", "x-profile-fills": ["default"] } } }],
            "paths": {
                "/a/{id}": {
                    "get": {
                        "operationId": "getA",
                        "x-resource": "agent",
                        "security": [{ "oauth2": ["agent:read"] }],
                        "parameters": [
                            { "$ref": "#/components/parameters/Id" },
                            { "$ref": "#/components/parameters/Cursor" }
                        ],
                        "x-profile-fills": ["x-resource"],
                        "responses": {
                            "200": { "description": "ok", "content": { "application/json": {
                                "schema": { "$ref": "#/components/schemas/Answer" } } },
                                "x-profile-fills": ["status"] },
                            "404": { "$ref": "#/components/responses/NotFound" },
                            "default": { "description": "error" }
                        }
                    }
                },
                "/a/{id}/b": {
                    "post": { "operationId": "postB", "x-profile": "reference",
                              "responses": { "200": { "description": "ok" } } }
                }
            },
            "components": {
                "parameters": {
                    "Id": { "name": "id", "in": "path", "required": true,
                            "schema": { "type": "string" } },
                    "Cursor": { "name": "cursor", "in": "query", "x-profile": "reference" }
                },
                "responses": { "NotFound": { "description": "nf", "x-profile": "reference" } },
                "schemas": {
                    "Answer": {
                        "type": "object",
                        "required": ["a", "ours"],
                        "x-profile-fills": ["required"],
                        "properties": {
                            "a": { "oneOf": [{ "type": "string" }, { "$ref": "#/components/schemas/Ours" }] },
                            "ours": { "type": "integer", "x-profile": "reference" }
                        }
                    },
                    "Ours": { "type": "object", "x-profile": "reference" }
                }
            }
        })
    }

    #[test]
    fn reads_operations_with_references_followed_and_matches_paths() {
        let document = Document::new(document());
        let get = document.operation("GET", "/a/7").expect("matches /a/{id}");
        assert_eq!(
            (get.id.as_str(), get.resource.as_deref()),
            ("getA", Some("agent"))
        );
        assert_eq!(get.scopes, ["agent:read"]);
        let names: Vec<_> = get
            .parameters
            .iter()
            .map(|p| (p.name.as_str(), p.profile))
            .collect();
        assert_eq!(names, [("id", false), ("cursor", true)]);
        assert_eq!(get.response(404).unwrap()["description"], "nf");
        assert_eq!(get.response(500).unwrap()["description"], "error");
        assert!(get.response(201).is_none());
        assert!(document.operation("GET", "/a/7/b").is_none());
        assert!(document.operation("POST", "/a/7/b").unwrap().profile);
    }

    #[test]
    fn the_normative_view_leaves_out_what_is_marked_and_keeps_what_oas_requires() {
        let view = normative(&document());
        assert!(
            view["paths"].get("/a/{id}/b").is_none(),
            "a marked operation goes"
        );
        let get = &view["paths"]["/a/{id}"]["get"];
        assert_eq!(
            get["parameters"],
            json!([{ "$ref": "#/components/parameters/Id" }])
        );
        assert!(get.get("x-resource").is_none() && get.get("x-profile-fills").is_none());
        let responses = get["responses"].as_object().unwrap();
        let statuses: Vec<&str> = responses.keys().map(String::as_str).collect();
        assert_eq!(statuses, ["2XX", "default"], "a filled status is its range");
        let answer = &view["components"]["schemas"]["Answer"];
        assert_eq!(answer["properties"].as_object().unwrap().len(), 1);
        assert!(answer.get("required").is_none(), "a filled keyword goes");
        assert_eq!(view["components"]["schemas"]["Ours"], json!({}));
        assert!(
            answer["properties"]["a"].get("anyOf").is_some(),
            "an open branch makes an anyOf"
        );
        let variable = &view["servers"][0]["variables"]["base"];
        assert_eq!(variable["default"], "http://127.0.0.1");
        assert_eq!(variable["x-profile-fills"], json!(["default"]));
        assert!(!view.to_string().contains("\"x-profile\""));
    }
}
