//! Tokens. An access token is bound to exactly one resource (part 5), so a program holds one
//! [`TokenSource`] per [`Resource`]. The client's hooks put the source's token on each request
//! as it is sent and, on a 401, renew it once and send the request once more.
//!
//! Sources: [`StaticToken`]; [`CommandToken`], a credential process that prints a token;
//! with the `oauth` feature, `OAuthTokens` from `OAuth::device` (the device flow) or
//! `OAuth::authorize_url` plus `OAuth::exchange_code` (authorization code with PKCE), renewed by
//! refresh-token rotation. A source of your own implements [`TokenSource`].

mod command;
#[cfg(feature = "oauth")]
mod oauth;
#[cfg(feature = "oauth")]
mod store;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use crate::Error;

pub(crate) use command::ACCOUNT_ENV;
pub use command::CommandToken;
#[cfg(feature = "oauth")]
pub use oauth::{AuthorizationStart, DeviceCode, OAuth, OAuthTokens, http};
#[cfg(feature = "oauth")]
pub use store::{FileTokenStore, TokenStore};

pub use crate::resource::Resource;

/// Hands out the access token of one resource.
pub trait TokenSource: Send + Sync + 'static {
    /// The token to send now, renewed first when it is about to expire.
    fn token(&self) -> impl Future<Output = Result<String, Error>> + Send;

    /// `rejected` got a 401: a token other than it (another caller's renewal, or a new one), or
    /// `None` when this source cannot renew.
    fn refresh(&self, rejected: &str)
    -> impl Future<Output = Result<Option<String>, Error>> + Send;
}

/// A shared source: keep a handle on it (to store an OAuth source's refresh token, say)
/// while an [`Intent`](crate::Intent) uses it.
impl<T: TokenSource> TokenSource for Arc<T> {
    fn token(&self) -> impl Future<Output = Result<String, Error>> + Send {
        (**self).token()
    }

    fn refresh(
        &self,
        rejected: &str,
    ) -> impl Future<Output = Result<Option<String>, Error>> + Send {
        (**self).refresh(rejected)
    }
}

/// A token given by the caller; it is never renewed.
#[derive(Debug, Clone)]
pub struct StaticToken(String);

impl StaticToken {
    /// Sends `token` as it is.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }
}

impl TokenSource for StaticToken {
    async fn token(&self) -> Result<String, Error> {
        Ok(self.0.clone())
    }

    async fn refresh(&self, _rejected: &str) -> Result<Option<String>, Error> {
        Ok(None)
    }
}

/// The token sources of a client, by resource: the inner value of the generated
/// [`Client`](crate::raw::Client). The default has none: requests then go out as they are.
#[derive(Clone, Default)]
pub struct Tokens(Option<Arc<Sources>>);

struct Sources {
    /// The path of the base address, stripped from request paths to find their resource.
    base_path: String,
    by_resource: HashMap<Resource, Arc<dyn DynSource>>,
}

impl Tokens {
    pub(crate) fn new(
        base: &reqwest::Url,
        by_resource: HashMap<Resource, Arc<dyn DynSource>>,
    ) -> Self {
        Self(Some(Arc::new(Sources {
            base_path: base.path().trim_end_matches('/').to_owned(),
            by_resource,
        })))
    }

    /// The source for a request to `url`: `Ok(None)` for a path of no resource, or without any
    /// sources (the default: requests go as they are); `Err(resource)` when its resource has
    /// none.
    pub(crate) fn source_for(
        &self,
        url: &reqwest::Url,
    ) -> Result<Option<&dyn DynSource>, Resource> {
        let Some(sources) = self.0.as_deref() else {
            return Ok(None);
        };
        let path = url.path();
        let below = path.strip_prefix(&sources.base_path).unwrap_or(path);
        let Some(resource) = Resource::of_path(below) else {
            return Ok(None);
        };
        match sources.by_resource.get(&resource) {
            Some(source) => Ok(Some(&**source)),
            None => Err(resource),
        }
    }
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut resources: Vec<_> = self
            .0
            .iter()
            .flat_map(|sources| sources.by_resource.keys())
            .collect();
        resources.sort_by_key(|resource| resource.path());
        f.debug_tuple("Tokens").field(&resources).finish()
    }
}

/// [`TokenSource`] behind a pointer: the trait's futures, boxed.
pub(crate) trait DynSource: Send + Sync {
    fn token(&self) -> BoxFuture<'_, Result<String, Error>>;
    fn refresh<'a>(&'a self, rejected: &'a str) -> BoxFuture<'a, Result<Option<String>, Error>>;
}

