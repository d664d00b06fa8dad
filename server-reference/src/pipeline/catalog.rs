//! The apps whose operations assemble actions, each operation with the JSON Schema of its input
//! (checked with the `jsonschema` crate before anything is assembled).

use std::sync::LazyLock;

use intent_models::{ErrorCode, PipelineAction};
use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// An app: a named set of operations on one chain.
pub struct App {
    /// The app name, `origin.app` of its Builds.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Its operations.
    pub operations: Vec<Operation>,
}

/// An operation that turns a checked input into actions.
pub struct Operation {
    /// The operation name.
    pub name: &'static str,
    /// The JSON Schema of the input.
    pub input_schema: Value,
    validator: jsonschema::Validator,
    assemble: fn(&Map<String, Value>, u64) -> Result<Assembled, ApiError>,
}

/// Actions assembled by an operation, and a title for people.
pub struct Assembled {
    /// The actions, numbered from the given step.
    pub actions: Vec<PipelineAction>,
    /// What they do, for the Build's summary.
    pub title: String,
}

impl Operation {
    fn new(
        name: &'static str,
        input_schema: Value,
        assemble: fn(&Map<String, Value>, u64) -> Result<Assembled, ApiError>,
    ) -> Self {
        let validator = jsonschema::draft202012::new(&input_schema)
            .expect("the catalog's input schemas compile");
        Self {
            name,
            input_schema,
            validator,
            assemble,
        }
    }

    /// Checks `input` against the input schema, then assembles its actions from `step` on.
    pub fn assemble(&self, input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
        let instance = Value::Object(input.clone());
        let errors: Vec<Value> = self
            .validator
            .iter_errors(&instance)
            .map(|e| json!({ "path": e.instance_path().to_string(), "message": e.to_string() }))
            .collect();
        if !errors.is_empty() {
            return Err(ApiError::new(
                ErrorCode::ValidationFailed,
                format!("the input of {} does not match its schema", self.name),
            )
            .with_detail("errors", Value::Array(errors)));
        }
        (self.assemble)(input, step)
    }
}

impl App {
    /// The operation called `name`, or 404.
    pub fn operation(&self, name: &str) -> Result<&Operation, ApiError> {
        self.operations
            .iter()
            .find(|op| op.name == name)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::NotFound,
                    format!("app {} has no operation {name}", self.name),
                )
            })
    }
}

/// Every app.
pub static APPS: LazyLock<Vec<App>> = LazyLock::new(|| {
    vec![App {
        name: "evm-assets",
        description: "Native transfers on the EVM devnet.",
        operations: vec![Operation::new(
            "native-transfer",
            json!({
                "type": "object",
                "required": ["chainId", "from", "to", "amount"],
                "properties": {
                    "chainId": { "type": "integer", "minimum": 1 },
                    "from": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                    "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                    "amount": {
                        "type": "string",
                        "description": "Amount of the native coin, in whole units (18 decimals).",
                        "pattern": "^[0-9]{1,40}(\\.[0-9]{1,18})?$"
                    }
                },
                "additionalProperties": false
            }),
            native_transfer,
        )],
    }]
});

/// The app called `name`, or 404.
pub fn app(name: &str) -> Result<&'static App, ApiError> {
    APPS.iter()
        .find(|app| app.name == name)
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no app {name}")))
}

fn native_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
    let text = |key: &str| input[key].as_str().unwrap_or_default().to_owned();
    let amount = text("amount");
    let wei = to_base_units(&amount, 18)
        .ok_or_else(|| ApiError::new(ErrorCode::ValidationFailed, "amount is out of range"))?;
    let to = text("to");
    let action = json!({
        "chain": "evm",
        "step": step,
        "chainId": input["chainId"],
        "from": text("from"),
        "to": to,
        "value": wei,
        "data": "0x",
        "description": format!("Transfer {amount} ETH to {to}"),
    });
    Ok(Assembled {
        actions: vec![
            serde_json::from_value(action)
                .map_err(|e| ApiError::new(ErrorCode::ValidationFailed, e.to_string()))?,
        ],
        title: format!("Send {amount} ETH"),
    })
}

/// `amount` (decimal, at most `decimals` fraction digits) in base units, as a decimal string
/// of at most 78 digits.
fn to_base_units(amount: &str, decimals: usize) -> Option<String> {
    let (whole, fraction) = amount.split_once('.').unwrap_or((amount, ""));
    if fraction.len() > decimals {
        return None;
    }
    let digits = format!("{whole}{fraction:0<decimals$}");
    let trimmed = digits.trim_start_matches('0');
    let units = if trimmed.is_empty() { "0" } else { trimmed };
    (units.len() <= 78).then(|| units.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_become_base_units() {
        assert_eq!(
            to_base_units("1", 18).as_deref(),
            Some("1000000000000000000")
        );
        assert_eq!(
            to_base_units("0.5", 18).as_deref(),
            Some("500000000000000000")
        );
        assert_eq!(to_base_units("25.5", 6).as_deref(), Some("25500000"));
        assert_eq!(to_base_units("0", 6).as_deref(), Some("0"));
        assert_eq!(to_base_units("0.0000001", 6), None);
    }
}
