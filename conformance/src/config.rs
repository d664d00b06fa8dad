//! Where a run's address, tokens and settings come from: flags, then environment variables
//! (both read by the CLI), then the config file, its `--env` environment before its top level.
//!
//! The file is JSON:
//!
//! ```json
//! {
//!   "tokenCommand": "intent-server token --data-dir data --sub \"conformance-$INTENT_ACCOUNT\" --scope \"$INTENT_SCOPE\" --resource \"$INTENT_RESOURCE\"",
//!   "turnTimeout": 60,
//!   "inputs": {
//!     "evmBuild": { "app": "acme-tokens", "operations": [{ "operation": "transfer", "input": {} }] },
//!     "svmStage": { "app": "acme-sol", "operations": [{ "operation": "transfer", "input": {} }] },
//!     "skillCall": { "skill": "address", "operation": "validate", "input": { "address": "0x..." } },
//!     "chat": "hello", "actionChat": "send 1 USDC to 0x...",
//!     "install": { "applicationId": 7, "credentials": { "API_KEY": "..." } }
//!   },
//!   "profile": { "cursorParameter": "cursor" },
//!   "tokens": { "agent": "...", "pipeline": "...", "account": "...", "narrow": "...", "second": "...",
//!               "agentMcp": "...", "pipelineMcp": "..." },
//!   "environments": {
//!     "staging": { "baseUrl": "https://staging.example.com", "peerUrl": "https://b.staging.example.com",
//!                  "tokens": { "agent": "..." }, "cursorTtl": 5 }
//!   }
//! }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::inputs::Inputs;
use crate::target::{Settings, Tokens};

/// The values one source gives; absent ones fall through to the next source.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Layer {
    /// The deployment's base URL.
    pub base_url: Option<String>,
    /// Tokens, by role (`agent`, `pipeline`, `account`, `narrow`, `second`, `agentMcp`,
    /// `pipelineMcp`).
    #[serde(default)]
    pub tokens: Tokens,
    /// The deployment's cursor lifetime in seconds.
    pub cursor_ttl: Option<u64>,
    /// What to send where the deployment's catalog and runtime decide what is valid.
    #[serde(default)]
    pub inputs: Inputs,
    /// How many requests in a burst pass the deployment's rate limit.
    pub rate_limit_probe: Option<u32>,
    /// A second address of the same deployment.
    pub peer_url: Option<String>,
    /// A command that prints a token for `INTENT_RESOURCE`, `INTENT_SCOPE` and `INTENT_ACCOUNT`.
    pub token_command: Option<String>,
    /// Seconds a turn may take to reach a terminal state.
    pub turn_timeout: Option<u64>,
    /// The seed of the values the `stateful` checks generate.
    pub seed: Option<u64>,
    /// The means of reaching the deployment where the document leaves them open (see
    /// [`crate::means`]); an environment's replaces the top level's whole.
    pub profile: Option<crate::means::Means>,
}

/// The config file: top-level values for every environment, and named environments.
#[derive(Debug, Clone, Default)]
pub struct File {
    /// Top-level values.
    pub defaults: Layer,
    /// Named environments, chosen with `--env`.
    pub environments: BTreeMap<String, Layer>,
}

impl File {
    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| format!("the config file: {e}"))?;
        let environments = match object.remove("environments") {
            Some(value) => serde_json::from_value(value)
                .map_err(|e| format!("the config file's environments: {e}"))?,
            None => BTreeMap::new(),
        };
        let defaults =
            serde_json::from_value(object.into()).map_err(|e| format!("the config file: {e}"))?;
        Ok(Self {
            defaults,
            environments,
        })
    }
}

/// What a run resolved to.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The base URL; `None` starts the embedded server.
    pub base_url: Option<String>,
    /// The tokens.
    pub tokens: Tokens,
    /// The settings.
    pub settings: Settings,
    /// The token command, when one is set.
    pub token_command: Option<String>,
}

