//! The catalog: apps whose operations assemble actions, and skills whose operations answer
//! request-local results. Every operation takes an input type whose JSON Schema is made from the
//! same members (`input.rs`), checked with the `jsonschema` crate before anything runs.

mod apps;
mod evm_assets;
mod input;
mod skills;
mod svm_assets;

use intent_models::{PipelineAction, PipelineChain};
use serde_json::{Map, Value, json};

use super::Error;
use input::Input;

pub use apps::APPS;
pub use skills::SKILLS;

/// An app: a named set of operations on one chain.
pub struct App {
    /// The app name, `origin.app` of its Builds.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// The chain its actions run on.
    pub chain: PipelineChain,
    /// Its operations.
    pub operations: Vec<AppOperation>,
}

/// A JSON Schema with its compiled validator.
pub struct Schema {
    /// The schema as served in operation descriptors.
    pub json: Value,
    validator: jsonschema::Validator,
}

impl Schema {
    fn new(json: Value) -> Self {
        let validator =
            jsonschema::draft202012::new(&json).expect("the catalog's input schemas compile");
        Self { json, validator }
    }

    /// Checks `input` against the schema: 400 `validation_failed` with every error otherwise.
    pub fn check(&self, what: &str, input: &Value) -> Result<(), Error> {
        let errors: Vec<Value> = self
            .validator
            .iter_errors(input)
            .map(|e| json!({ "path": e.instance_path().to_string(), "message": e.to_string() }))
            .collect();
        if errors.is_empty() {
            return Ok(());
        }
        Err(Error::InvalidInput {
            operation: what.to_owned(),
            errors,
        })
    }
}

/// An operation that turns a checked input into actions.
pub struct AppOperation {
    /// The operation name.
    pub name: &'static str,
    /// The input's schema.
    pub input: Schema,
    assemble: Box<dyn Fn(Value, u64) -> Result<Assembled, Error> + Send + Sync>,
}

/// Actions assembled by an operation, and a title for people.
pub struct Assembled {
    /// The actions, numbered from the given step.
    pub actions: Vec<PipelineAction>,
    /// What they do, for the Build's summary.
    pub title: String,
}

impl AppOperation {
    /// Operation `name`, which `assemble`s actions from its input `T`.
    fn new<T: Input>(name: &'static str, assemble: fn(T, u64) -> Result<Assembled, Error>) -> Self {
        Self {
            name,
            input: Schema::new(T::schema()),
            assemble: Box::new(move |input, step| assemble(typed(name, input)?, step)),
        }
    }

    /// Checks `input` against the input schema, then assembles its actions from `step` on.
    pub fn assemble(&self, input: &Map<String, Value>, step: u64) -> Result<Assembled, Error> {
        let input = Value::Object(input.clone());
        self.input.check(self.name, &input)?;
        (self.assemble)(input, step)
    }
}

/// `input`, which the schema of operation `name` admitted, as the operation's type: 400 when a
/// value is beyond what the type holds (a number too large, say).
fn typed<T: Input>(name: &str, input: Value) -> Result<T, Error> {
    serde_json::from_value(input).map_err(|error| Error::Invalid(format!("{name}: {error}")))
}

impl App {
    /// The operation called `name`, or 404.
    pub fn operation(&self, name: &str) -> Result<&AppOperation, Error> {
        let what = format!("app {} has no operation", self.name);
        named(&self.operations, |op| op.name, name, &what)
    }
}

/// The item of `items` called `name`, or 404 saying `what` and the name.
fn named<'a, T>(
    items: &'a [T],
    name_of: fn(&T) -> &'static str,
    name: &str,
    what: &str,
) -> Result<&'a T, Error> {
    items
        .iter()
        .find(|item| name_of(item) == name)
        .ok_or_else(|| Error::NotFound(format!("{what} {name}")))
}

/// A skill: operations that answer request-local results and assemble nothing.
pub struct Skill {
    /// The skill name.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Its operations.
    pub operations: Vec<SkillOperation>,
}

/// A skill operation: a checked input in, a result out.
pub struct SkillOperation {
    /// The operation name.
    pub name: &'static str,
    /// The input's schema.
    pub input: Schema,
    run: Box<dyn Fn(Value) -> Result<Value, Error> + Send + Sync>,
}

impl SkillOperation {
    /// Operation `name`, which answers its input `T` by `run`.
    fn new<T: Input>(name: &'static str, run: fn(T) -> Value) -> Self {
        Self {
            name,
            input: Schema::new(T::schema()),
            run: Box::new(move |input| Ok(run(typed(name, input)?))),
        }
    }

    /// Checks `input` against the input schema, then runs the operation.
    pub fn run(&self, input: &Value) -> Result<Value, Error> {
        self.input.check(self.name, input)?;
        (self.run)(input.clone())
    }
}

impl Skill {
    /// The operation called `name`, or 404.
    pub fn operation(&self, name: &str) -> Result<&SkillOperation, Error> {
        let what = format!("skill {} has no operation", self.name);
        named(&self.operations, |op| op.name, name, &what)
    }
}

/// The skill called `name`, or 404.
pub fn skill(name: &str) -> Result<&'static Skill, Error> {
    named(&SKILLS, |skill| skill.name, name, "no skill")
}

/// The app called `name`, or 404.
pub fn app(name: &str) -> Result<&'static App, Error> {
    named(&APPS, |app| app.name, name, "no app")
}

/// An assembled value the model refused, as a 400 that says why.
fn refused(error: impl std::fmt::Display) -> Error {
    Error::Invalid(error.to_string())
}

/// A one-based step or chain id, or 400 for zero.
fn positive(what: &str, number: u64) -> Result<std::num::NonZeroU64, Error> {
    std::num::NonZeroU64::new(number)
        .ok_or_else(|| Error::Invalid(format!("{what} must be at least 1")))
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
