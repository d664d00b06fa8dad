//! The deployment under test: its address, the tokens the run holds, and every response seen.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde::Serialize;
use serde_json::Value;

use crate::exchange::{Exchange, Recorded};
use crate::finding::Finding;
use crate::inputs::Inputs;
use crate::spec::{Level, Operation, spec};

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
    const ALL: [Role; 7] = [
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

    fn given(self, tokens: &Tokens) -> Option<&String> {
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
fn run_token_command(
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

/// What the run knows of the deployment besides its tokens.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The deployment's cursor lifetime, when it is short enough to wait out.
    pub cursor_ttl: Option<Duration>,
    /// What to send where the deployment's catalog and runtime decide what is valid.
    pub inputs: Inputs,
    /// How many requests in a burst pass the deployment's rate limit, to probe its 429.
    pub rate_limit_probe: Option<u32>,
    /// A second address of the same deployment (another instance), for the `deployment`
    /// checks.
    pub peer_url: Option<String>,
    /// How long a turn may take to reach a terminal state.
    pub turn_timeout: Duration,
    /// The seed of the values the `stateful` checks generate.
    pub seed: u64,
    /// How the checks reach the deployment where the document leaves the means open.
    pub means: crate::means::Means,
}

/// How long a turn may take to settle unless `--turn-timeout` says otherwise.
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(20);

impl Default for Settings {
    fn default() -> Self {
        Self {
            cursor_ttl: None,
            inputs: Inputs::default(),
            rate_limit_probe: None,
            peer_url: None,
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            seed: 0,
            means: crate::means::Means::default(),
        }
    }
}

/// A response body that broke its schema in openapi.json.
#[derive(Debug, Clone)]
pub struct Violation {
    /// The check whose request got it.
    pub check: &'static str,
    /// `METHOD /path` as sent.
    pub request: String,
    /// The status of the response.
    pub status: u16,
    /// Normative when the body breaks what every deployment must follow; profile when it breaks
    /// only a choice of our reference profile.
    pub level: Level,
    /// What is wrong.
    pub errors: Vec<String>,
    /// The exchange that got it.
    pub exchange: Exchange,
}

/// What a run's clean-up did with what the run created, each thing named by the path that
/// deletes it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CleanUp {
    /// Removed (or already gone).
    pub removed: Vec<String>,
    /// Left behind, with why.
    pub left: Vec<String>,
}

/// One response seen in the run, kept for the checks that read them all.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The check whose request got it.
    pub check: &'static str,
    /// `METHOD /path` as sent.
    pub request: String,
    /// The status.
    pub status: u16,
    /// The body, `Null` when empty or not JSON.
    pub body: Value,
    /// The exchange that got it.
    pub exchange: Exchange,
}

tokio::task_local! {
    /// The id of the check whose requests the current task makes.
    static CHECK: &'static str;
}

/// Runs `body` as the check `id`: the responses it sees are noted as its own.
pub(crate) async fn checking<F: std::future::Future>(id: &'static str, body: F) -> F::Output {
    CHECK.scope(id, body).await
}

/// A deployment and the run's view of it.
pub struct Target {
    base: String,
    http: reqwest::Client,
    /// The tokens given for the roles.
    tokens: Tokens,
    source: TokenSource,
    minted: Mutex<HashMap<TokenRequest, String>>,
    /// What the run knows of the deployment.
    pub settings: Settings,
    secrets: Mutex<Vec<String>>,
    seen: Mutex<Vec<Arc<Seen>>>,
    violations: Mutex<Vec<Violation>>,
    /// The statuses answered per operation, keyed by `METHOD template`.
    answered: Mutex<BTreeMap<String, BTreeSet<u16>>>,
    /// What the run made and has not deleted (sessions, installed apps, saved credentials), by
    /// the path that deletes it, with the token that made it.
    made: Mutex<BTreeMap<String, String>>,
}

/// How a run exercised one operation of openapi.json.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    /// Upper-case HTTP method.
    pub method: String,
    /// The path template.
    pub path: String,
    /// Every status the deployment answered it with, ascending.
    pub statuses: Vec<u16>,
    /// The statuses openapi.json documents for it that the run never saw, in its order.
    pub unseen: Vec<String>,
}