impl<T: TokenSource> DynSource for T {
    fn token(&self) -> BoxFuture<'_, Result<String, Error>> {
        Box::pin(TokenSource::token(self))
    }

    fn refresh<'a>(&'a self, rejected: &'a str) -> BoxFuture<'a, Result<Option<String>, Error>> {
        Box::pin(TokenSource::refresh(self, rejected))
    }
}

/// Renew a token once a fifth of its lifetime is left, and at most this long before it expires.
const RENEW_MARGIN: Duration = Duration::from_secs(30);

/// A token, when to renew it and when it expires.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    secret: String,
    renew_at: Option<Instant>,
    expires_at: Option<Instant>,
}

impl Held {
    /// `secret`, which expires `lifetime` from now when that is known.
    pub(crate) fn new(secret: String, lifetime: Option<Duration>) -> Self {
        let now = Instant::now();
        let renew_at = lifetime.map(|lifetime| {
            let margin = (lifetime / 5).min(RENEW_MARGIN);
            now + lifetime.saturating_sub(margin)
        });
        let expires_at = lifetime.map(|lifetime| now + lifetime);
        Self {
            secret,
            renew_at,
            expires_at,
        }
    }

    fn fresh(&self) -> bool {
        self.renew_at.is_none_or(|at| Instant::now() < at)
    }

    fn valid(&self) -> bool {
        self.expires_at.is_none_or(|at| Instant::now() < at)
    }
}

/// The current token of a source, renewed by one caller at a time.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    held: Mutex<Option<Held>>,
    renewing: tokio::sync::Mutex<()>,
}

impl Slot {
    /// A slot holding `held`.
    #[cfg(any(test, feature = "oauth"))]
    pub(crate) fn holding(held: Held) -> Self {
        Self {
            held: Mutex::new(Some(held)),
            renewing: Default::default(),
        }
    }

    fn current(&self) -> Option<Held> {
        self.held
            .lock()
            .expect("the token lock is not poisoned")
            .clone()
    }

    fn keep(&self, held: Held) -> String {
        let secret = held.secret.clone();
        *self.held.lock().expect("the token lock is not poisoned") = Some(held);
        secret
    }

    /// The held token while it is fresh; otherwise `renew`'s, or the held one when `renew` has
    /// none, or fails while the held one has not expired yet (the next call tries again).
    pub(crate) async fn token<F, Fut>(&self, renew: F) -> Result<String, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<Held>, Error>>,
    {
        if let Some(held) = self.current().filter(Held::fresh) {
            return Ok(held.secret);
        }
        let _one_at_a_time = self.renewing.lock().await;
        let current = self.current();
        if let Some(held) = current.as_ref().filter(|held| held.fresh()) {
            return Ok(held.secret.clone());
        }
        match (renew().await, current) {
            (Ok(Some(fresh)), _) => Ok(self.keep(fresh)),
            (Ok(None), Some(stale)) => Ok(stale.secret),
            (Err(_), Some(held)) if held.valid() => Ok(held.secret),
            (Ok(None), None) => Err(Error::Token("the source has no token".to_owned())),
            (Err(error), _) => Err(error),
        }
    }

