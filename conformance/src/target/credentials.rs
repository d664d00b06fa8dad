//! The tokens a run holds and where the others come from: the roles the checks use most, each
//! an account, a resource and scopes, and a token source for any other request.

use std::collections::BTreeMap;
use std::sync::Arc;

use clap::ValueEnum;
use intent_models::Scope;
use serde::Deserialize;

use crate::finding::excerpt;

/// The tokens a run holds, by role. Checks that need one the run lacks are skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Tokens(BTreeMap<Role, String>);

impl Tokens {
    /// These tokens with `token` for `role`.
    pub fn with(mut self, role: Role, token: impl Into<String>) -> Self {
        self.0.insert(role, token.into());
        self
    }

    /// The token of `role`, when given.
    pub fn get(&self, role: Role) -> Option<&str> {
        self.0.get(&role).map(String::as_str)
    }

    /// These tokens, with `other`'s for the roles these lack.
    pub fn or(mut self, other: &Tokens) -> Self {
        for (role, token) in &other.0 {
            self.0.entry(*role).or_insert_with(|| token.clone());
        }
        self
    }

    /// Every token held, to redact from reports.
    pub fn secrets(&self) -> Vec<String> {
        self.0.values().cloned().collect()
    }
}

/// Which account a token speaks for: the run's own, or a second one for the isolation checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Account {
    /// The account whose sessions, apps and Builds the checks make.
    Primary,
    /// Another account, which must see none of the primary's.
    Secondary,
}

impl Account {
    /// `primary` or `secondary`, as `INTENT_ACCOUNT` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Secondary => "secondary",
        }
    }
}

/// A token the run asks for: an account, a resource of `x-resources` and scopes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenRequest {
    /// The account.
    pub account: Account,
    /// The resource's name in `x-resources`, such as `agent` or `pipeline-mcp`.
    pub resource: String,
    /// The scopes, sorted.
    pub scopes: Vec<String>,
}

impl TokenRequest {
    /// A request for `account`, `resource` and `scopes` (in any order).
    pub fn new(account: Account, resource: &str, scopes: &[&str]) -> Self {
        let mut scopes: Vec<String> = scopes.iter().map(|scope| scope.to_string()).collect();
        scopes.sort();
        scopes.dedup();
        Self {
            account,
            resource: resource.to_owned(),
            scopes,
        }
    }
}

/// The tokens a run uses most, each given by its own flag (`--agent-token`), environment
/// variable (`INTENT_CONFORMANCE_AGENT_TOKEN`) or config key (`agent`), or asked of the token
/// source. A role's doc comment is its flag's help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, ValueEnum)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// Agent token: agent:read agent:write agent:actions:resolve.
    Agent,
    /// Pipeline token: pipeline:catalog pipeline:execute.
    Pipeline,
    /// Account token: account:apps:read/write, account:credentials:read/write,
    /// account:usage:read.
    Account,
    /// Agent token with agent:read only, for the 403 check.
    Narrow,
    /// Agent token (agent:read agent:write) of a second account, for the isolation checks.
    Second,
    /// Agent MCP token: mcp:agent agent:read (without agent:write, for the scope check).
    AgentMcp,
    /// Pipeline MCP token: mcp:pipeline pipeline:catalog pipeline:execute.
    PipelineMcp,
}

impl Role {
    /// Every role.
    pub fn all() -> &'static [Role] {
        Role::value_variants()
    }

    /// The role's name, such as `agent-mcp`.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|value| value.get_name().to_owned())
            .unwrap_or_default()
    }

    /// The role's flag, such as `--agent-mcp-token`.
    pub fn flag(self) -> String {
        format!("--{}-token", self.name())
    }

    /// The role's environment variable, such as `INTENT_CONFORMANCE_AGENT_MCP_TOKEN`.
    pub fn env(self) -> String {
        let name = self.name().to_uppercase().replace('-', "_");
        format!("INTENT_CONFORMANCE_{name}_TOKEN")
    }

    /// The account, resource and scopes of the role.
    pub fn request(self) -> TokenRequest {
        let (account, resource, scopes): (Account, &str, &[&str]) = match self {
            Role::Agent => (Account::Primary, "agent", &AGENT_SCOPES),
            Role::Pipeline => (Account::Primary, "pipeline", &PIPELINE_SCOPES),
            Role::Account => (Account::Primary, "account", &ACCOUNT_SCOPES),
            Role::Narrow => (Account::Primary, "agent", &[AGENT_SCOPES[0]]),
            Role::Second => (Account::Secondary, "agent", &AGENT_SCOPES[..2]),
            Role::AgentMcp => (Account::Primary, "agent-mcp", &AGENT_MCP_SCOPES),
            Role::PipelineMcp => (Account::Primary, "pipeline-mcp", &PIPELINE_MCP_SCOPES),
        };
        TokenRequest::new(account, resource, scopes)
    }
}

