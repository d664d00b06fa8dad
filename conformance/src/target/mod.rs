//! The deployment under test: its address, the tokens the run holds (`credentials.rs`), the
//! requests the checks make (`call.rs`) and what the run records of the answers (`record.rs`).

mod call;
mod credentials;
mod record;
mod stream;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;

pub use call::{Call, RETRY_AFTER_BUDGET, Reply};
pub use credentials::{
    ACCOUNT_SCOPES, AGENT_SCOPES, Account, Mint, PIPELINE_SCOPES, Role, TokenRequest, TokenSource,
    Tokens,
};
pub(crate) use record::checking;
pub use record::{BrokenBody, CleanUp, Coverage, Seen};
pub(crate) use stream::Reader;

use crate::finding::Finding;
use crate::inputs::Inputs;
use crate::spec::spec;
use credentials::run_token_command;
use record::Record;

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

impl Settings {
    /// Whether a cursor got by a request sent at `asked` may have outlived the deployment's
    /// cursor lifetime, so that a 410 to it is an expired cursor (part 7), not a failure.
    pub(crate) fn cursor_outlived(&self, asked: std::time::Instant) -> bool {
        self.cursor_ttl.is_some_and(|ttl| asked.elapsed() >= ttl)
    }
}

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
    record: Record,
}

impl Target {
    /// A deployment at `base` (such as `https://staging.example.com`).
    pub fn new(base: &str, tokens: Tokens, settings: Settings) -> Self {
        // An answer is judged where it is given: a redirect (an OAuth authorization endpoint's,
        // above all) is the answer, never followed to an address the suite made up.
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(45))
            .redirect(reqwest::redirect::Policy::none())
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
            record: Record::default(),
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
        match self.tokens.get(role) {
            Some(token) => Ok(token.to_owned()),
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
        let given = Role::all()
            .iter()
            .find(|role| &role.request() == request)
            .and_then(|role| self.tokens.get(*role));
        if let Some(token) = given {
            return Ok(token.to_owned());
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
        Call::new(self, method, &self.base, path)
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
        Ok(Call::new(self, method, self.peer()?, path))
    }

    /// Remembers a secret value a check sent, so that reports redact it.
    pub fn secret(&self, value: &str) {
        self.secrets.lock().expect("secrets").push(value.to_owned());
    }

    /// Whether `value` is one of the run's tokens or a secret value it sent.
    pub fn is_secret(&self, value: &str) -> bool {
        self.tokens.secrets().iter().any(|token| token == value)
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
        self.record.seen()
    }

    /// Notes whether a poll of a turn's log `read` its state where `profile.turnState` says,
    /// and whether the turn timeout has `timed_out`; whether the means is refused on this
    /// deployment: a whole turn timeout passed without a state, and no turn's state was read
    /// before.
    pub(crate) fn turn_state_refused(&self, read: bool, timed_out: bool) -> bool {
        self.record.turn_state_refused(read, timed_out)
    }

    /// Every schema violation found so far.
    pub fn violations(&self) -> Vec<BrokenBody> {
        self.record.violations()
    }

    /// Every operation of openapi.json, in its order, with the statuses answered so far.
    pub fn coverage(&self) -> Vec<Coverage> {
        self.record.coverage()
    }

    /// Notes that the run made what `path` deletes (a credential saved through
    /// `profile.credential`), with `token`, for the clean-up.
    pub(crate) fn made(&self, path: &str, token: &str) {
        self.record.made(path.to_owned(), token.to_owned());
    }

    /// Deletes everything the run made and did not delete (credentials, then apps, then
    /// sessions), each with the token that made it: what the deployment removed, and what it
    /// did not (with the status).
    pub async fn clean_up(&self) -> CleanUp {
        let mut clean_up = CleanUp::default();
        for (path, token) in self.record.take_made() {
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
}
