//! The SDK's token sources against the reference server's authorization server: the device
//! flow (one code per resource), authorization code with PKCE, refresh with rotation, and one
//! renewal and retry on 401, all through one `Intent`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use intent_models::ChatStartRequest;
use intent_sdk::auth::{FileTokenStore, OAuth, Resource, StaticToken, TokenSource, TokenStore};
use intent_sdk::{Intent, RetryPolicy};
use intent_tests::{TEST_CLIENT, TEST_REDIRECT_URI, TestServer};

use crate::oauth::{decide, param, redirect_query};

fn hello() -> ChatStartRequest {
    ChatStartRequest::builder()
        .message("hello")
        .try_into()
        .unwrap()
}

async fn start_chat(intent: &Intent) -> Result<String, intent_sdk::Error> {
    let started = intent.agent().start(&hello()).await?;
    Ok(started.session_id)
}

/// An `Intent` of `server` with `source` for the Agent.
fn with_agent(server: &TestServer, source: impl TokenSource) -> Intent {
    Intent::builder(server.base_url())
        .token(Resource::Agent, source)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_device_login_asks_one_code_per_resource_and_each_token_reaches_its_resource() {
    let server = TestServer::start().await;
    let base = server.base_url().to_owned();
    let mut shown = Vec::new();
    let intent = Intent::login_device(
        server.base_url(),
        "intent-cli",
        &[Resource::Agent, Resource::Account],
        &["agent:write", "account:usage:read"],
        |login| {
            assert!(login.code.verification_uri.ends_with("/api/auth/device"));
            shown.push((login.resource, login.step, login.of));
            let (base, user_code) = (base.clone(), login.code.user_code.clone());
            tokio::spawn(async move { decide(&base, &user_code, "approve").await });
        },
    )
    .await
    .unwrap();
    assert_eq!(shown, [(Resource::Agent, 1, 2), (Resource::Account, 2, 2)]);
    assert!(start_chat(&intent).await.unwrap().starts_with("ses_"));
    intent.account().statement(None).await.unwrap();
}

/// Needs 2.2 s: access tokens live 1 s here, and each 1.1 s wait lets one lapse, so that the
/// next call refreshes and the refresh token rotates.
#[tokio::test]
async fn authorization_code_with_pkce_then_refresh_with_rotation() {
    let server =
        TestServer::start_with(|config| config.access_token_ttl(Duration::from_secs(1))).await;
    let resource = Resource::Agent.identifier(server.base_url());
    let oauth = OAuth::new(server.base_url(), TEST_CLIENT);
    let tokens = Arc::new(logged_in(&oauth, &resource).await);
    let first_refresh = tokens.refresh_token().unwrap();
    let agent = with_agent(&server, tokens.clone());
    start_chat(&agent).await.unwrap();
    // The access token lives a second: the next call refreshes, and the refresh token rotates.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    start_chat(&agent).await.unwrap();
    let second_refresh = tokens.refresh_token().unwrap();
    assert_ne!(first_refresh, second_refresh);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    start_chat(&agent).await.unwrap();
    assert_ne!(tokens.refresh_token().unwrap(), second_refresh);
}

/// Tokens for `resource` by the authorization code with PKCE, approved as alice.
async fn logged_in(oauth: &OAuth, resource: &str) -> intent_sdk::auth::OAuthTokens {
    let start = oauth
        .authorize_url(resource, &["agent:write"], TEST_REDIRECT_URI)
        .unwrap();
    let url = reqwest::Url::parse(&start.url).unwrap();
    let mut form: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    form.push(("account".into(), "alice".into()));
    form.push(("decision".into(), "approve".into()));
    let decided = intent_tests::submit_page(url.as_str(), url.as_str(), &form).await;
    let query = redirect_query(&decided);
    assert_eq!(param(&query, "state"), Some(start.state.secret().as_str()));
    let code = param(&query, "code").unwrap();
    oauth
        .exchange_code(code, start.verifier, resource, TEST_REDIRECT_URI)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_stored_refresh_token_starts_the_next_run_and_each_rotation_is_stored() {
    let server =
        TestServer::start_with(|config| config.access_token_ttl(Duration::from_secs(1))).await;
    let resource = Resource::Agent.identifier(server.base_url());
    let oauth = OAuth::new(server.base_url(), TEST_CLIENT);
    let dir = tempfile::tempdir().unwrap();
    let store = || FileTokenStore::new(dir.path());
    let key = oauth.store_key(&resource);
    assert!(oauth.from_store(&resource, store()).unwrap().is_none());
    let first_run = logged_in(&oauth, &resource).await.stored(store()).unwrap();
    let first_refresh = first_run.refresh_token().unwrap();
    assert_eq!(store().load(&key).unwrap(), Some(first_refresh.clone()));
    drop(first_run);
    // The next run: no login, the stored refresh token gets the first access token.
    let next_run = Arc::new(oauth.from_store(&resource, store()).unwrap().unwrap());
    start_chat(&with_agent(&server, next_run.clone()))
        .await
        .unwrap();
    let rotated = store().load(&key).unwrap().unwrap();
    assert_ne!(
        rotated, first_refresh,
        "the rotated refresh token is stored"
    );
    assert_eq!(next_run.refresh_token(), Some(rotated));
}

/// A source whose first token is refused; its refresh mints a good one.
struct Stale {
    good: String,
    refreshes: AtomicUsize,
}

impl TokenSource for Stale {
    async fn token(&self) -> Result<String, intent_sdk::Error> {
        Ok(if self.refreshes.load(Ordering::SeqCst) == 0 {
            "stale".to_owned()
        } else {
            self.good.clone()
        })
    }

    async fn refresh(&self, _rejected: &str) -> Result<Option<String>, intent_sdk::Error> {
        self.refreshes.fetch_add(1, Ordering::SeqCst);
        Ok(Some(self.good.clone()))
    }
}

#[tokio::test]
async fn a_401_refreshes_once_and_retries_once() {
    let server = TestServer::start().await;
    let good = server.token("alice", Resource::Agent, &["agent:write"]);
    let source = Arc::new(Stale {
        good,
        refreshes: AtomicUsize::new(0),
    });
    let agent = with_agent(&server, source.clone());
    start_chat(&agent).await.unwrap();
    assert_eq!(source.refreshes.load(Ordering::SeqCst), 1);
    start_chat(&agent).await.unwrap();
    assert_eq!(
        source.refreshes.load(Ordering::SeqCst),
        1,
        "no refresh while the token works"
    );

    // Renewing a rejected token is not a retry: a client that retries nothing still renews.
    let source = Arc::new(Stale {
        good: server.token("alice", Resource::Agent, &["agent:write"]),
        refreshes: AtomicUsize::new(0),
    });
    let once = Intent::builder(server.base_url())
        .token(Resource::Agent, source.clone())
        .retry(RetryPolicy::none())
        .build()
        .unwrap();
    start_chat(&once).await.unwrap();
    assert_eq!(source.refreshes.load(Ordering::SeqCst), 1);

    // A static token cannot refresh: the 401 comes back typed.
    let fixed = with_agent(&server, StaticToken::new("stale"));
    let error = start_chat(&fixed).await.unwrap_err();
    assert!(
        matches!(error, intent_sdk::Error::Unauthorized(_)),
        "{error:?}"
    );
}

#[tokio::test]
async fn account_calls_go_through_the_account_handle_with_typed_errors() {
    let server = TestServer::start().await;
    let account = server.intent("alice");
    let account = account.account();
    let app = std::num::NonZeroU64::new(1).unwrap();
    // The price-feeds app needs its API key first: the error comes back typed.
    let missing = account.install(app).await.unwrap_err();
    assert_eq!(missing.code(), Some("credentials_missing"));
    let value: intent_models::CredentialValue = intent_models::CredentialValue::builder()
        .value("secret")
        .try_into()
        .unwrap();
    let saved = account
        .save_credential(app, "API_KEY", &value)
        .await
        .unwrap();
    assert!(saved.present);
    assert!(account.install(app).await.unwrap().installed);
    let statement = account.statement(None).await.unwrap();
    assert_eq!(statement.lines.len(), 4);
    let error = account.statement(Some("2026-13")).await.unwrap_err();
    assert!(
        matches!(error, intent_sdk::Error::InvalidInput(_)),
        "{error:?}"
    );
}
