//! What a check is: its metadata, its level and the verdict of one run.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

use crate::finding::Verdict;
use crate::spec::Operation;
use crate::target::Target;

/// The area of the interface a check covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Category {
    /// Bearer tokens, resources and scopes (part 5).
    #[serde(rename = "auth")]
    Auth,
    /// Response bodies against openapi.json (parts 2 and 7).
    #[serde(rename = "schema")]
    Schema,
    /// The event log read by long-poll pages (parts 2.11, 6 and 7).
    #[serde(rename = "agent.events")]
    AgentEvents,
    /// The SSE projection of the event log (part 6).
    #[serde(rename = "agent.sse")]
    AgentSse,
    /// Turns and their states (part 3).
    #[serde(rename = "agent.turns")]
    AgentTurns,
    /// Sessions read, updated and deleted (part 4.2).
    #[serde(rename = "agent.sessions")]
    AgentSessions,
    /// Durable actions and their resolution (part 4.2).
    #[serde(rename = "agent.actions")]
    AgentActions,
    /// Builds, simulation and commit (parts 2.1 to 2.8, 3 and 4.1).
    #[serde(rename = "pipeline")]
    Pipeline,
    /// Apps, credentials and the statement (part 4.3).
    #[serde(rename = "account")]
    Account,
    /// The limits of part 8.
    #[serde(rename = "limits")]
    Limits,
    /// The MCP resources of part 5.4.
    #[serde(rename = "mcp")]
    Mcp,
    /// Two addresses of one deployment behave as one (with `--peer-url`).
    #[serde(rename = "deployment")]
    Deployment,
    /// Sequences that follow the links of openapi.json (part 4).
    #[serde(rename = "stateful")]
    Stateful,
    /// An app's live traffic, seen by `intent-conformance proxy`.
    #[serde(rename = "traffic")]
    Traffic,
}

impl Category {
    /// The category's name, as `--only` and the reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::Schema => "schema",
            Self::AgentEvents => "agent.events",
            Self::AgentSse => "agent.sse",
            Self::AgentTurns => "agent.turns",
            Self::AgentSessions => "agent.sessions",
            Self::AgentActions => "agent.actions",
            Self::Pipeline => "pipeline",
            Self::Account => "account",
            Self::Limits => "limits",
            Self::Mcp => "mcp",
            Self::Deployment => "deployment",
            Self::Stateful => "stateful",
            Self::Traffic => "traffic",
        }
    }
}

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The deployment did what the requirement says.
    Pass,
    /// The deployment did not.
    Fail,
    /// The suite itself broke (the deployment unreachable, a check's own mistake).
    Error,
    /// The check could not run here (a token or setting the run does not have); the reason says which.
    Skip,
    /// Left out by `--only`, `--skip` or `--level`.
    Disabled,
}

impl Status {
    /// The status as the reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Error => "error",
            Self::Skip => "skip",
            Self::Disabled => "disabled",
        }
    }
}

/// A check's body: an async function of the deployment under test and of the check itself (whose
/// `operation` it may test).
pub type Run =
    for<'a> fn(&'a Target, &'a Check) -> Pin<Box<dyn Future<Output = Verdict> + Send + 'a>>;

/// One requirement of the interface and the code that tests it.
pub struct Check {
    /// Stable id, `category.name`.
    pub id: Cow<'static, str>,
    /// The area it covers.
    pub category: Category,
    /// The requirement, one RFC 2119 sentence.
    pub requirement: &'static str,
    /// The part of the interface document it comes from, such as `7.3`.
    pub section: &'static str,
    /// The elements of openapi.json it rests on: `METHOD /path` or `#/components/...`.
    pub rests_on: Vec<&'static str>,
    /// The operation of openapi.json the check is about, for the checks made once per operation.
    pub operation: Option<&'static Operation>,
    /// The test.
    pub run: Run,
}
