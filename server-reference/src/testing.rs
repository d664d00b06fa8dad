//! A test kit (feature `testing`): the real reference server in process, on a free loopback
//! port with its own data dir, for an app's CI contract tests instead of mocks.
//!
//! An app's integration test, say `tests/turns.rs`, with `intent-server` as a dev-dependency
//! with `features = ["testing"]`:
//!
//! ```
//! use intent_server::testing::TestServer;
//! use intent_sdk::models::TurnState;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // #[tokio::test] async fn a_greeting_completes_its_turn() {
//! let server = TestServer::start().await;
//! let intent = server.intent("alice");
//! let outcome = intent.agent().run_turn("hello", None).await.unwrap();
//! assert_eq!(outcome.state, TurnState::Complete);
//! let apps = intent.pipeline().apps().await.unwrap();
//! assert!(!apps.apps.is_empty());
//! # }
//! ```

use std::time::Duration;

use intent_sdk::Intent;
use intent_sdk::auth::StaticToken;

use crate::AppState;
use crate::config::{Config, OAuthClient};
use crate::resource::Resource;
use crate::token::Grant;

/// The OAuth client every test server registers.
pub const TEST_CLIENT: &str = "intent-tests";

/// The one redirect URI of [`TEST_CLIENT`]; nothing listens there, tests read the redirect.
pub const TEST_REDIRECT_URI: &str = "http://127.0.0.1:9/callback";

/// How long the kit's tokens live.
const TOKEN_TTL: Duration = Duration::from_secs(3600);

/// A reference server on a free loopback port, with its own data dir, for one test; it stops
/// when the test's runtime ends.
pub struct TestServer {
    base: String,
    state: AppState,
    data_dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server on `127.0.0.1:0` with a new data dir, [`TEST_CLIENT`] registered at
    /// [`TEST_REDIRECT_URI`], and a one-second device poll interval.
    pub async fn start() -> Self {
        Self::start_with(|config| config).await
    }

    /// Starts a server like [`TestServer::start`], with `configure` applied to its config.
    pub async fn start_with(configure: impl FnOnce(Config) -> Config) -> Self {
        let data_dir = tempfile::tempdir().expect("a temporary data dir");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("a bound address"));
        let client = OAuthClient {
            id: TEST_CLIENT.to_owned(),
            redirect_uris: vec![TEST_REDIRECT_URI.to_owned()],
        };
        let config = Config::new(data_dir.path())
            .client(client)
            .device_poll_interval(Duration::from_secs(1));
        let state = AppState::open(configure(config), &base)
            .await
            .expect("the server opens its data dir");
        tokio::spawn(crate::serve(listener, state.clone()));
        Self {
            base,
            state,
            data_dir,
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The server's state: its services, keys and store.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The data dir, removed when the server is dropped.
    pub fn data_dir(&self) -> &std::path::Path {
        self.data_dir.path()
    }

    /// An access token for `account` on `resource` with `scopes`, valid for an hour.
    pub fn token(&self, account: &str, resource: impl Into<Resource>, scopes: &[&str]) -> String {
        self.state.mint_access_token(&Grant {
            account: account.to_owned(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            resource: resource.into().identifier(&self.base),
            client_id: TEST_CLIENT.to_owned(),
            ttl: TOKEN_TTL,
        })
    }

    /// An [`Intent`] of `account` with a token for every resource, each carrying every scope
    /// it may, valid for an hour.
    pub fn intent(&self, account: &str) -> Intent {
        let mut builder = Intent::builder(&self.base);
        for resource in intent_sdk::auth::Resource::ALL {
            let scopes = Resource::from(resource).grantable();
            let token = self.token(account, resource, &scopes);
            builder = builder.token(resource, StaticToken::new(token));
        }
        builder.build().expect("the server's address is a URL")
    }

    /// `GET path` with `token` as the bearer.
    pub async fn get(&self, path: &str, token: &str) -> reqwest::Response {
        let request = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .bearer_auth(token);
        request.send().await.expect("the test server answers")
    }

    /// A generated client whose every request carries `token`, whatever its resource.
    pub fn client(&self, token: &str) -> intent_sdk::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        let value = format!("Bearer {token}")
            .parse()
            .expect("a token is a valid header value");
        headers.insert(reqwest::header::AUTHORIZATION, value);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .expect("a reqwest client");
        intent_sdk::Client::new_with_client(&self.base, http, Default::default())
    }
}

impl From<intent_sdk::auth::Resource> for Resource {
    fn from(resource: intent_sdk::auth::Resource) -> Self {
        use intent_sdk::auth::Resource as Sdk;
        match resource {
            Sdk::Agent => Resource::Agent,
            Sdk::Pipeline => Resource::Pipeline,
            Sdk::Account => Resource::Account,
            Sdk::AgentMcp => Resource::AgentMcp,
            Sdk::PipelineMcp => Resource::PipelineMcp,
        }
    }
}