impl Coverage {
    /// The coverage of `operation`, answered with `statuses` (ascending): with the statuses
    /// openapi.json documents for it that are not among them.
    pub fn of(operation: &Operation, statuses: Vec<u16>) -> Self {
        let documented = spec()
            .operation_object(&operation.method, &operation.template)
            .and_then(|object| object["responses"].as_object())
            .into_iter()
            .flat_map(|responses| responses.keys());
        let unseen = documented
            .filter(|status| {
                status
                    .parse::<u16>()
                    .is_ok_and(|status| !statuses.contains(&status))
            })
            .cloned()
            .collect();
        Self {
            method: operation.method.clone(),
            path: operation.template.clone(),
            statuses,
            unseen,
        }
    }

    /// Whether the operation was answered with a success status, so that its success schema
    /// was validated.
    pub fn succeeded(&self) -> bool {
        self.statuses
            .iter()
            .any(|status| (200..300).contains(status))
    }
}

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body as JSON; `Null` when empty or not JSON.
    pub body: Value,
    /// The body as text.
    pub text: String,
}

impl Reply {
    /// The error code of an error envelope: `error.code`, or `error` itself when it is a string.
    pub fn error_code(&self) -> Option<&str> {
        let error = self.body.get("error")?;
        error
            .as_str()
            .or_else(|| error.get("code").and_then(Value::as_str))
    }

    /// Fails unless the status is `expected`.
    pub fn expect(&self, expected: u16, what: &str) -> Result<&Self, Finding> {
        crate::finding::asserted();
        if self.status == expected {
            Ok(self)
        } else {
            Err(Finding::Fail(format!(
                "{what}: expected {expected}, got {} {}",
                self.status,
                excerpt(&self.text)
            )))
        }
    }

    /// Fails unless the status is `expected` and the body is an error envelope.
    pub fn expect_envelope(&self, expected: u16, what: &str) -> Result<&Self, Finding> {
        self.expect(expected, what)?;
        if self.body.get("error").is_some() {
            Ok(self)
        } else {
            Err(Finding::Fail(format!(
                "{what}: the {expected} has no error envelope: {}",
                excerpt(&self.text)
            )))
        }
    }

    /// Fails unless the status is `expected` and the body is an error envelope with `code`.
    pub fn expect_error(&self, expected: u16, code: &str, what: &str) -> Result<&Self, Finding> {
        self.expect(expected, what)?;
        if self.error_code() == Some(code) {
            Ok(self)
        } else {
            Err(Finding::Fail(format!(
                "{what}: expected error `{code}`, got {}",
                excerpt(&self.text)
            )))
        }
    }
}

