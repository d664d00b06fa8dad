//! Every request body and success response in openapi.json carries an example; every example
//! validates against its schema and round-trips unchanged through the `intent-models` types.

use intent_models::schema::Schemas;
use intent_tests::{openapi, operations, resolve};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One example: where it stands, its media type's schema, and its value.
struct Example {
    place: String,
    schema: &'static Value,
    value: &'static Value,
}

/// The examples of one media type object, from `example` and `examples`.
fn examples_of(place: String, media: &'static Value) -> Vec<Example> {
    let single = media.get("example").map(|value| (place.clone(), value));
    let named = media["examples"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, example)| (format!("{place} ({name})"), &example["value"]));
    single
        .into_iter()
        .chain(named)
        .map(|(place, value)| Example {
            place,
            schema: &media["schema"],
            value,
        })
        .collect()
}

/// Every JSON example of the document: request bodies, success responses, error responses, and
/// component schemas.
fn json_examples() -> Vec<Example> {
    let mut out = Vec::new();
    for (name, schema) in openapi()["components"]["schemas"].as_object().unwrap() {
        if let Some(value) = schema.get("example") {
            let reference = serde_json::json!({ "$ref": format!("#/components/schemas/{name}") });
            out.push(Example {
                place: format!("#/components/schemas/{name}"),
                schema: Box::leak(Box::new(reference)),
                value,
            });
        }
    }
    for (method, path, op) in operations() {
        if let Some(media) = op["requestBody"]["content"].get("application/json") {
            out.extend(examples_of(format!("{method} {path} request"), media));
        }
        for (status, response) in op["responses"].as_object().unwrap() {
            if let Some(media) = resolve(response)["content"].get("application/json") {
                out.extend(examples_of(format!("{method} {path} {status}"), media));
            }
        }
    }
    out
}

#[test]
fn every_request_body_and_success_response_has_an_example() {
    for (method, path, op) in operations() {
        let bodies = op["requestBody"]["content"]
            .as_object()
            .into_iter()
            .flatten();
        let successes = op["responses"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(status, _)| status.starts_with('2'))
            .flat_map(|(_, response)| response["content"].as_object().into_iter().flatten());
        for (media_type, media) in bodies.chain(successes) {
            let has_example = media.get("example").is_some()
                || media["examples"].as_object().is_some_and(|e| !e.is_empty());
            assert!(has_example, "{method} {path} {media_type}: no example");
        }
    }
}

/// The examples of every parameter, shared or an operation's own.
fn parameter_examples() -> Vec<Example> {
    let shared = openapi()["components"]["parameters"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, parameter)| (format!("#/components/parameters/{name}"), parameter));
    let own = operations().into_iter().flat_map(|(method, path, op)| {
        op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|parameter| parameter.get("$ref").is_none())
            .map(move |parameter| (format!("{method} {path} {}", parameter["name"]), parameter))
    });
    shared
        .chain(own)
        .flat_map(|(place, parameter)| examples_of(place, parameter))
        .collect()
}

#[test]
fn every_example_validates_against_its_schema() {
    let schemas = Schemas::from_openapi(openapi()).expect("components convert");
    let parameters = parameter_examples();
    assert!(
        parameters.len() >= 5,
        "only {} parameter examples found",
        parameters.len()
    );
    let mut examples = json_examples();
    examples.extend(parameters);
    assert!(
        examples.len() >= 40,
        "only {} examples found",
        examples.len()
    );
    let mut failures = Vec::new();
    for example in &examples {
        let validator = schemas.inline(example.schema).expect("schema compiles");
        for error in validator.errors(example.value) {
            failures.push(format!("{}: {error}", example.place));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn schemas_refuse_what_the_examples_must_not_contain() {
    // The validator must be able to fail: a Build with a simulation that has an extra field.
    let schemas = Schemas::from_openapi(openapi()).unwrap();
    let build = json_examples()
        .into_iter()
        .find(|e| e.place.contains("evm/build request (commit)"))
        .expect("an EVM commit example")
        .value
        .clone();
    let mut tampered = build.clone();
    tampered["simulation"]["extra"] = Value::Bool(true);
    let validator = schemas.component("PipelineBuild").unwrap();
    assert!(validator.errors(&build).is_empty());
    assert!(
        !validator.errors(&tampered).is_empty(),
        "extra simulation field accepted"
    );
}

fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

/// The JSON pointer of the first place where `left` and `right` differ, with both values.
fn first_difference(at: &str, left: &Value, right: &Value) -> Option<String> {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            let keys = l.keys().chain(r.keys().filter(|k| !l.contains_key(*k)));
            keys.into_iter().find_map(|key| {
                let (lv, rv) = (
                    l.get(key).unwrap_or(&Value::Null),
                    r.get(key).unwrap_or(&Value::Null),
                );
                if l.contains_key(key) != r.contains_key(key) {
                    return Some(format!("{at}/{key}: present on one side only"));
                }
                first_difference(&format!("{at}/{key}"), lv, rv)
            })
        }
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => l
            .iter()
            .zip(r)
            .enumerate()
            .find_map(|(i, (lv, rv))| first_difference(&format!("{at}/{i}"), lv, rv)),
        _ => (left != right).then(|| format!("{at}: {left} != {right}")),
    }
}

macro_rules! model_round_trip {
    ($($name:ident),* $(,)?) => {
        /// Decodes `value` as the model named `name` and encodes it again; `None` for a name
        /// that is no component schema.
        fn model_round_trip(name: &str, value: &Value) -> Option<Result<Value, String>> {
            match name {
                $(stringify!($name) => Some(round_trip::<intent_models::$name>(value)),)*
                _ => None,
            }
        }
    };
}

// Every component schema of openapi.json, listed by the build script (tests/build.rs).
include!(concat!(env!("OUT_DIR"), "/models.rs"));

#[test]
fn every_example_round_trips_through_the_models_unchanged() {
    let mut checked = 0;
    for example in json_examples() {
        let Some(reference) = example.schema.get("$ref").and_then(Value::as_str) else {
            continue; // an inline schema (a free-form skill input) has no model type
        };
        let name = reference.rsplit('/').next().unwrap();
        let result = model_round_trip(name, example.value)
            .unwrap_or_else(|| panic!("{}: {name} is no component schema", example.place));
        match result {
            Ok(encoded) => {
                if let Some(difference) = first_difference("", &encoded, example.value) {
                    panic!("{}: changed in a round trip at {difference}", example.place);
                }
            }
            Err(e) => panic!("{}: does not decode as {name}: {e}", example.place),
        }
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} examples round-tripped");
}