/// The Agent resource's scopes: reading first, then writing (the narrow roles take a prefix).
pub const AGENT_SCOPES: [&str; 3] = [
    Scope::AgentRead.as_str(),
    Scope::AgentWrite.as_str(),
    Scope::AgentActionsResolve.as_str(),
];
/// The Pipeline resource's scopes.
pub const PIPELINE_SCOPES: [&str; 2] = [
    Scope::PipelineCatalog.as_str(),
    Scope::PipelineExecute.as_str(),
];
/// The Agent MCP resource's: its own and the log's.
const AGENT_MCP_SCOPES: [&str; 2] = [Scope::McpAgent.as_str(), Scope::AgentRead.as_str()];
/// The Pipeline MCP resource's: its own and the Pipeline's.
const PIPELINE_MCP_SCOPES: [&str; 3] = [
    Scope::McpPipeline.as_str(),
    Scope::PipelineCatalog.as_str(),
    Scope::PipelineExecute.as_str(),
];
/// The Account resource's scopes that its operations use.
pub const ACCOUNT_SCOPES: [&str; 5] = [
    Scope::AccountAppsRead.as_str(),
    Scope::AccountAppsWrite.as_str(),
    Scope::AccountCredentialsRead.as_str(),
    Scope::AccountCredentialsWrite.as_str(),
    Scope::AccountUsageRead.as_str(),
];

/// Makes a token for a request, given the resource's identifier (its URL).
pub type Mint = Arc<dyn Fn(&TokenRequest, &str) -> Result<String, String> + Send + Sync>;

/// Where the tokens that no flag gives come from.
#[derive(Clone, Default)]
pub enum TokenSource {
    /// Nowhere: checks that need another token skip.
    #[default]
    Given,
    /// A shell command (`sh -c`), run with `INTENT_RESOURCE` (the resource's URL),
    /// `INTENT_SCOPE` (space-separated) and `INTENT_ACCOUNT` (`primary` or `secondary`) in its
    /// environment; it prints JSON with `access_token`, or the token on its last line. The SDK's
    /// `INTENT_TOKEN_COMMAND` keeps the same contract (docs/token-command.md).
    Command(String),
    /// A function in this process (the embedded server's key).
    Mint(Mint),
}

/// Runs the token command for `request`.
pub(super) fn run_token_command(
    command: &str,
    request: &TokenRequest,
    resource: &str,
) -> Result<String, String> {
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("INTENT_RESOURCE", resource)
        .env("INTENT_SCOPE", request.scopes.join(" "))
        .env("INTENT_ACCOUNT", request.account.as_str())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("running the token command: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "the token command exited with {}: {}",
            output.status,
            excerpt(String::from_utf8_lossy(&output.stderr).trim())
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stdout = stdout.trim();
    // The SDK's `CommandToken` reads the same: JSON with `access_token`, or the last line.
    let token = if stdout.starts_with('{') {
        let printed: serde_json::Value = serde_json::from_str(stdout)
            .map_err(|e| format!("the token command printed JSON that does not read: {e}"))?;
        printed["access_token"].as_str().map(str::to_owned)
    } else {
        let last = stdout.lines().map(str::trim).rfind(|line| !line.is_empty());
        last.map(str::to_owned)
    };
    token.ok_or_else(|| "the token command printed no token".to_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use intent_models::ProtectedResource;
    use intent_models::openapi::operation_objects;
    use serde_json::Value;

    use super::{ACCOUNT_SCOPES, AGENT_SCOPES, PIPELINE_SCOPES};

    /// The scopes the run asks for are those openapi.json's operations of each resource need,
    /// all of them scopes openapi.json gives that resource.
    #[test]
    fn the_scopes_asked_for_are_those_openapi_json_gives_each_resource_s_operations() {
        let document: Value = serde_json::from_str(crate::spec::OPENAPI).unwrap();
        for (resource, asked) in [
            ("agent", &AGENT_SCOPES[..]),
            ("pipeline", &PIPELINE_SCOPES[..]),
            ("account", &ACCOUNT_SCOPES[..]),
        ] {
            let needed: BTreeSet<&str> = operation_objects(&document)
                .filter(|(_, _, operation)| operation["x-resource"] == resource)
                .flat_map(|(_, _, operation)| operation["security"].as_array().unwrap())
                .flat_map(|requirement| requirement.as_object().unwrap().values())
                .flat_map(|scopes| scopes.as_array().unwrap())
                .map(|scope| scope.as_str().unwrap())
                .collect();
            let asked: BTreeSet<&str> = asked.iter().copied().collect();
            assert_eq!(asked, needed, "{resource}");
            let declared = ProtectedResource::named(resource).unwrap().scopes;
            assert!(
                asked.iter().all(|scope| declared.contains(scope)),
                "{resource}"
            );
        }
    }
}
