//! The tokens a run holds and where the others come from: the roles the checks use most, each
//! an account, a resource and scopes, and a token source for any other request.

use std::sync::Arc;

use crate::finding::excerpt;

/// The tokens a run holds. Checks that need one the run lacks are skipped.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    /// Agent resource, scopes `agent:read agent:write agent:actions:resolve`.
    pub agent: Option<String>,
    /// Pipeline resource, scopes `pipeline:catalog pipeline:execute`.
    pub pipeline: Option<String>,
    /// Account resource, scopes `account:apps:read account:apps:write
    /// account:credentials:read account:credentials:write account:usage:read`.
    pub account: Option<String>,
    /// Agent resource with `agent:read` only.
    pub narrow: Option<String>,
    /// Agent resource, scopes `agent:read agent:write`, of a second account.
    pub second: Option<String>,
    /// Agent MCP resource, scopes `mcp:agent agent:read` (without `agent:write`, so that a
    /// write tool is beyond it).
    pub agent_mcp: Option<String>,
    /// Pipeline MCP resource, scopes `mcp:pipeline pipeline:catalog pipeline:execute`.
    pub pipeline_mcp: Option<String>,
}

impl Tokens {
    /// Every token held, to redact from reports.
    pub fn secrets(&self) -> Vec<String> {
        Role::ALL
            .into_iter()
            .filter_map(|role| role.given(self))
            .cloned()
            .collect()
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

/// The tokens a run uses most, each given by its own flag or asked of the token source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// See [`Tokens::agent`].
    Agent,
    /// See [`Tokens::pipeline`].
    Pipeline,
    /// See [`Tokens::account`].
    Account,
    /// See [`Tokens::narrow`].
    Narrow,
    /// See [`Tokens::second`].
    Second,
    /// See [`Tokens::agent_mcp`].
    AgentMcp,
    /// See [`Tokens::pipeline_mcp`].
    PipelineMcp,
}

impl Role {
    pub(super) const ALL: [Role; 7] = [
        Role::Agent,
        Role::Pipeline,
        Role::Account,
        Role::Narrow,
        Role::Second,
        Role::AgentMcp,
        Role::PipelineMcp,
    ];

    /// The account, resource and scopes of the role.
    pub fn request(self) -> TokenRequest {
        let (account, resource, scopes): (Account, &str, &[&str]) = match self {
            Role::Agent => (Account::Primary, "agent", &AGENT_SCOPES),
            Role::Pipeline => (Account::Primary, "pipeline", &PIPELINE_SCOPES),
            Role::Account => (Account::Primary, "account", &ACCOUNT_SCOPES),
            Role::Narrow => (Account::Primary, "agent", &["agent:read"]),
            Role::Second => (Account::Secondary, "agent", &["agent:read", "agent:write"]),
            Role::AgentMcp => (Account::Primary, "agent-mcp", &["mcp:agent", "agent:read"]),
            Role::PipelineMcp => (
                Account::Primary,
                "pipeline-mcp",
                &["mcp:pipeline", "pipeline:catalog", "pipeline:execute"],
            ),
        };
        TokenRequest::new(account, resource, scopes)
    }

    /// The role's flag, such as `--agent-token`.
    pub fn flag(self) -> &'static str {
        match self {
            Role::Agent => "--agent-token",
            Role::Pipeline => "--pipeline-token",
            Role::Account => "--account-token",
            Role::Narrow => "--narrow-token",
            Role::Second => "--second-token",
            Role::AgentMcp => "--agent-mcp-token",
            Role::PipelineMcp => "--pipeline-mcp-token",
        }
    }

    pub(super) fn given(self, tokens: &Tokens) -> Option<&String> {
        match self {
            Role::Agent => tokens.agent.as_ref(),
            Role::Pipeline => tokens.pipeline.as_ref(),
            Role::Account => tokens.account.as_ref(),
            Role::Narrow => tokens.narrow.as_ref(),
            Role::Second => tokens.second.as_ref(),
            Role::AgentMcp => tokens.agent_mcp.as_ref(),
            Role::PipelineMcp => tokens.pipeline_mcp.as_ref(),
        }
    }
}

/// The Agent resource's scopes.
pub const AGENT_SCOPES: [&str; 3] = ["agent:read", "agent:write", "agent:actions:resolve"];
/// The Pipeline resource's scopes.
pub const PIPELINE_SCOPES: [&str; 2] = ["pipeline:catalog", "pipeline:execute"];
/// The Account resource's scopes that its operations use.
pub const ACCOUNT_SCOPES: [&str; 5] = [
    "account:apps:read",
    "account:apps:write",
    "account:credentials:read",
    "account:credentials:write",
    "account:usage:read",
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
    /// environment; the last line of its standard output is the token.
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
    match stdout.lines().map(str::trim).rfind(|line| !line.is_empty()) {
        Some(token) => Ok(token.to_owned()),
        None => Err("the token command printed no token".into()),
    }
}