/// The first 300 characters of `text`, for messages.
pub fn excerpt(text: &str) -> String {
    let mut cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

impl Target {
    /// A deployment at `base` (such as `https://staging.example.com`).
    pub fn new(base: &str, tokens: Tokens, settings: Settings) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(45))
            .build()
            .expect("an HTTP client");
        Self {
            base: base.trim_end_matches('/').to_owned(),
            http,
            tokens,
            source: TokenSource::Given,
            minted: Mutex::default(),
            settings,
            secrets: Mutex::default(),
            seen: Mutex::default(),
            violations: Mutex::default(),
            answered: Mutex::default(),
            made: Mutex::default(),
        }
    }

    /// Asks `source` for every token that no flag gives.
    pub fn with_source(mut self, source: TokenSource) -> Self {
        self.source = source;
        self
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The identifier (URL) of the resource called `name` in `x-resources`.
    pub fn resource_url(&self, name: &str) -> String {
        let template = spec()
            .element("#/components/securitySchemes/oauth2/x-resources")
            .and_then(|resources| resources.get(name))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        template.replace("{base_url}", &self.base)
    }

    /// The token of `role`: its flag's, or the token source's.
    pub async fn role(&self, role: Role) -> Result<String, Finding> {
        match role.given(&self.tokens) {
            Some(token) => Ok(token.clone()),
            None => self
                .token(&role.request())
                .await
                .map_err(|finding| match finding {
                    Finding::Skip(_) => Finding::Skip(format!(
                        "needs the {} or a token command (--token-command)",
                        role.flag()
                    )),
                    other => other,
                }),
        }
    }

    /// A token for `request`: a role's given token when it is exactly that, else the token
    /// source's (asked once per request); a skip when neither has one.
    pub async fn token(&self, request: &TokenRequest) -> Result<String, Finding> {
        let given = Role::ALL
            .into_iter()
            .find(|role| &role.request() == request)
            .and_then(|role| role.given(&self.tokens));
        if let Some(token) = given {
            return Ok(token.clone());
        }
        if let Some(token) = self.minted.lock().expect("minted tokens").get(request) {
            return Ok(token.clone());
        }
        let resource = self.resource_url(&request.resource);
        let token = match &self.source {
            TokenSource::Given => {
                return crate::finding::skip(format!(
                    "needs a token of the {} account for {} with scopes `{}` (--token-command)",
                    request.account.as_str(),
                    request.resource,
                    request.scopes.join(" ")
                ));
            }
            TokenSource::Mint(mint) => mint(request, &resource),
            TokenSource::Command(command) => {
                let (command, request) = (command.clone(), request.clone());
                tokio::task::spawn_blocking(move || {
                    run_token_command(&command, &request, &resource)
                })
                .await
                .map_err(|e| Finding::Error(format!("the token command: {e}")))?
            }
        }
        .map_err(Finding::Error)?;
        self.secret(&token);
        self.minted
            .lock()
            .expect("minted tokens")
            .insert(request.clone(), token.clone());
        Ok(token)
    }

    /// The HTTP client, for requests that read a stream.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A request to `path` (with its query) on the deployment.
    pub fn request(&self, method: Method, path: &str) -> Call<'_> {
        Call {
            target: self,
            method: method.clone(),
            path: path.to_owned(),
            builder: self.http.request(method, format!("{}{path}", self.base)),
            patient: true,
            bearer: None,
            sent: None,
        }
    }

    /// The second address of the deployment, or a skip without one.
    pub fn peer(&self) -> Result<&str, Finding> {
        match &self.settings.peer_url {
            Some(peer) => Ok(peer.trim_end_matches('/')),
            None => crate::finding::skip("needs a second address of the deployment (--peer-url)"),
        }
    }

    /// A request to `path` (with its query) on the peer address, or a skip without one.
    pub fn peer_request(&self, method: Method, path: &str) -> Result<Call<'_>, Finding> {
        let url = format!("{}{path}", self.peer()?);
        Ok(Call {
            target: self,
            method: method.clone(),
            path: path.to_owned(),
            builder: self.http.request(method, url),
            patient: true,
            bearer: None,
            sent: None,
        })
    }

    /// Remembers a secret value a check sent, so that reports redact it.
    pub fn secret(&self, value: &str) {
        self.secrets.lock().expect("secrets").push(value.to_owned());
    }

    /// Whether `value` is one of the run's tokens or a secret value it sent.
    pub fn is_secret(&self, value: &str) -> bool {
        Role::ALL
            .into_iter()
            .any(|role| role.given(&self.tokens).is_some_and(|token| token == value))
            || self
                .secrets
                .lock()
                .expect("secrets")
                .iter()
                .any(|s| s == value)
    }

    /// The tokens and every secret value sent so far.
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets = self.tokens.secrets();
        secrets.extend(self.secrets.lock().expect("secrets").iter().cloned());
        secrets
    }

    /// Every response seen so far (shared, not copied: a run sees hundreds).
    pub fn seen(&self) -> Vec<Arc<Seen>> {
        self.seen.lock().expect("seen responses").clone()
    }

    /// Every schema violation found so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.violations.lock().expect("violations").clone()
    }

    /// Every operation of openapi.json, in its order, with the statuses answered so far.
    pub fn coverage(&self) -> Vec<Coverage> {
        let answered = self.answered.lock().expect("answered statuses");
        spec()
            .operations()
            .iter()
            .map(|operation| {
                let key = format!("{} {}", operation.method, operation.template);
                let statuses = answered.get(&key).into_iter().flatten().copied();
                Coverage::of(operation, statuses.collect())
            })
            .collect()
    }

    /// The operation of openapi.json a request for `method` and `path` (with its query) is an
    /// instance of, after noting that it answered `status`.
    fn answered(&self, method: &Method, path: &str, status: u16) -> Option<&'static Operation> {
        let route = path.split('?').next().unwrap_or(path);
        let operation = spec().operation(method.as_str(), route)?;
        let key = format!("{} {}", operation.method, operation.template);
        let mut answered = self.answered.lock().expect("answered statuses");
        answered.entry(key).or_default().insert(status);
        Some(operation)
    }

    /// Notes what a successful request created or deleted: the sessions the run starts, the apps
    /// it installs and the credentials it saves.
    fn created(&self, method: &Method, path: &str, body: &Value, bearer: Option<String>) {
        let route = path.split('?').next().unwrap_or(path);
        let made = match (method.as_str(), route) {
            ("POST", "/v1/agent/chat") => body["sessionId"]
                .as_str()
                .map(|session| format!("/v1/agent/sessions/{session}")),
            ("POST", _) if route.starts_with("/v1/account/apps/") => Some(route.to_owned()),
            ("PUT", _) if route.contains("/secrets/") => Some(route.to_owned()),
            ("DELETE", _) => {
                self.made.lock().expect("made").remove(route);
                None
            }
            _ => None,
        };
        if let (Some(made), Some(token)) = (made, bearer) {
            self.made.lock().expect("made").entry(made).or_insert(token);
        }
    }

    /// Deletes everything the run made and did not delete (credentials, then apps, then
    /// sessions), each with the token that made it: what the deployment removed, and what it
    /// did not (with the status).
    pub async fn clean_up(&self) -> CleanUp {
        let made = std::mem::take(&mut *self.made.lock().expect("made"));
        let mut made: Vec<(String, String)> = made.into_iter().collect();
        made.sort_by_key(|(path, _)| {
            let order = if path.contains("/secrets/") {
                0
            } else if path.starts_with("/v1/account/") {
                1
            } else {
                2
            };
            (order, path.clone())
        });
        let mut clean_up = CleanUp::default();
        for (path, token) in made {
            let deleted = self
                .request(Method::DELETE, &path)
                .bearer(&token)
                .send()
                .await;
            match deleted {
                Ok(reply) if (200..300).contains(&reply.status) || reply.status == 404 => {
                    clean_up.removed.push(path)
                }
                Ok(reply) => clean_up.left.push(format!("{path} ({})", reply.status)),
                Err(finding) => clean_up.left.push(format!("{path} ({finding:?})")),
            }
        }
        clean_up
    }

    /// Validates the response of `exchange` against openapi.json and keeps it.
    fn record(
        &self,
        exchange: &Exchange,
        sent: Option<&Value>,
        (method, path): (&Method, &str),
        (body, text): (&Value, &str),
    ) {
        let status = exchange.status.unwrap_or_default();
        let operation = self.answered(method, path, status);
        let check = CHECK.try_with(|check| *check).unwrap_or_default();
        let request = format!("{method} {path}");
        let judged =
            operation.and_then(|operation| spec().judge(operation, sent, (status, body, text)));
        if let Some((level, errors)) = judged {
            self.violations.lock().expect("violations").push(Violation {
                check,
                request: request.clone(),
                status,
                level,
                errors,
                exchange: exchange.clone(),
            });
        }
        self.seen
            .lock()
            .expect("seen responses")
            .push(Arc::new(Seen {
                check,
                request,
                status,
                body: body.clone(),
                exchange: exchange.clone(),
            }));
    }
}