    /// A token other than `rejected`: one renewed meanwhile by another caller, or `renew`'s.
    pub(crate) async fn replace<F, Fut>(
        &self,
        rejected: &str,
        renew: F,
    ) -> Result<Option<String>, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<Held>, Error>>,
    {
        let _one_at_a_time = self.renewing.lock().await;
        if let Some(held) = self.current().filter(|held| held.secret != rejected) {
            return Ok(Some(held.secret));
        }
        Ok(renew().await?.map(|fresh| self.keep(fresh)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use intent_models::Scope;

    use super::*;

    #[test]
    fn each_resource_is_one_openapi_json_declares_and_mcp_tokens_carry_their_tools_scopes() {
        let mut ours: Vec<&str> = Resource::ALL.iter().map(|r| r.name()).collect();
        let mut declared: Vec<&str> = intent_models::RESOURCES.iter().map(|r| r.name).collect();
        ours.sort_unstable();
        declared.sort_unstable();
        assert_eq!(ours, declared);
        assert_eq!(
            Resource::Agent.scopes(),
            [
                Scope::AgentActionsResolve.as_str(),
                Scope::AgentRead.as_str(),
                Scope::AgentWrite.as_str()
            ]
        );
        assert!(Resource::AgentMcp.owns_scope(Scope::AgentRead.as_str()));
        assert!(Resource::AgentMcp.owns_scope(Scope::McpAgent.as_str()));
        assert!(!Resource::Agent.owns_scope(Scope::McpAgent.as_str()));
        assert!(Resource::Pipeline.owns_scope(Scope::CustodyDelegate.as_str()));
        assert!(Resource::Account.owns_scope("payments:submit"));
    }

    #[test]
    fn request_paths_find_their_resource() {
        let cases = [
            ("/v1/agent/sessions/s", Some(Resource::Agent)),
            ("/v1/agent/mcp", Some(Resource::AgentMcp)),
            ("/v1/agent/mcpx", Some(Resource::Agent)),
            ("/v1/pipeline/mcp/x", Some(Resource::PipelineMcp)),
            ("/v1/pipeline/evm/build", Some(Resource::Pipeline)),
            ("/v1/account/statement", Some(Resource::Account)),
            ("/v1/agentx", None),
            ("/api/auth/oauth2/token", None),
        ];
        for (path, resource) in cases {
            assert_eq!(Resource::of_path(path), resource, "{path}");
        }
    }

    #[test]
    fn a_base_path_stem_is_stripped_before_the_resource_is_found() {
        let base = reqwest::Url::parse("https://example.test/api/").unwrap();
        let agent: Arc<dyn DynSource> = Arc::new(StaticToken::new("a"));
        let tokens = Tokens::new(&base, HashMap::from([(Resource::Agent, agent)]));
        let url = |path: &str| reqwest::Url::parse(&format!("https://example.test{path}")).unwrap();
        assert!(matches!(
            tokens.source_for(&url("/api/v1/agent/chat")),
            Ok(Some(_))
        ));
        assert!(matches!(
            tokens.source_for(&url("/api/v1/pipeline/apps")),
            Err(Resource::Pipeline)
        ));
        assert!(matches!(
            tokens.source_for(&url("/api/.well-known/x")),
            Ok(None)
        ));
        assert!(matches!(
            Tokens::default().source_for(&url("/api/v1/agent/chat")),
            Ok(None)
        ));
    }

    /// Renewals counted, each giving a token that lives 10 s.
    async fn renew(count: &AtomicU32) -> Result<Option<Held>, Error> {
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(Some(Held::new(
            format!("t{n}"),
            Some(Duration::from_secs(10)),
        )))
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_is_renewed_ahead_of_its_expiry_and_not_before() {
        let count = AtomicU32::new(0);
        let slot = Slot::default();
        assert_eq!(slot.token(|| renew(&count)).await.unwrap(), "t1");
        // A fifth of 10 s is 2 s: the token is kept until 8 s have passed.
        tokio::time::advance(Duration::from_millis(7_999)).await;
        assert_eq!(slot.token(|| renew(&count)).await.unwrap(), "t1");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(slot.token(|| renew(&count)).await.unwrap(), "t2");
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn long_lived_tokens_are_renewed_thirty_seconds_before_expiry() {
        let held = Held::new("t".to_owned(), Some(Duration::from_secs(3600)));
        tokio::time::advance(Duration::from_secs(3569)).await;
        assert!(held.fresh());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!held.fresh());
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_rejections_of_one_token_renew_it_once() {
        let count = AtomicU32::new(0);
        let slot = Slot::holding(Held::new("t0".to_owned(), None));
        let (a, b) = tokio::join!(
            slot.replace("t0", || renew(&count)),
            slot.replace("t0", || renew(&count))
        );
        assert_eq!(
            (a.unwrap(), b.unwrap()),
            (Some("t1".into()), Some("t1".into()))
        );
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_renewal_keeps_the_token_until_it_expires_and_then_fails() {
        let slot = Slot::holding(Held::new("t".to_owned(), Some(Duration::from_secs(10))));
        let failing = || async { Err(Error::Token("the program failed".to_owned())) };
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(
            slot.token(failing).await.unwrap(),
            "t",
            "still valid for 1 s"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let error = slot.token(failing).await.unwrap_err();
        assert!(matches!(error, Error::Token(_)), "{error:?}");
    }

    #[tokio::test]
    async fn a_source_that_cannot_renew_keeps_its_stale_token() {
        let slot = Slot::holding(Held::new("old".to_owned(), Some(Duration::ZERO)));
        let none = || async { Ok(None) };
        assert_eq!(slot.token(none).await.unwrap(), "old");
        assert_eq!(slot.replace("old", none).await.unwrap(), None);
    }
}
