//! The tools of one MCP resource, generated at start from the embedded openapi.json: one per
//! operation of its HTTP resource (but the SSE stream), named by the `operationId`. A call
//! becomes the HTTP request the operation describes.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, header};
use intent_models::openapi::{Document, Operation};
use intent_models::schema::{SchemaValidator, Schemas};
use rmcp::model::{JsonObject, Tool};
use serde_json::{Map, Value, json};

use super::portable::portable;

/// Where an operation takes a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Location {
    Path,
    Query,
    Header,
}

/// One tool and the operation behind it.
pub struct OperationTool {
    /// What `tools/list` shows.
    pub tool: Tool,
    /// The scope the operation requires.
    pub scope: String,
    method: Method,
    template: String,
    parameters: Vec<(String, Location)>,
    input: SchemaValidator,
}

/// The tools of one resource, in the document's order.
pub struct Tools(Vec<OperationTool>);

impl Tools {
    /// The tools of the operations of `document` (whose component `schemas` are given
    /// converted) whose `x-resource` is `resource` (`agent` or `pipeline`), but those answering
    /// `text/event-stream`.
    pub fn from_openapi(document: &Document, schemas: &Schemas, resource: &str) -> Self {
        let tools = document
            .operations()
            .iter()
            .filter(|op| op.resource.as_deref() == Some(resource) && !op.streams())
            .filter_map(|op| {
                let method = op.method.parse::<Method>().ok()?;
                Some(OperationTool::new(document, schemas, method, op))
            })
            .collect();
        Self(tools)
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&OperationTool> {
        self.0.iter().find(|tool| tool.tool.name == name)
    }

    /// Every tool.
    pub fn iter(&self) -> impl Iterator<Item = &OperationTool> {
        self.0.iter()
    }
}

impl OperationTool {
    /// The tool of `op`, sent as `method`. Its texts (the operation's summary, description and
    /// profile note, each parameter's description) are read from the objects as written.
    fn new(document: &Document, schemas: &Schemas, method: Method, op: &Operation) -> Self {
        assert!(!op.id.is_empty(), "every operation has an operationId");
        let object = &op.object;
        let descriptions = object["parameters"].as_array().into_iter().flatten();
        let descriptions =
            descriptions.map(|parameter| document.resolve(parameter)["description"].as_str());
        let mut properties = Map::new();
        let mut required = Vec::new();
        let mut parameters = Vec::new();
        for (parameter, description) in op.parameters.iter().zip(descriptions) {
            let location = match parameter.location.as_str() {
                "path" => Location::Path,
                "query" => Location::Query,
                "header" => Location::Header,
                _ => continue,
            };
            let mut schema = schemas.inlined(&parameter.schema);
            if let (Some(description), Value::Object(schema)) = (description, &mut schema) {
                schema.insert("description".into(), description.into());
            }
            if parameter.required {
                required.push(Value::String(parameter.name.clone()));
            }
            properties.insert(parameter.name.clone(), schema);
            parameters.push((parameter.name.clone(), location));
        }
        if let Some(body) = &op.body {
            properties.insert("body".into(), schemas.inlined(body));
            if object.pointer("/requestBody/required") == Some(&Value::Bool(true)) {
                required.push("body".into());
            }
        }
        let input = json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        });
        // Written for an agent (`x-mcp-description`); else the summary and the description, then
        // the reference profile's own sentences about the operation (`x-profile-note`).
        let description = match object["x-mcp-description"].as_str() {
            Some(written) => written.to_owned(),
            None => {
                let mut description = [object["summary"].as_str(), object["description"].as_str()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(". ");
                if let Some(note) = object["x-profile-note"].as_str() {
                    description.push(' ');
                    description.push_str(note);
                }
                description
            }
        };
        let advertised = json_object(portable(input.clone()));
        let mut tool = Tool::new(op.id.clone(), description, advertised);
        if let Some(output) = output_schema(schemas, op) {
            tool = tool.with_raw_output_schema(json_object(portable(output)));
        }
        Self {
            tool,
            scope: op.scopes.first().cloned().unwrap_or_default(),
            method,
            template: op.template.clone(),
            parameters,
            input: schemas
                .inline(&input)
                .expect("a tool's input schema compiles"),
        }
    }

    /// Where `arguments` first fail the input schema (never echoing a value), if they do.
    pub fn violation(&self, arguments: &Value) -> Option<String> {
        self.input.first_violation(arguments)
    }

    /// The HTTP request a call with `arguments` (valid against the input schema) stands for,
    /// or why a header parameter cannot be sent.
    pub fn request(&self, arguments: &JsonObject) -> Result<Request<Body>, String> {
        let mut path = self.template.clone();
        let mut query = Vec::new();
        let mut request = Request::builder().method(self.method.clone());
        for (name, location) in &self.parameters {
            let Some(value) = arguments.get(name) else {
                continue;
            };
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            match location {
                Location::Path => {
                    let encoded = percent_encode(&text);
                    path = path.replace(&format!("{{{name}}}"), &encoded);
                }
                Location::Query => query.push((name.clone(), text)),
                Location::Header => {
                    let value = HeaderValue::from_str(&text)
                        .map_err(|_| format!("`{name}` is not a valid header value"))?;
                    request = request.header(name.as_str(), value);
                }
            }
        }
        if !query.is_empty() {
            let encoded = serde_urlencoded::to_string(&query).expect("pairs of strings encode");
            path = format!("{path}?{encoded}");
        }
        let body = match arguments.get("body") {
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(body.to_string())
            }
            None => Body::empty(),
        };
        request
            .uri(path)
            .body(body)
            .map_err(|e| format!("the request cannot be built: {e}"))
    }
}