/// How long one request may wait out 429 answers with `Retry-After`, in all.
pub const RETRY_AFTER_BUDGET: Duration = Duration::from_secs(30);

/// One request being made ready.
pub struct Call<'a> {
    target: &'a Target,
    method: Method,
    path: String,
    builder: reqwest::RequestBuilder,
    /// Whether a 429 with `Retry-After` is waited out and the request sent again.
    patient: bool,
    /// The bearer token sent, so that what the request creates can be removed with it.
    bearer: Option<String>,
    /// The JSON body sent, whole, for judging the answer to it.
    sent: Option<Value>,
}

impl Call<'_> {
    /// Sends `token` as the bearer.
    pub fn bearer(mut self, token: &str) -> Self {
        self.builder = self.builder.bearer_auth(token);
        self.bearer = Some(token.to_owned());
        self
    }

    /// Sends `body` as JSON.
    pub fn json(mut self, body: &Value) -> Self {
        self.builder = self.builder.json(body);
        self.sent = Some(body.clone());
        self
    }

    /// Sends `pairs` as an `application/x-www-form-urlencoded` body, as OAuth endpoints take.
    pub fn form(mut self, pairs: &[(&str, &str)]) -> Self {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        self.builder = self
            .builder
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body);
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.builder = self.builder.header(name, value);
        self
    }

    /// Takes a 429 as the answer, instead of waiting out its `Retry-After`: for checks of the
    /// rate limit itself.
    pub fn impatient(mut self) -> Self {
        self.patient = false;
        self
    }

    /// Sends the request. A 429 with `Retry-After` in whole seconds is waited out and the request
    /// sent again while [`RETRY_AFTER_BUDGET`] lasts, each time a warning of the running check:
    /// a deployment's rate limit is never a failure of the check that met it.
    async fn dispatch(&self, what: &str) -> Result<(reqwest::Response, Exchange), Finding> {
        let mut waited = Duration::ZERO;
        loop {
            let builder = self
                .builder
                .try_clone()
                .ok_or_else(|| Finding::Error(format!("{what}: a request that cannot be sent")))?;
            let (client, request) = builder.build_split();
            let request = request.map_err(|e| Finding::Error(format!("{what}: {e}")))?;
            let mut exchange = Exchange::sent(&request, |value| self.target.is_secret(value));
            let sent = Instant::now();
            let response = match client.execute(request).await {
                Ok(response) => response,
                Err(e) => {
                    exchange.error = Some(e.to_string());
                    crate::finding::exchanged(exchange);
                    return Err(Finding::Error(format!("{what}: {e}")));
                }
            };
            exchange.answered(
                response.status().as_u16(),
                response.headers(),
                sent.elapsed(),
            );
            let delay = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse().ok())
                .map(Duration::from_secs);
            match delay {
                Some(delay)
                    if self.patient
                        && response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS
                        && waited + delay <= RETRY_AFTER_BUDGET =>
                {
                    crate::finding::exchanged(exchange);
                    crate::finding::warn(format!(
                        "{what}: 429, waited out its Retry-After of {} s and sent it again",
                        delay.as_secs()
                    ));
                    tokio::time::sleep(delay).await;
                    waited += delay;
                }
                _ => return Ok((response, exchange)),
            }
        }
    }

    /// Sends the request and returns the response unread, for streams; only its status is
    /// recorded, for the coverage, and its exchange, whose frames [`crate::sse::Reader`] adds.
    pub async fn open(self) -> Result<reqwest::Response, Finding> {
        let what = format!("{} {}", self.method, self.path);
        let (mut response, exchange) = self.dispatch(&what).await?;
        let status = response.status().as_u16();
        self.target.answered(&self.method, &self.path, status);
        if let Some(place) = crate::finding::exchanged(exchange) {
            response.extensions_mut().insert(Recorded(place));
        }
        Ok(response)
    }

    /// Sends the request and reads the whole response, unless it is an event stream (then its
    /// body is left unread and empty); a transport failure is the suite's error.
    pub async fn send(self) -> Result<Reply, Finding> {
        let what = format!("{} {}", self.method, self.path);
        let (response, mut exchange) = self.dispatch(&what).await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let streams = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|kind| kind.to_str().ok())
            .is_some_and(|kind| kind.starts_with("text/event-stream"));
        let text = if streams {
            String::new()
        } else {
            response
                .text()
                .await
                .map_err(|e| Finding::Error(format!("{what}: reading the body: {e}")))?
        };
        if !streams {
            exchange.body(&text);
        }
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        self.target.record(
            &exchange,
            self.sent.as_ref(),
            (&self.method, &self.path),
            (&body, &text),
        );
        crate::finding::exchanged(exchange);
        if (200..300).contains(&status) {
            self.target
                .created(&self.method, &self.path, &body, self.bearer);
        }
        Ok(Reply {
            status,
            headers,
            body,
            text,
        })
    }
}
