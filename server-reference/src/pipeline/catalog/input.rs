//! An operation's input, declared once ([`input!`]): the serde type the operation reads and the
//! JSON Schema the catalog publishes and checks are made from one list of members, so that
//! neither names a member the other lacks, and a renamed member is refused, not read as empty.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// An operation's input: a serde type, with the JSON Schema made from the same members.
pub trait Input: DeserializeOwned + 'static {
    /// The JSON Schema of the input: an object of exactly these members.
    fn schema() -> Value;
}

/// Declares an input type and its [`Input::schema`]. Each member is `required` or `optional`
/// (its type an `Option`), with its field, its name in JSON and the schema of its value.
macro_rules! input {
    (
        $(#[$doc:meta])*
        $name:ident {
            $($kind:ident $field:ident $member:literal: $ty:ty = $schema:tt),+ $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct $name {
            $(#[serde(rename = $member)] $field: $ty,)+
        }

        impl $crate::pipeline::catalog::input::Input for $name {
            fn schema() -> serde_json::Value {
                let mut required: Vec<&str> = Vec::new();
                $(if input!(@required $kind) {
                    required.push($member);
                })+
                serde_json::json!({
                    "type": "object",
                    "required": required,
                    "properties": { $($member: $schema),+ },
                    "additionalProperties": false
                })
            }
        }
    };
    (@required required) => { true };
    (@required optional) => { false };
}

pub(super) use input;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    input! {
        /// A test input.
        Probe {
            required name "fullName": String = { "type": "string" },
            optional count "count": Option<u64> = { "type": "integer", "minimum": 1 },
        }
    }

    #[test]
    fn the_type_and_the_schema_name_the_same_members() {
        assert_eq!(
            Probe::schema(),
            json!({
                "type": "object",
                "required": ["fullName"],
                "properties": {
                    "fullName": { "type": "string" },
                    "count": { "type": "integer", "minimum": 1 }
                },
                "additionalProperties": false
            })
        );
        let read: Probe = serde_json::from_value(json!({ "fullName": "a" })).unwrap();
        assert_eq!((read.name.as_str(), read.count), ("a", None));
        let renamed = serde_json::from_value::<Probe>(json!({ "name": "a" }));
        assert!(renamed.is_err(), "a member of another name is refused");
    }
}
