//! What the suite sends where the deployment's catalog and runtime decide what is valid: the
//! config file's `inputs` (the checks resolve them against a deployment in
//! [`crate::checks::subjects`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The inputs a deployment gives the suite (config key `inputs`).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Inputs {
    /// A build request body for `POST /v1/pipeline/evm/build`.
    pub evm_build: Option<Value>,
    /// A build request body for `POST /v1/pipeline/svm/stage`.
    pub svm_stage: Option<Value>,
    /// A skill operation and a valid input for it.
    pub skill_call: Option<SkillCall>,
    /// A chat message that ends a turn.
    pub chat: Option<String>,
    /// A chat message that makes the runtime raise an action.
    pub action_chat: Option<String>,
    /// An app to install and the credentials it needs.
    pub install: Option<Install>,
    /// An app operation to read (`GET /v1/pipeline/apps/{app}/operations/{operation}`).
    pub app_operation: Option<AppOperation>,
    /// Two build request bodies for `POST /v1/pipeline/evm/build` that each pass alone but
    /// together spend more than their account holds, for the re-simulation at commit.
    pub overspend: Option<[Value; 2]>,
}

/// An app operation of the deployment's catalog.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AppOperation {
    /// The app's name.
    pub app: String,
    /// The operation's name.
    pub operation: String,
}

/// A skill operation call: `POST /v1/pipeline/skills/{skill}/operations/{operation}` with
/// `input`.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SkillCall {
    /// The skill's name.
    pub skill: String,
    /// The operation's name.
    pub operation: String,
    /// A body valid against the operation's input schema.
    pub input: Value,
}

/// An app and the credentials that let it install.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Install {
    /// The app's id in the account's app list.
    pub application_id: i64,
    /// Each required credential's name and a value it accepts.
    pub credentials: BTreeMap<String, String>,
}

impl Inputs {
    /// `self`'s inputs, with `other`'s where `self` has none.
    pub fn or(self, other: &Inputs) -> Inputs {
        Inputs {
            evm_build: self.evm_build.or_else(|| other.evm_build.clone()),
            svm_stage: self.svm_stage.or_else(|| other.svm_stage.clone()),
            skill_call: self.skill_call.or_else(|| other.skill_call.clone()),
            chat: self.chat.or_else(|| other.chat.clone()),
            action_chat: self.action_chat.or_else(|| other.action_chat.clone()),
            install: self.install.or_else(|| other.install.clone()),
            app_operation: self.app_operation.or_else(|| other.app_operation.clone()),
            overspend: self.overspend.or_else(|| other.overspend.clone()),
        }
    }
}
