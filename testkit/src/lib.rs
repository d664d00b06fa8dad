#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::time::Duration;

use intent_sdk::Intent;
use intent_sdk::auth::StaticToken;
use intent_server::AppState;
use intent_server::auth::resource::Resource;
use intent_server::auth::token::Grant;
use intent_server::config::{Config, OAuthClient};

/// The OAuth client every test server registers.
pub const TEST_CLIENT: &str = "intent-tests";

/// The one redirect URI of [`TEST_CLIENT`]; nothing listens there, tests read the redirect.
pub const TEST_REDIRECT_URI: &str = "http://127.0.0.1:9/callback";

/// How long the kit's tokens live.
const TOKEN_TTL: Duration = Duration::from_secs(3600);

/// Names a PostgreSQL server (`postgres://...`) for test servers. When it is set, every
/// [`TestServer`] keeps its state in a new database there instead of a SQLite file, so that one
/// suite runs on both backends.
pub const DATABASE_ENV: &str = "INTENT_TEST_DATABASE_URL";

/// A reference server on a free loopback port, with its own data dir, for one test; it stops
/// when the test's runtime ends.
pub struct TestServer {
    base: String,
    state: AppState,
    data_dir: tempfile::TempDir,
    database_url: Option<String>,
}

impl TestServer {
    /// Starts a server on `127.0.0.1:0` with a new data dir (and a new database when
    /// [`DATABASE_ENV`] is set), [`TEST_CLIENT`] registered at [`TEST_REDIRECT_URI`], and a
    /// one-second device poll interval.
    pub async fn start() -> Self {
        Self::start_with(|config| config).await
    }

    /// Starts a server like [`TestServer::start`], with `configure` applied to its config.
    pub async fn start_with(configure: impl FnOnce(Config) -> Config) -> Self {
        let database_url = match std::env::var(DATABASE_ENV) {
            Ok(server) => Some(new_database(&server).await),
            Err(_) => None,
        };
        let data_dir = tempfile::tempdir().expect("a temporary data dir");
        Self::open(data_dir, database_url, None, configure).await
    }

    /// Starts a server like [`TestServer::start`] on SQLite, with its data dir made in `parent`
    /// (such as a small filesystem a test mounted).
    pub async fn start_in(parent: &std::path::Path) -> Self {
        let data_dir = tempfile::tempdir_in(parent).expect("a temporary data dir");
        Self::open(data_dir, None, None, |config| config).await
    }

    /// Starts a second instance of this server's deployment, with `configure` applied to its
    /// config: its own port, the same database, a copy of the key files and the same public
    /// address, as behind one load balancer. Only on PostgreSQL: panics without
    /// [`DATABASE_ENV`].
    pub async fn peer_with(&self, configure: impl FnOnce(Config) -> Config) -> Self {
        let database_url = self
            .database_url
            .clone()
            .expect("peers share a PostgreSQL database: set INTENT_TEST_DATABASE_URL");
        self.peer_on(database_url, configure).await
    }

    /// An instance like [`TestServer::peer_with`] but on a database of its own: it shares the
    /// keys and the public address and nothing else, as a broken deployment would. Panics
    /// without [`DATABASE_ENV`].
    pub async fn detached_peer(&self) -> Self {
        let server = std::env::var(DATABASE_ENV).expect("set INTENT_TEST_DATABASE_URL");
        self.peer_on(new_database(&server).await, |config| config)
            .await
    }

    async fn peer_on(
        &self,
        database_url: String,
        configure: impl FnOnce(Config) -> Config,
    ) -> Self {
        let data_dir = tempfile::tempdir().expect("a temporary data dir");
        for entry in std::fs::read_dir(self.data_dir()).expect("the data dir lists") {
            let entry = entry.expect("a data dir entry");
            std::fs::copy(entry.path(), data_dir.path().join(entry.file_name()))
                .expect("a key file copies");
        }
        Self::open(
            data_dir,
            Some(database_url),
            Some(self.base.clone()),
            configure,
        )
        .await
    }

    async fn open(
        data_dir: tempfile::TempDir,
        database_url: Option<String>,
        public_url: Option<String>,
        configure: impl FnOnce(Config) -> Config,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let bound = format!("http://{}", listener.local_addr().expect("a bound address"));
        let client = OAuthClient {
            id: TEST_CLIENT.to_owned(),
            redirect_uris: vec![TEST_REDIRECT_URI.to_owned()],
        };
        let mut config = Config::new(data_dir.path())
            .database_url(database_url.clone())
            .client(client)
            .device_poll_interval(Duration::from_secs(1));
        if let Some(url) = public_url {
            config = config.public_url(url);
        }
        let state = AppState::open(configure(config), &bound)
            .await
            .expect("the server opens its data dir");
        tokio::spawn(intent_server::serve(listener, state.clone()));
        Self {
            base: bound,
            state,
            data_dir,
            database_url,
        }
    }

    /// The PostgreSQL database of the server's state, when [`DATABASE_ENV`] is set.
    pub fn database_url(&self) -> Option<&str> {
        self.database_url.as_deref()
    }

    /// `http://127.0.0.1:PORT`, where this instance listens; a peer's public address (the
    /// token issuer) is the first instance's.
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
    pub fn token(&self, account: &str, resource: impl ResourceName, scopes: &[&str]) -> String {
        self.state.mint_access_token(&Grant {
            account: account.to_owned(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            resource: resource.served().identifier(self.state.issuer()),
            client_id: TEST_CLIENT.to_owned(),
            ttl: TOKEN_TTL,
        })
    }

    /// An [`Intent`] of `account` with a token for every resource, each carrying every scope
    /// it may, valid for an hour.
    pub fn intent(&self, account: &str) -> Intent {
        let mut builder = Intent::builder(&self.base);
        for resource in intent_sdk::auth::Resource::ALL {
            let scopes = resource.served().grantable();
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
    pub fn client(&self, token: &str) -> intent_sdk::raw::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        let value = format!("Bearer {token}")
            .parse()
            .expect("a token is a valid header value");
        headers.insert(reqwest::header::AUTHORIZATION, value);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .expect("a reqwest client");
        intent_sdk::raw::Client::new_with_client(&self.base, http, Default::default())
    }
}

/// A resource as the SDK ([`intent_sdk::Resource`]) or the server names it.
pub trait ResourceName {
    /// The server's name of the resource.
    fn served(self) -> Resource;
}

impl ResourceName for Resource {
    fn served(self) -> Resource {
        self
    }
}

impl ResourceName for intent_sdk::Resource {
    fn served(self) -> Resource {
        match self {
            Self::Agent => Resource::Agent,
            Self::Pipeline => Resource::Pipeline,
            Self::Account => Resource::Account,
            Self::AgentMcp => Resource::AgentMcp,
            Self::PipelineMcp => Resource::PipelineMcp,
        }
    }
}

/// Creates an empty database on the PostgreSQL server at `server` (such as [`DATABASE_ENV`]
/// names) and gives its URL.
pub async fn new_database(server: &str) -> String {
    use sqlx::Connection;
    let mut url = reqwest::Url::parse(server).expect("INTENT_TEST_DATABASE_URL is a URL");
    let mut random = [0u8; 16];
    getrandom::fill(&mut random).expect("the operating system provides randomness");
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("test_{hex}");
    let mut admin = sqlx::PgConnection::connect(server)
        .await
        .expect("the test PostgreSQL server accepts connections");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("a test database is created");
    url.set_path(&name);
    url.to_string()
}
