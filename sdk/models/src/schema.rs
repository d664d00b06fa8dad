//! JSON Schema validation of bodies against the schemas of an OpenAPI 3.0 document.
//!
//! OpenAPI 3.0 schemas are not JSON Schema: `nullable` widens a type to admit `null`, `$ref`
//! points into `#/components/schemas`, and vendor extensions sit beside the keywords. [`Schemas`]
//! converts each schema to JSON Schema 2020-12 (component schemas become `$defs`) and compiles
//! validators with the `jsonschema` crate.

use std::sync::Arc;

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;
use serde_json::{Map, Value, json};

/// Why a document or a schema could not be turned into a validator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The document has no `components.schemas` object.
    #[error("the document has no components.schemas object")]
    NoComponents,
    /// The named component schema does not exist.
    #[error("no component schema named {name}")]
    UnknownSchema {
        /// The name that was asked for.
        name: String,
    },
    /// The converted schema does not compile.
    #[error("schema does not compile: {message}")]
    Compile {
        /// What the compiler said.
        message: String,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The component schemas of one OpenAPI 3.0 document, converted to JSON Schema.
#[derive(Debug, Clone)]
pub struct Schemas {
    defs: Arc<Map<String, Value>>,
}

/// A compiled validator for one schema.
pub struct SchemaValidator {
    inner: jsonschema::Validator,
    /// The schema as compiled, without its `$defs`, and the component schemas: where the
    /// branches of a `oneOf` or `anyOf` that an error names are read.
    root: Value,
    defs: Arc<Map<String, Value>>,
}

impl Schemas {
    /// Converts every schema of `document`'s `components.schemas`.
    pub fn from_openapi(document: &Value) -> Result<Self> {
        let components = document
            .pointer("/components/schemas")
            .and_then(Value::as_object)
            .ok_or(Error::NoComponents)?;
        let defs = components
            .iter()
            .map(|(name, schema)| (name.clone(), convert(schema)))
            .collect();
        Ok(Self {
            defs: Arc::new(defs),
        })
    }

    /// A validator for the component schema called `name`.
    pub fn component(&self, name: &str) -> Result<SchemaValidator> {
        if !self.defs.contains_key(name) {
            return Err(Error::UnknownSchema {
                name: name.to_owned(),
            });
        }
        self.compile(json!({ "$ref": format!("#/$defs/{name}") }))
    }

    /// A validator for an inline OpenAPI schema (a request body or response schema), whose
    /// `$ref`s resolve against the component schemas.
    pub fn inline(&self, schema: &Value) -> Result<SchemaValidator> {
        self.compile(convert(schema))
    }

    /// The converted JSON Schema of the component called `name`.
    pub fn converted(&self, name: &str) -> Option<&Value> {
        self.defs.get(name)
    }

    /// An OpenAPI schema as self-contained JSON Schema: converted like [`Schemas::inline`], with
    /// every `$ref` replaced by the schema it names (for readers that do not follow `$ref`s),
    /// titled with the component's name unless it has a title. A reference nested deeper than
    /// 32 levels is left as it is.
    pub fn inlined(&self, schema: &Value) -> Value {
        self.expand(convert(schema), 32)
    }

    fn expand(&self, value: Value, depth: u32) -> Value {
        match value {
            Value::Object(map) => {
                let named = map
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|reference| reference.strip_prefix("#/$defs/"))
                    .and_then(|name| Some((name, self.defs.get(name)?)));
                match named {
                    Some((name, def)) if depth > 0 => {
                        let mut expanded = self.expand(def.clone(), depth - 1);
                        // Keywords beside the reference apply too.
                        if let Value::Object(target) = &mut expanded {
                            target
                                .entry("title")
                                .or_insert_with(|| Value::String(name.to_owned()));
                            for (key, value) in map.into_iter().filter(|(k, _)| k != "$ref") {
                                target.insert(key, self.expand(value, depth - 1));
                            }
                        }
                        expanded
                    }
                    _ => Value::Object(
                        map.into_iter()
                            .map(|(key, value)| (key, self.expand(value, depth)))
                            .collect(),
                    ),
                }
            }
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|value| self.expand(value, depth))
                    .collect(),
            ),
            other => other,
        }
    }

    fn compile(&self, root: Value) -> Result<SchemaValidator> {
        let mut root = match root {
            Value::Object(map) => map,
            other => Map::from_iter([("allOf".to_owned(), json!([other]))]),
        };
        root.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        let mut compiled = root.clone();
        compiled.insert("$defs".into(), Value::Object((*self.defs).clone()));
        let inner =
            jsonschema::draft202012::new(&Value::Object(compiled)).map_err(|e| Error::Compile {
                message: e.to_string(),
            })?;
        Ok(SchemaValidator {
            inner,
            root: Value::Object(root),
            defs: self.defs.clone(),
        })
    }
}

