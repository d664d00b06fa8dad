//! The deployment under test: its address, the tokens the run holds, and every response seen.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde::Serialize;
use serde_json::Value;

use crate::finding::Finding;
use crate::spec::{Operation, spec};

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
        [
            &self.agent,
            &self.pipeline,
            &self.account,
            &self.narrow,
            &self.second,
            &self.agent_mcp,
            &self.pipeline_mcp,
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
    }
}

/// What the run knows of the deployment besides its tokens.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The deployment's cursor lifetime, when it is short enough to wait out.
    pub cursor_ttl: Option<Duration>,
    /// A chat message that makes the deployment's runtime raise an action.
    pub action_prompt: String,
    /// How many requests in a burst pass the deployment's rate limit, to probe its 429.
    pub rate_limit_probe: Option<u32>,
    /// A second address of the same deployment (another instance), for the `deployment`
    /// checks.
    pub peer_url: Option<String>,
}

/// The message that makes the reference runtime raise an action.
pub const DEFAULT_ACTION_PROMPT: &str = "send 1 USDC to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

impl Default for Settings {
    fn default() -> Self {
        Self {
            cursor_ttl: None,
            action_prompt: DEFAULT_ACTION_PROMPT.to_owned(),
            rate_limit_probe: None,
            peer_url: None,
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
    /// What is wrong.
    pub errors: Vec<String>,
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
}

/// A deployment and the run's view of it.
pub struct Target {
    base: String,
    http: reqwest::Client,
    /// The tokens this run holds.
    pub tokens: Tokens,
    /// What the run knows of the deployment.
    pub settings: Settings,
    current: Mutex<&'static str>,
    secrets: Mutex<Vec<String>>,
    seen: Mutex<Vec<Seen>>,
    violations: Mutex<Vec<Violation>>,
    /// The statuses answered per operation, keyed by `METHOD template`.
    answered: Mutex<BTreeMap<String, BTreeSet<u16>>>,
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
}

impl Coverage {
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
            settings,
            current: Mutex::new(""),
            secrets: Mutex::default(),
            seen: Mutex::default(),
            violations: Mutex::default(),
            answered: Mutex::default(),
        }
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The HTTP client, for requests that read a stream.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Marks the check whose requests follow.
    pub(crate) fn begin(&self, check: &'static str) {
        *self.current.lock().expect("current check") = check;
    }

    /// A request to `path` (with its query) on the deployment.
    pub fn request(&self, method: Method, path: &str) -> Call<'_> {
        Call {
            target: self,
            method: method.clone(),
            path: path.to_owned(),
            builder: self.http.request(method, format!("{}{path}", self.base)),
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
        })
    }

    /// Remembers a secret value a check sent, so that reports redact it.
    pub fn secret(&self, value: &str) {
        self.secrets.lock().expect("secrets").push(value.to_owned());
    }

    /// The tokens and every secret value sent so far.
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets = self.tokens.secrets();
        secrets.extend(self.secrets.lock().expect("secrets").iter().cloned());
        secrets
    }

    /// Every response seen so far.
    pub fn seen(&self) -> Vec<Seen> {
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
            .map(|operation| Coverage {
                method: operation.method.clone(),
                path: operation.template.clone(),
                statuses: answered
                    .get(&format!("{} {}", operation.method, operation.template))
                    .map(|statuses| statuses.iter().copied().collect())
                    .unwrap_or_default(),
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

    /// Validates a response against openapi.json and keeps it.
    pub fn record(&self, method: &Method, path: &str, status: u16, body: &Value, text: &str) {
        let operation = self.answered(method, path, status);
        let check = *self.current.lock().expect("current check");
        let request = format!("{method} {path}");
        if let Some(operation) = operation {
            let errors = match spec().response(operation, status) {
                Err(undeclared) => vec![undeclared],
                Ok(Some(_)) if body.is_null() => {
                    vec![format!("not a JSON body: {}", excerpt(text))]
                }
                Ok(Some(validator)) => validator.errors(body).iter().map(|e| excerpt(e)).collect(),
                Ok(None) => Vec::new(),
            };
            if !errors.is_empty() {
                self.violations.lock().expect("violations").push(Violation {
                    check,
                    request: request.clone(),
                    status,
                    errors,
                });
            }
        }
        self.seen.lock().expect("seen responses").push(Seen {
            check,
            request,
            status,
            body: body.clone(),
        });
    }
}

/// One request being made ready.
pub struct Call<'a> {
    target: &'a Target,
    method: Method,
    path: String,
    builder: reqwest::RequestBuilder,
}

impl Call<'_> {
    /// Sends `token` as the bearer.
    pub fn bearer(mut self, token: &str) -> Self {
        self.builder = self.builder.bearer_auth(token);
        self
    }

    /// Sends `body` as JSON.
    pub fn json(mut self, body: &Value) -> Self {
        self.builder = self.builder.json(body);
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.builder = self.builder.header(name, value);
        self
    }

    /// Sends the request and returns the response unread, for streams; only its status is
    /// recorded, for the coverage.
    pub async fn open(self) -> Result<reqwest::Response, Finding> {
        let what = format!("{} {}", self.method, self.path);
        let response = self
            .builder
            .send()
            .await
            .map_err(|e| Finding::Error(format!("{what}: {e}")))?;
        let status = response.status().as_u16();
        self.target.answered(&self.method, &self.path, status);
        Ok(response)
    }

    /// Sends the request and reads the whole response; a transport failure is the suite's error.
    pub async fn send(self) -> Result<Reply, Finding> {
        let what = format!("{} {}", self.method, self.path);
        let response = self
            .builder
            .send()
            .await
            .map_err(|e| Finding::Error(format!("{what}: {e}")))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response
            .text()
            .await
            .map_err(|e| Finding::Error(format!("{what}: reading the body: {e}")))?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        self.target
            .record(&self.method, &self.path, status, &body, &text);
        Ok(Reply {
            status,
            headers,
            body,
            text,
        })
    }
}