/// The schema of the first success response with a JSON body, as an object schema: MCP asks
/// an `outputSchema` for objects, so a `oneOf` of objects gains `type: object`.
fn output_schema(schemas: &Schemas, op: &Operation) -> Option<Value> {
    let schema = op
        .responses
        .iter()
        .filter(|(status, _)| status.starts_with('2'))
        .find_map(|(_, response)| response.pointer("/content/application~1json/schema"))?;
    let mut output = schemas.inlined(schema);
    let object = output.as_object_mut()?;
    match object.get("type") {
        Some(kind) if kind == "object" => {}
        None if object.contains_key("oneOf") => {
            object.insert("type".into(), "object".into());
        }
        _ => return None,
    }
    Some(output)
}

fn json_object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("tool schemas are built as objects"),
    }
}

/// A path segment with everything but unreserved characters percent-encoded.
pub(super) fn percent_encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn tools(resource: &str) -> Tools {
        Tools::from_openapi(
            crate::interface::document(),
            crate::interface::schemas(),
            resource,
        )
    }

    #[test]
    fn every_tool_schema_is_in_the_portable_spelling() {
        for resource in ["agent", "pipeline"] {
            for tool in tools(resource).iter() {
                let input = Value::Object((*tool.tool.input_schema).clone());
                let found = super::super::portable::unportable(&input);
                assert_eq!(found, None, "{}'s input", tool.tool.name);
                if let Some(output) = &tool.tool.output_schema {
                    let output = Value::Object((**output).clone());
                    let found = super::super::portable::unportable(&output);
                    assert_eq!(found, None, "{}'s output", tool.tool.name);
                }
            }
        }
    }

    #[test]
    fn every_agent_and_pipeline_operation_but_the_stream_is_a_tool_with_an_object_schema() {
        let agent = tools("agent");
        let pipeline = tools("pipeline");
        let names = |tools: &Tools| -> Vec<String> {
            tools.iter().map(|t| t.tool.name.to_string()).collect()
        };
        assert!(names(&agent).contains(&"startChat".to_owned()));
        assert!(!names(&agent).contains(&"streamChatEvents".to_owned()));
        assert!(names(&pipeline).contains(&"evmBuild".to_owned()));
        // Each resource's operations as openapi.json writes them, the streams left out.
        let written = |resource: &str| -> BTreeSet<String> {
            let document = crate::interface::document();
            intent_models::openapi::operation_objects(document.value())
                .map(|(_, _, op)| op)
                .filter(|op| op["x-resource"] == resource)
                .filter(|op| {
                    let responses = op["responses"].as_object().into_iter().flatten();
                    !responses
                        .map(|(_, response)| document.resolve(response))
                        .any(|response| response["content"].get("text/event-stream").is_some())
                })
                .filter_map(|op| op["operationId"].as_str().map(str::to_owned))
                .collect()
        };
        let set = |names: Vec<String>| names.into_iter().collect::<BTreeSet<_>>();
        assert_eq!(set(names(&agent)), written("agent"));
        assert_eq!(set(names(&pipeline)), written("pipeline"));
        for tool in agent.iter().chain(pipeline.iter()) {
            let schema = &tool.tool.input_schema;
            assert_eq!(schema["type"], "object", "{}", tool.tool.name);
            assert!(
                !Value::Object((**schema).clone())
                    .to_string()
                    .contains("$ref")
            );
        }
    }

    #[test]
    fn descriptions_speak_to_an_agent_not_to_a_reader_of_the_interface() {
        for tool in tools("agent").iter().chain(tools("pipeline").iter()) {
            let description = tool.tool.description.as_deref().unwrap_or_default();
            for written in ["part ", "parts ", "profile", "openapi.json"] {
                assert!(
                    !description.contains(written),
                    "{}'s description says {written:?}: give its operation an x-mcp-description",
                    tool.tool.name
                );
            }
        }
    }

    #[test]
    fn a_call_becomes_the_operations_request() {
        let tools = tools("agent");
        let page = tools.get("getChatEvents").unwrap();
        let arguments = json!({ "sessionId": "ses 1/x", "cursor": "c&d", "wait": 0 });
        assert_eq!(page.violation(&arguments), None);
        let request = page.request(arguments.as_object().unwrap()).unwrap();
        assert_eq!(request.method(), Method::GET);
        assert_eq!(
            request.uri(),
            "/v1/agent/chat/ses%201%2Fx?cursor=c%26d&wait=0"
        );
        let resolve = tools.get("resolveAction").unwrap();
        let missing = resolve.violation(&json!({ "sessionId": "s", "actionId": "a" }));
        assert!(missing.is_some_and(|m| m.contains("Idempotency-Key") || m.contains("body")));
        assert!(page.violation(&json!({ "sessionId": 7 })).is_some());
        let broken = json!({ "sessionId": "s", "actionId": "a", "Idempotency-Key": "k\r\nx",
                             "body": { "revision": 1 } });
        assert!(resolve.request(broken.as_object().unwrap()).is_err());
        assert!(
            page.violation(&json!({ "sessionId": "s", "extra": 1 }))
                .is_some()
        );
    }
}