impl SchemaValidator {
    /// Every way `instance` fails the schema, each as `path: message`; empty when it holds. Of
    /// a `oneOf` or `anyOf` that no branch holds, the errors of the closest branch (the one meant:
    /// the one whose required properties the instance has the largest share of, then the one
    /// with the fewest errors) stand for it, so that a message names the member that broke
    /// rather than echoing the whole instance.
    pub fn errors(&self, instance: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        for error in self.inner.iter_errors(instance) {
            let mut leaves = Vec::new();
            self.meant(&error, &mut leaves);
            errors.extend(
                leaves
                    .into_iter()
                    .map(|leaf| format!("{}: {leaf}", pointer(leaf))),
            );
        }
        errors
    }

    /// Where `instance` first fails the schema, told without echoing any value, which may be a
    /// secret: the JSON pointer of the failing member and the keyword it breaks, with the names
    /// of missing or unexpected properties. Of a `oneOf` or `anyOf` that no branch holds, the
    /// shapes it may take are named and the closest one (see [`SchemaValidator::errors`]) tells
    /// why. `None` when it holds.
    pub fn first_violation(&self, instance: &Value) -> Option<String> {
        self.inner
            .iter_errors(instance)
            .next()
            .map(|e| self.describe(&e))
    }

    /// Every way `instance` fails the schema, told without echoing any value: the JSON pointer
    /// of each failing member (of a missing one, for `required`) and the keyword it breaks. Of a
    /// `oneOf` or `anyOf` that no branch holds, the violations of the closest branch stand for
    /// it. Empty when it holds.
    pub fn violations(&self, instance: &Value) -> Vec<Violation> {
        let mut out = Vec::new();
        for error in self.inner.iter_errors(instance) {
            let mut leaves = Vec::new();
            self.meant(&error, &mut leaves);
            out.extend(leaves.into_iter().map(violation));
        }
        out
    }

    /// Whether `instance` holds against the schema.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.inner.is_valid(instance)
    }

    /// The errors that stand for `error`: itself, or for a `oneOf` or `anyOf` that no branch
    /// holds, those of the closest branch, at any depth.
    fn meant<'e, 'a>(
        &self,
        error: &'e ValidationError<'a>,
        out: &mut Vec<&'e ValidationError<'a>>,
    ) {
        match self.closest(error) {
            Some((_, branch)) => {
                for error in branch {
                    self.meant(error, out);
                }
            }
            None => out.push(error),
        }
    }

    /// Of a `oneOf` or `anyOf` that no branch holds, the branch meant, with its errors: the one
    /// whose required properties the instance has the largest share of, then the one with the
    /// fewest errors. `None` for another error.
    fn closest<'e>(
        &self,
        error: &'e ValidationError<'_>,
    ) -> Option<(Branch, &'e [ValidationError<'static>])> {
        let (ValidationErrorKind::OneOfNotValid { context }
        | ValidationErrorKind::AnyOf { context }) = error.kind()
        else {
            return None;
        };
        let branches = self.branches(error);
        let instance = error.instance();
        context
            .iter()
            .enumerate()
            .filter(|(_, errors)| !errors.is_empty())
            .map(|(index, errors)| {
                let branch = branches.get(index).cloned().unwrap_or_else(|| Branch {
                    name: format!("shape {}", index + 1),
                    required: Vec::new(),
                });
                let share = branch.share_present(instance);
                (share, errors.len(), branch, errors.as_slice())
            })
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, _, branch, errors)| (branch, errors))
    }

    /// The branches of the `oneOf` or `anyOf` that `error` is of, read from the schema.
    fn branches(&self, error: &ValidationError<'_>) -> Vec<Branch> {
        let location = error.schema_path().as_str();
        let keyword = match location.strip_prefix("/$defs/") {
            Some(rest) => {
                let (name, rest) = rest.split_once('/').unwrap_or((rest, ""));
                self.defs
                    .get(&name.replace("~1", "/").replace("~0", "~"))
                    .and_then(|def| def.pointer(&format!("/{rest}")))
            }
            None => self.root.pointer(location),
        };
        let Some(Value::Array(items)) = keyword else {
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                let named = item["$ref"]
                    .as_str()
                    .and_then(|reference| reference.strip_prefix("#/$defs/"));
                let schema = named.and_then(|name| self.defs.get(name)).unwrap_or(item);
                let name = named
                    .map(str::to_owned)
                    .or_else(|| schema["title"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("shape {}", index + 1));
                let required = schema["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|name| name.as_str().map(str::to_owned))
                    .collect();
                Branch { name, required }
            })
            .collect()
    }

    /// One validation error, told as [`SchemaValidator::first_violation`] says.
    fn describe(&self, error: &ValidationError) -> String {
        let path = pointer(error);
        if let Some((branch, errors)) = self.closest(error) {
            let names: Vec<String> = self.branches(error).into_iter().map(|b| b.name).collect();
            let why = errors.first().map_or_else(String::new, |first| {
                format!(", where {}", self.describe(first))
            });
            return format!(
                "`{path}` takes none of the shapes it may take ({}); it comes closest to {}{why}",
                names.join(", "),
                branch.name
            );
        }
        match error.kind() {
            ValidationErrorKind::OneOfNotValid { .. } | ValidationErrorKind::AnyOf { .. } => {
                format!("`{path}` breaks `{}`", error.kind().keyword())
            }
            ValidationErrorKind::Required { property } => {
                format!("`{path}` lacks the required property {property}")
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                format!("`{path}` has properties the schema does not allow: {unexpected:?}")
            }
            kind => format!("`{path}` breaks `{}`", kind.keyword()),
        }
    }
}

