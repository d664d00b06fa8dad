//! [`Intent`]: one client for a deployment's three resources, with one connection pool and one
//! token source per resource.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::account::Account;
use crate::agent::Agent;
#[cfg(feature = "oauth")]
use crate::auth::{DeviceCode, OAuth};
use crate::auth::{DynSource, Resource, TokenSource, Tokens};
use crate::pipeline::Pipeline;
use crate::raw::{Client, ClientContext};
use crate::{Error, RetryPolicy};

/// The deployment at a base address, called with a token per resource. It is cheap to clone
/// and `Send + Sync`: tasks share one, and with it one connection pool and one renewal of each
/// token.
///
/// ```no_run
/// # async fn run() -> Result<(), intent_sdk::Error> {
/// use intent_sdk::Intent;
/// use intent_sdk::auth::{Resource, StaticToken};
/// let intent = Intent::builder("http://127.0.0.1:8080")
///     .token(Resource::Agent, StaticToken::new("eyJ..."))
///     .build()?;
/// let outcome = intent.agent().run_turn("hello", None).await?;
/// println!("{} is {}", outcome.turn_id, outcome.state);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Intent {
    client: Client,
}

/// Sets up an [`Intent`]: its base address, its token sources, its HTTP client, how it retries
/// and how long it waits.
pub struct IntentBuilder {
    base: String,
    sources: HashMap<Resource, Arc<dyn DynSource>>,
    http: Option<reqwest::Client>,
    context: ClientContext,
}

/// Connect within this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Wait this long for the next bytes of a response: longer than a long-poll (30 s at most).
const READ_TIMEOUT: Duration = Duration::from_secs(60);

impl IntentBuilder {
    /// Sends `source`'s tokens with every request to `resource`.
    pub fn token(mut self, resource: Resource, source: impl TokenSource) -> Self {
        self.sources.insert(resource, Arc::new(source));
        self
    }

    /// Sends requests through `http` instead of a client made here (whose user agent is
    /// `intent-sdk/<version>`, with a 10 s connect timeout and a 60 s read timeout). A timeout
    /// of `http` must outlast a long-poll (30 s) and must not cut SSE streams.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Retries calls by `policy` ([`RetryPolicy::default`] unless set).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.context.retry = policy;
        self
    }

    /// Gives up on one sending of a call after `timeout` (a long-poll gets its `wait` more; a
    /// stream has none). Without it, only the HTTP client's timeouts apply.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.context.timeout = Some(timeout);
        self
    }

    /// Gives up on [`run_turn`](crate::agent::Agent::run_turn) and
    /// [`wait_turn`](crate::agent::Agent::wait_turn) after `deadline` (5 minutes unless set), with
    /// [`Error::Deadline`].
    pub fn turn_deadline(mut self, deadline: Duration) -> Self {
        self.context.turn_deadline = deadline;
        self
    }

    /// The client; fails on a base address that is not an absolute URL.
    pub fn build(self) -> Result<Intent, Error> {
        let base = self.base.trim_end_matches('/');
        let url = reqwest::Url::parse(base)
            .map_err(|e| Error::InvalidInput(format!("the base address {base:?}: {e}")))?;
        let http = match self.http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .user_agent(concat!("intent-sdk/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(CONNECT_TIMEOUT)
                .read_timeout(READ_TIMEOUT)
                .build()
                .map_err(Error::Transport)?,
        };
        let context = ClientContext {
            tokens: Tokens::new(&url, self.sources),
            ..self.context
        };
        Ok(Intent {
            client: Client::new_with_client(base, http, context),
        })
    }
}

/// A device login the person is asked to approve: the `step`th code of `of`.
#[cfg(feature = "oauth")]
#[derive(Debug, Clone)]
pub struct DeviceLogin {
    /// The resource this code logs in to.
    pub resource: Resource,
    /// Where to go and what to type.
    pub code: DeviceCode,
    /// This code's number, from 1.
    pub step: usize,
    /// How many codes the login asks for: one per resource.
    pub of: usize,
}

/// The environment variables [`Intent::from_env`] reads.
const BASE_URL_ENV: &str = "INTENT_BASE_URL";
/// A token sent to every resource (see [`Intent::from_env`]).
const TOKEN_ENV: &str = "INTENT_TOKEN";
/// A command that prints a token for `INTENT_RESOURCE` (see [`Intent::from_env`]).
const TOKEN_COMMAND_ENV: &str = "INTENT_TOKEN_COMMAND";
/// The account the token command is asked for, `primary` unless set.
const PRIMARY: &str = "primary";

