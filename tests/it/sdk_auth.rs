//! The SDK's token sources against the reference server's authorization server: the device
//! flow, authorization code with PKCE, refresh with rotation, and one refresh and retry on 401.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use intent_models::ChatStartRequest;
use intent_sdk::auth::{Authed, OAuth, StaticToken, TokenSource};
use intent_server::resource::Resource;
use intent_tests::{TEST_CLIENT, TEST_REDIRECT_URI, TestServer};

use crate::oauth::{decide, param, redirect_query};

fn hello() -> ChatStartRequest {
    ChatStartRequest {
        message: "hello".parse().unwrap(),
        session_id: None,
    }
}

async fn start_chat<S: TokenSource>(agent: &Authed<S>) -> Result<String, intent_sdk::Error> {
    agent
        .call(|client| async move { client.start_chat(&hello()).await })
        .await
        .map(|started| started.session_id)
}

#[tokio::test]
async fn the_device_flow_logs_in_and_the_token_reaches_the_agent() {
    let server = TestServer::start().await;
    let resource = Resource::Agent.identifier(&server.base);
    let base = server.base.clone();
    let tokens = OAuth::new(&server.base, "intent-cli")
        .device(&resource, &["agent:write"], move |code| {
            assert!(code.verification_uri.ends_with("/api/auth/device"));
            let user_code = code.user_code.clone();
            tokio::spawn(async move { decide(&base, &user_code, "approve").await });
        })
        .await
        .unwrap();
    let agent = Authed::new(&server.base, Arc::new(tokens));
    assert!(start_chat(&agent).await.unwrap().starts_with("ses_"));
}

#[tokio::test]
async fn authorization_code_with_pkce_then_refresh_with_rotation() {
    let server =
        TestServer::start_with(|config| config.access_token_ttl(Duration::from_secs(1))).await;
    let resource = Resource::Agent.identifier(&server.base);
    let oauth = OAuth::new(&server.base, TEST_CLIENT);
    let start = oauth
        .authorize_url(&resource, &["agent:write"], TEST_REDIRECT_URI)
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
    let tokens = Arc::new(
        oauth
            .exchange_code(code, start.verifier, &resource, TEST_REDIRECT_URI)
            .await
            .unwrap(),
    );
    let first_refresh = tokens.refresh_token().unwrap();
    let agent = Authed::new(&server.base, tokens.clone());
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

    async fn refresh(&self) -> Result<Option<String>, intent_sdk::Error> {
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
    let agent = Authed::new(&server.base, source.clone());
    start_chat(&agent).await.unwrap();
    assert_eq!(source.refreshes.load(Ordering::SeqCst), 1);
    start_chat(&agent).await.unwrap();
    assert_eq!(
        source.refreshes.load(Ordering::SeqCst),
        1,
        "no refresh while the token works"
    );

    // A static token cannot refresh: the 401 comes back typed.
    let fixed = Authed::new(&server.base, Arc::new(StaticToken("stale".into())));
    let error = start_chat(&fixed).await.unwrap_err();
    assert!(
        matches!(error, intent_sdk::Error::Unauthorized(_)),
        "{error:?}"
    );
}

#[tokio::test]
async fn account_calls_go_through_the_same_typed_layer() {
    let server = TestServer::start().await;
    let token = server.token(
        "alice",
        Resource::Account,
        &[
            "account:apps:write",
            "account:credentials:write",
            "account:usage:read",
        ],
    );
    let account = Authed::new(&server.base, Arc::new(StaticToken(token)));
    let app = std::num::NonZeroU64::new(1).unwrap();
    // The price-feeds app needs its API key first: the error comes back typed.
    let missing = account
        .call(|client| async move { client.install_app(app).await })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Some("credentials_missing"));
    let name: intent_sdk::types::SaveCredentialName = "API_KEY".parse().unwrap();
    let saved = account
        .call(|client| {
            let name = name.clone();
            async move {
                let value = intent_models::CredentialValue {
                    value: "secret".parse().unwrap(),
                };
                client.save_credential(app, &name, &value).await
            }
        })
        .await
        .unwrap();
    assert!(saved.present);
    let installed = account
        .call(|client| async move { client.install_app(app).await })
        .await
        .unwrap();
    assert!(installed.installed);
    let statement = account
        .call(|client| async move { client.get_statement(None).await })
        .await
        .unwrap();
    assert_eq!(statement.lines.len(), 4);
}