/// One branch of a `oneOf` or `anyOf`: the component it names (or its title, or its place) and
/// the properties it requires.
#[derive(Debug, Clone)]
struct Branch {
    name: String,
    required: Vec<String>,
}

impl Branch {
    /// The share of this branch's required properties that `instance` has; 0 when it requires
    /// none or is no object.
    fn share_present(&self, instance: &Value) -> f64 {
        let Some(object) = instance.as_object() else {
            return 0.0;
        };
        if self.required.is_empty() {
            return 0.0;
        }
        let present = self
            .required
            .iter()
            .filter(|name| object.contains_key(*name))
            .count();
        present as f64 / self.required.len() as f64
    }
}

/// Where an instance fails a schema, without its value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Violation {
    /// The JSON pointer of the failing member, `/` for the whole instance.
    pub pointer: String,
    /// The JSON Schema keyword it breaks, such as `required` or `type`.
    pub keyword: String,
}

/// `error` as a violation: its pointer (of a missing member, for `required`) and keyword.
fn violation(error: &ValidationError) -> Violation {
    let at = error.instance_path().as_str().to_owned();
    let pointer = match error.kind() {
        ValidationErrorKind::Required {
            property: Value::String(name),
        } => format!("{at}/{}", name.replace('~', "~0").replace('/', "~1")),
        _ if at.is_empty() => "/".to_owned(),
        _ => at,
    };
    Violation {
        pointer,
        keyword: error.kind().keyword().to_owned(),
    }
}

/// The JSON pointer of the failing value, `/` for the whole instance.
fn pointer<'a>(error: &'a ValidationError) -> &'a str {
    match error.instance_path().as_str() {
        "" => "/",
        path => path,
    }
}

/// Converts one OpenAPI 3.0 schema object to JSON Schema 2020-12.
fn convert(schema: &Value) -> Value {
    let Value::Object(object) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in object {
        let converted = match key.as_str() {
            "$ref" => Value::String(
                value
                    .as_str()
                    .unwrap_or_default()
                    .replace("#/components/schemas/", "#/$defs/"),
            ),
            "properties" => Value::Object(
                value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, property)| (name.clone(), convert(property)))
                    .collect(),
            ),
            "items" | "not" | "additionalProperties" => convert(value),
            "allOf" | "oneOf" | "anyOf" => Value::Array(
                value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(convert)
                    .collect(),
            ),
            // Annotations of OpenAPI only, and the keyword handled below.
            "nullable" | "discriminator" | "example" | "xml" | "externalDocs" => continue,
            _ if key.starts_with("x-") => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    convert_exclusive_bounds(&mut out);
    bound_integer_format(&mut out);
    if object.get("nullable") == Some(&Value::Bool(true)) {
        admit_null(out)
    } else {
        Value::Object(out)
    }
}

/// OpenAPI 3.0 writes `exclusiveMinimum: true` beside `minimum`; JSON Schema wants the number.
fn convert_exclusive_bounds(schema: &mut Map<String, Value>) {
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        match schema.get(exclusive) {
            Some(Value::Bool(true)) => {
                if let Some(limit) = schema.remove(bound) {
                    schema.insert(exclusive.into(), limit);
                }
            }
            Some(Value::Bool(false)) => {
                schema.remove(exclusive);
            }
            _ => {}
        }
    }
}