impl Intent {
    /// A client set up from the environment: the deployment at `INTENT_BASE_URL`, with a token
    /// for each resource from `INTENT_TOKEN_COMMAND` ([`CommandToken::shell`]: run through
    /// `sh -c` with `INTENT_RESOURCE`, `INTENT_SCOPE` and `INTENT_ACCOUNT`, as the conformance
    /// suite's `--token-command`; the account is `INTENT_ACCOUNT`'s value, `primary` when
    /// unset; the last line it prints is the token), or else `INTENT_TOKEN` (one token, sent to
    /// every resource). Without either, every call is [`Error::NoToken`].
    ///
    /// [`CommandToken::shell`]: crate::auth::CommandToken::shell
    pub fn from_env() -> Result<Intent, Error> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Intent::from_env`] with the variables `var` gives.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Intent, Error> {
        let base = var(BASE_URL_ENV)
            .ok_or_else(|| Error::InvalidInput(format!("{BASE_URL_ENV} is not set")))?;
        let mut builder = Intent::builder(base.clone());
        let account = var(crate::auth::ACCOUNT_ENV).unwrap_or_else(|| PRIMARY.to_owned());
        for resource in Resource::ALL {
            if let Some(command) = var(TOKEN_COMMAND_ENV) {
                let source = crate::auth::CommandToken::shell(&command, &base, resource, &account);
                builder = builder.token(resource, source);
            } else if let Some(token) = var(TOKEN_ENV) {
                builder = builder.token(resource, crate::auth::StaticToken::new(token));
            }
        }
        builder.build()
    }

    /// Starts setting up a client of the deployment at `base` (such as
    /// `https://api.example.com`; a path stem is kept).
    pub fn builder(base: impl Into<String>) -> IntentBuilder {
        IntentBuilder {
            base: base.into(),
            sources: HashMap::new(),
            http: None,
            context: ClientContext::default(),
        }
    }

    /// Logs in with the device flow as OAuth client `client_id`: one device authorization per
    /// resource (a token is bound to one resource), each with the `scopes` of that resource.
    /// `show` gets each code with its number and the count, to tell the person how many they
    /// will approve. The tokens renew by refresh-token rotation. Needs the `oauth` feature.
    #[cfg(feature = "oauth")]
    pub async fn login_device(
        base: &str,
        client_id: &str,
        resources: &[Resource],
        scopes: &[&str],
        mut show: impl FnMut(&DeviceLogin),
    ) -> Result<Intent, Error> {
        let oauth = OAuth::new(base, client_id);
        let mut builder = Intent::builder(base);
        for (index, &resource) in resources.iter().enumerate() {
            let own: Vec<&str> = scopes
                .iter()
                .copied()
                .filter(|scope| resource.owns_scope(scope))
                .collect();
            let tokens = oauth
                .device(&resource.identifier(base), &own, |code| {
                    show(&DeviceLogin {
                        resource,
                        code: code.clone(),
                        step: index + 1,
                        of: resources.len(),
                    })
                })
                .await?;
            builder = builder.token(resource, tokens);
        }
        builder.build()
    }

    /// The Agent resource.
    pub fn agent(&self) -> Agent<'static> {
        Agent {
            client: self.client.clone(),
            borrows: PhantomData,
        }
    }

    /// The Pipeline resource.
    pub fn pipeline(&self) -> Pipeline<'static> {
        Pipeline {
            client: self.client.clone(),
            borrows: PhantomData,
        }
    }

    /// The Account resource.
    pub fn account(&self) -> Account<'static> {
        Account {
            client: self.client.clone(),
            borrows: PhantomData,
        }
    }

    /// The generated client, for anything the handles do not cover; its requests carry the
    /// same tokens.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_shareable<T: Clone + Send + Sync + 'static>() {}

    #[tokio::test]
    async fn a_resource_without_a_token_source_is_no_token_and_nothing_is_sent() {
        // Nothing listens on port 9: a request that went out would be a transport error.
        let vars = |name: &str| (name == BASE_URL_ENV).then(|| "http://127.0.0.1:9".to_owned());
        let intent = Intent::from_vars(vars).unwrap();
        let error = intent.account().statement(None).await.unwrap_err();
        assert!(
            matches!(error, Error::NoToken(Resource::Account)),
            "{error:?}"
        );
        let agent_only = Intent::builder("http://127.0.0.1:9")
            .token(Resource::Agent, crate::auth::StaticToken::new("t"))
            .retry(RetryPolicy::none())
            .build()
            .unwrap();
        let error = agent_only.pipeline().apps().await.unwrap_err();
        assert!(
            matches!(error, Error::NoToken(Resource::Pipeline)),
            "{error:?}"
        );
        let sent = agent_only.agent().session("ses_1").await.unwrap_err();
        assert!(matches!(sent, Error::Transport(_)), "{sent:?}");
    }

    #[tokio::test]
    async fn from_env_runs_the_token_command_with_the_resource_in_its_environment() {
        let vars = |name: &str| match name {
            BASE_URL_ENV => Some("http://127.0.0.1:9/api".to_owned()),
            TOKEN_COMMAND_ENV => Some(
                "echo \"tok-$INTENT_ACCOUNT-$INTENT_RESOURCE-$INTENT_SCOPE\" | tr '/: ' '___'"
                    .to_owned(),
            ),
            TOKEN_ENV => Some("ignored".to_owned()),
            _ => None,
        };
        let intent = Intent::from_vars(vars).unwrap();
        let url = reqwest::Url::parse("http://127.0.0.1:9/api/v1/pipeline/apps").unwrap();
        let source = intent
            .client
            .inner
            .tokens
            .source_for(&url)
            .unwrap()
            .expect("a source for the pipeline");
        assert_eq!(
            source.token().await.unwrap(),
            "tok-primary-http___127.0.0.1_9_api_v1_pipeline-custody_delegate_pipeline_catalog_pipeline_execute"
        );
        assert!(matches!(
            Intent::from_vars(|_| None),
            Err(Error::InvalidInput(_))
        ));
    }

    #[test]
    fn an_intent_is_shared_between_tasks() {
        assert_shareable::<Intent>();
    }

    #[test]
    fn a_base_address_that_is_not_a_url_is_refused() {
        let error = Intent::builder("127.0.0.1:8080/x y").build().unwrap_err();
        assert!(matches!(error, Error::InvalidInput(_)), "{error:?}");
    }
}