/// Merges `command_line` (flags and environment variables) over the file's environment `env`
/// over the file's top level.
pub fn resolve(
    command_line: Layer,
    file: Option<&File>,
    env: Option<&str>,
) -> Result<Resolved, String> {
    let environment = match (file, env) {
        (_, None) => None,
        (Some(file), Some(name)) => Some(
            file.environments
                .get(name)
                .ok_or_else(|| format!("the config file has no environment {name:?}"))?,
        ),
        (None, Some(name)) => return Err(format!("--env {name} needs a config file (--config)")),
    };
    let layers: Vec<&Layer> = [
        Some(&command_line),
        environment,
        file.map(|file| &file.defaults),
    ]
    .into_iter()
    .flatten()
    .collect();
    let first =
        |pick: fn(&Layer) -> Option<&String>| layers.iter().find_map(|layer| pick(layer)).cloned();
    let tokens = layers
        .iter()
        .fold(Tokens::default(), |tokens, layer| tokens.or(&layer.tokens));
    let mut settings = Settings {
        cursor_ttl: layers
            .iter()
            .find_map(|layer| layer.cursor_ttl)
            .map(Duration::from_secs),
        rate_limit_probe: layers.iter().find_map(|layer| layer.rate_limit_probe),
        peer_url: first(|layer| layer.peer_url.as_ref()),
        seed: layers.iter().find_map(|layer| layer.seed).unwrap_or(0),
        ..Settings::default()
    };
    if let Some(means) = layers.iter().find_map(|layer| layer.profile.as_ref()) {
        settings.means = means.clone();
    }
    if let Some(seconds) = layers.iter().find_map(|layer| layer.turn_timeout) {
        settings.turn_timeout = Duration::from_secs(seconds);
    }
    settings.inputs = layers
        .iter()
        .fold(Inputs::default(), |inputs, layer| inputs.or(&layer.inputs));
    let base_url = first(|layer| layer.base_url.as_ref());
    if let (Some(name), None) = (env, &base_url) {
        return Err(format!("the environment {name:?} has no baseUrl"));
    }
    Ok(Resolved {
        base_url,
        tokens,
        settings,
        token_command: first(|layer| layer.token_command.as_ref()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Role;

    const FILE: &str = r#"{
        "tokens": { "agent": "file-agent", "pipeline": "file-pipeline", "account": "file-account" },
        "cursorTtl": 9,
        "environments": {
            "staging": { "baseUrl": "https://staging.example", "tokens": { "pipeline": "staging-pipeline" } }
        }
    }"#;

    #[test]
    fn command_line_beats_environment_beats_file() {
        let file = File::parse(FILE).unwrap();
        let command_line = Layer {
            tokens: Tokens::default().with(Role::Agent, "flag-agent"),
            ..Layer::default()
        };
        let resolved = resolve(command_line, Some(&file), Some("staging")).unwrap();
        assert_eq!(
            resolved.base_url.as_deref(),
            Some("https://staging.example")
        );
        let token = |role| resolved.tokens.get(role);
        assert_eq!(token(Role::Agent), Some("flag-agent"));
        assert_eq!(token(Role::Pipeline), Some("staging-pipeline"));
        assert_eq!(token(Role::Account), Some("file-account"));
        assert_eq!(token(Role::Narrow), None);
        assert_eq!(resolved.settings.cursor_ttl, Some(Duration::from_secs(9)));
    }

    #[test]
    fn an_unknown_environment_or_member_is_an_error() {
        let file = File::parse(FILE).unwrap();
        assert!(resolve(Layer::default(), Some(&file), Some("prod")).is_err());
        assert!(resolve(Layer::default(), None, Some("staging")).is_err());
        assert!(File::parse(r#"{"token": {}}"#).is_err());
        assert!(File::parse(r#"{"tokens": {"agentMcp": "t", "admin": "t"}}"#).is_err());
        assert!(File::parse(r#"{"tokens": {"agentMcp": "t", "pipelineMcp": "u"}}"#).is_ok());
    }
}