/// `format: int32` or `int64` on an integer: the range of that type, as `minimum` and `maximum`
/// where the schema sets none (JSON Schema reads `format` as an annotation only). The bounds are
/// integers, and `jsonschema` compares integers exactly, so 2^63 is out of an int64's range
/// rather than rounded into it.
fn bound_integer_format(schema: &mut Map<String, Value>) {
    if schema.get("type").and_then(Value::as_str) != Some("integer") {
        return;
    }
    let (min, max) = match schema.get("format").and_then(Value::as_str) {
        Some("int64") => (json!(i64::MIN), json!(i64::MAX)),
        Some("int32") => (json!(i32::MIN), json!(i32::MAX)),
        _ => return,
    };
    if !schema.contains_key("minimum") && !schema.contains_key("exclusiveMinimum") {
        schema.insert("minimum".into(), min);
    }
    if !schema.contains_key("maximum") && !schema.contains_key("exclusiveMaximum") {
        schema.insert("maximum".into(), max);
    }
}

/// `nullable: true`: widen a typed schema's `type` (and `enum`) to admit `null`. As OpenAPI
/// 3.0.3 says and strict validators read it, `nullable` without a `type` (beside `allOf` or a
/// `$ref`) admits nothing more.
fn admit_null(mut schema: Map<String, Value>) -> Value {
    if let Some(Value::String(kind)) = schema.get("type").cloned() {
        schema.insert("type".into(), json!([kind, "null"]));
        if let Some(Value::Array(values)) = schema.get_mut("enum")
            && !values.contains(&Value::Null)
        {
            values.push(Value::Null);
        }
    }
    Value::Object(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document() -> Value {
        json!({
            "components": { "schemas": {
                "Gas": { "type": "object", "additionalProperties": false,
                         "properties": { "units": { "type": "string", "nullable": true } } },
                "Sim": { "type": "object", "required": ["gas", "direction"],
                         "properties": {
                             "gas": { "oneOf": [
                                 { "$ref": "#/components/schemas/Gas" },
                                 { "nullable": true, "enum": [null] }
                             ] },
                             "direction": { "type": "string", "nullable": true, "enum": ["in", "out", null] },
                             "x-not-an-extension": { "type": "integer" }
                         },
                         "x-profile": "reference" }
            } }
        })
    }

    #[test]
    fn nullable_ref_admits_null_and_the_referenced_schema() {
        let schemas = Schemas::from_openapi(&document()).unwrap();
        let sim = schemas.component("Sim").unwrap();
        assert!(sim.is_valid(&json!({ "gas": null, "direction": null })));
        assert!(sim.is_valid(&json!({ "gas": { "units": null }, "direction": "in" })));
        assert!(!sim.is_valid(&json!({ "gas": { "extra": 1 }, "direction": "in" })));
        assert!(!sim.is_valid(&json!({ "gas": null, "direction": "sideways" })));
        assert!(
            !sim.is_valid(&json!({ "direction": "in" })),
            "gas is required"
        );
    }

    #[test]
    fn an_inlined_schema_holds_no_reference_and_validates_alike() {
        let schemas = Schemas::from_openapi(&document()).unwrap();
        let inlined = schemas.inlined(&json!({ "$ref": "#/components/schemas/Sim" }));
        assert!(!inlined.to_string().contains("$ref"), "{inlined}");
        assert_eq!(
            inlined["properties"]["gas"]["oneOf"][0]["additionalProperties"],
            false
        );
        let validator = jsonschema::validator_for(&inlined).unwrap();
        assert!(validator.is_valid(&json!({ "gas": { "units": "1" }, "direction": "in" })));
        assert!(!validator.is_valid(&json!({ "gas": { "extra": 1 }, "direction": "in" })));
    }

    #[test]
    fn nullable_without_a_type_admits_no_null() {
        let mut document = document();
        document["components"]["schemas"]["Loose"] = json!({
            "nullable": true, "allOf": [{ "$ref": "#/components/schemas/Gas" }]
        });
        let schemas = Schemas::from_openapi(&document).unwrap();
        let loose = schemas.component("Loose").unwrap();
        assert!(loose.is_valid(&json!({ "units": "21000" })));
        assert!(
            !loose.is_valid(&json!(null)),
            "strict OpenAPI 3.0 refuses null here"
        );
    }

    #[test]
    fn properties_named_like_extensions_are_kept_and_extensions_dropped() {
        let schemas = Schemas::from_openapi(&document()).unwrap();
        let sim = schemas.converted("Sim").unwrap();
        assert!(sim.pointer("/properties/x-not-an-extension").is_some());
        assert!(sim.get("x-profile").is_none());
        let validator = schemas.component("Sim").unwrap();
        let errors =
            validator.errors(&json!({ "gas": null, "direction": null, "x-not-an-extension": "s" }));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("/x-not-an-extension: "), "{errors:?}");
    }

    #[test]
    fn a_oneof_no_branch_holds_is_told_by_the_branch_meant() {
        let document = json!({ "components": { "schemas": { "Pick": { "oneOf": [
            { "type": "object", "required": ["a"], "additionalProperties": false,
              "properties": { "a": { "type": "string" } } },
            { "type": "string" }
        ] } } } });
        let pick = Schemas::from_openapi(&document)
            .unwrap()
            .component("Pick")
            .unwrap();
        let errors = pick.errors(&json!({ "a": "a long value", "debug": 1 }));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("'debug' was unexpected"), "{errors:?}");
        assert!(!errors[0].contains("a long value"), "{errors:?}");
    }

    #[test]
    fn a_oneof_no_branch_holds_names_its_shapes_and_the_closest_one() {
        let document = json!({ "components": { "schemas": {
            "Request": { "type": "object", "required": ["app", "operations"],
                         "properties": { "app": { "type": "string" } } },
            "Envelope": { "type": "object", "required": ["chain", "digest", "actions"],
                          "properties": { "actions": { "type": "array" } } },
            "Body": { "oneOf": [
                { "$ref": "#/components/schemas/Request" },
                { "$ref": "#/components/schemas/Envelope" }
            ] }
        } } });
        let schemas = Schemas::from_openapi(&document).unwrap();
        // An envelope whose actions are no array: two of its three required members are
        // there, none of the request's, though the request's branch has no more errors.
        let envelope = json!({ "chain": "evm", "digest": "d", "actions": "none" });
        for validator in [
            schemas.component("Body").unwrap(),
            schemas
                .inline(&schemas.inlined(&json!({ "$ref": "#/components/schemas/Body" })))
                .unwrap(),
        ] {
            let told = validator.first_violation(&envelope).unwrap();
            assert_eq!(
                told,
                "`/` takes none of the shapes it may take (Request, Envelope); it comes closest \
                 to Envelope, where `/actions` breaks `type`"
            );
            let violations = validator.violations(&envelope);
            assert_eq!(violations.len(), 1, "{violations:?}");
            assert_eq!(violations[0].pointer, "/actions");
        }
    }

    #[test]
    fn violations_name_the_member_and_keyword_but_no_value() {
        let schemas = Schemas::from_openapi(&document()).unwrap();
        let sim = schemas.component("Sim").unwrap();
        let violations = sim.violations(&json!({ "direction": "secret-value" }));
        let mut told: Vec<(&str, &str)> = violations
            .iter()
            .map(|v| (v.pointer.as_str(), v.keyword.as_str()))
            .collect();
        told.sort();
        assert_eq!(told, [("/direction", "enum"), ("/gas", "required")]);
        assert!(
            sim.violations(&json!({ "gas": null, "direction": null }))
                .is_empty()
        );
    }

    #[test]
    fn boolean_exclusive_bounds_become_numbers() {
        let converted =
            convert(&json!({ "type": "integer", "minimum": 0, "exclusiveMinimum": true }));
        assert_eq!(
            converted,
            json!({ "type": "integer", "exclusiveMinimum": 0 })
        );
    }

    #[test]
    fn int64_is_bounded_exactly() {
        let schemas = Schemas::from_openapi(&document()).unwrap();
        let validator = schemas
            .inline(&json!({ "type": "integer", "format": "int64", "minimum": 1 }))
            .unwrap();
        let past_max: Value = serde_json::from_str("9223372036854775808").unwrap();
        let far_past: Value = serde_json::from_str("18446744073709551616").unwrap();
        assert!(validator.is_valid(&json!(i64::MAX)));
        assert!(!validator.is_valid(&past_max), "2^63 is past an int64");
        assert!(!validator.is_valid(&far_past), "2^64 is past an int64");
        assert!(validator.is_valid(&json!(1)));
        assert!(!validator.is_valid(&json!(0)), "its own minimum stays");
        let int32 = schemas
            .inline(&json!({ "type": "integer", "format": "int32" }))
            .unwrap();
        assert!(int32.is_valid(&json!(i32::MIN)));
        assert!(!int32.is_valid(&json!(i64::from(i32::MAX) + 1)));
    }

    #[test]
    fn unknown_component_is_an_error() {
        let schemas = Schemas::from_openapi(&document()).unwrap();
        assert!(matches!(
            schemas.component("Nope"),
            Err(Error::UnknownSchema { .. })
        ));
    }
}
