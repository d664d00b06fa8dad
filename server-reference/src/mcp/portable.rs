//! Tool schemas in the spelling every MCP client reads: clients that map a tool schema onto a
//! dialect of one `type` per schema (the OpenAPI subset of function declarations) reject a
//! `type` array or drop its constraint, and take a schema without any keyword for a mistake.
//! The rewrite admits exactly the instances the schema admitted: a `type` array becomes an
//! `anyOf` of one type each, and a schema that constrains nothing says "any JSON value" as an
//! `anyOf` of the six types. Arguments are still validated against the schema as converted from
//! openapi.json.

use serde_json::{Map, Value, json};

/// Keywords whose value is one schema.
const ONE: [&str; 10] = [
    "items",
    "not",
    "additionalProperties",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords whose value is a list of schemas.
const LIST: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to schemas.
const MAP: [&str; 4] = [
    "properties",
    "patternProperties",
    "$defs",
    "dependentSchemas",
];

/// Keywords that constrain an instance: a schema with none of them admits any value.
const CONSTRAINING: [&str; 38] = [
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "items",
    "prefixItems",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "dependentSchemas",
    "$ref",
    "contentSchema",
];

/// `schema` rewritten for portability, admitting the same instances.
pub fn portable(schema: Value) -> Value {
    let Value::Object(mut map) = schema else {
        return schema;
    };
    for (key, value) in map.iter_mut() {
        let key = key.as_str();
        if ONE.contains(&key) && value.is_object() {
            *value = portable(value.take());
        } else if LIST.contains(&key)
            && let Value::Array(items) = value
        {
            items
                .iter_mut()
                .for_each(|item| *item = portable(item.take()));
        } else if MAP.contains(&key)
            && let Value::Object(members) = value
        {
            members
                .values_mut()
                .for_each(|member| *member = portable(member.take()));
        }
    }
    one_type_each(&mut map);
    if !map.keys().any(|key| CONSTRAINING.contains(&key.as_str())) {
        let any: Vec<Value> = ["null", "boolean", "object", "array", "number", "string"]
            .into_iter()
            .map(|kind| json!({ "type": kind }))
            .collect();
        map.insert("anyOf".into(), any.into());
    }
    Value::Object(map)
}

/// A `type` array as an `anyOf` of one type each (beside an `anyOf` already there, in an
/// `allOf`); a one-type array as that type.
fn one_type_each(map: &mut Map<String, Value>) {
    let Some(Value::Array(kinds)) = map.get("type") else {
        return;
    };
    if let [kind] = kinds.as_slice() {
        let kind = kind.clone();
        map.insert("type".into(), kind);
        return;
    }
    let branches: Vec<Value> = kinds.iter().map(|kind| json!({ "type": kind })).collect();
    map.remove("type");
    match map.remove("anyOf") {
        None => {
            map.insert("anyOf".into(), branches.into());
        }
        Some(before) => {
            let both = vec![json!({ "anyOf": before }), json!({ "anyOf": branches })];
            match map.get_mut("allOf") {
                Some(Value::Array(all)) => all.extend(both),
                _ => {
                    map.insert("allOf".into(), both.into());
                }
            }
        }
    }
}

/// Where `schema` still holds a `type` array or a schema that constrains nothing, if it does.
#[cfg(test)]
pub(super) fn unportable(schema: &Value) -> Option<String> {
    let Value::Object(map) = schema else {
        return None;
    };
    if map.get("type").is_some_and(Value::is_array) {
        return Some(format!("a type array in {schema}"));
    }
    if !map.keys().any(|key| CONSTRAINING.contains(&key.as_str())) {
        return Some(format!("a schema that constrains nothing: {schema}"));
    }
    map.iter().find_map(|(key, value)| match value {
        Value::Object(members) if MAP.contains(&key.as_str()) => {
            members.values().find_map(unportable)
        }
        Value::Array(items) if LIST.contains(&key.as_str()) => items.iter().find_map(unportable),
        value if ONE.contains(&key.as_str()) => unportable(value),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewritten_schemas_admit_what_they_admitted() {
        let schema = json!({
            "type": "object",
            "properties": {
                "direction": { "type": ["string", "null"], "enum": ["in", "out", null] },
                "units": { "type": ["integer", "null"], "minimum": 0 },
                "output": { "description": "anything" },
                "either": { "type": ["string", "null"], "anyOf": [{ "minLength": 2 }, { "type": "null" }] },
                "list": { "type": ["array"], "items": { "type": ["boolean", "null"] } },
            },
        });
        let rewritten = portable(schema.clone());
        assert_eq!(unportable(&rewritten), None, "{rewritten:#}");
        let before = jsonschema::validator_for(&schema).unwrap();
        let after = jsonschema::validator_for(&rewritten).unwrap();
        let values = [
            json!(null),
            json!("in"),
            json!("x"),
            json!("xy"),
            json!(5),
            json!(-1),
            json!(true),
            json!([true, null]),
            json!([1]),
            json!({ "k": 1 }),
            json!(1.5),
        ];
        for name in ["direction", "units", "output", "either", "list"] {
            for value in &values {
                let instance = json!({ name: value });
                assert_eq!(
                    before.is_valid(&instance),
                    after.is_valid(&instance),
                    "{instance} against {name}"
                );
            }
        }
    }
}
