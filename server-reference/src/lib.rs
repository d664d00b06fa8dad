//! Reference server of the Pipeline, Agent and Account interface.
//!
//! [`AppState::open`] loads the data dir (SQLite database and keys); [`app`] builds the router,
//! separate from `main`, so that tests serve it on a real socket.

#![forbid(unsafe_code)]

mod account;
pub mod agent;
pub mod config;
pub mod error;
pub mod gateway;
pub mod keys;
pub mod oauth;
pub mod pipeline;
mod random;
pub mod resource;
mod secrets;
pub mod store;
pub mod token;
mod wellknown;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use intent_models::ErrorCode;

use crate::config::{Config, OAuthClient};
use crate::error::ApiError;
use crate::gateway::Operations;
use crate::keys::SigningKey;
use crate::resource::Resource;
use crate::secrets::Sealer;
use crate::store::{SqliteStore, Store};
use crate::token::Grant;

/// The interface document this server implements, served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("../../openapi.json");

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data dir or a key file could not be read or written.
    #[error("data dir {path}")]
    DataDir {
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The database could not be opened or migrated.
    #[error("opening the store")]
    Store(#[from] store::Error),
}

/// Everything handlers share.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    config: Config,
    issuer: String,
    signing_key: SigningKey,
    sealer: Sealer,
    store: Arc<dyn Store>,
    operations: Operations,
    agent: agent::Agent,
    devnet: pipeline::Devnet,
}

impl AppState {
    /// Opens the data dir of `config` (creating it when missing) for a server whose public
    /// base address is `config.public_url`, or `default_url` when that is unset.
    pub async fn open(config: Config, default_url: &str) -> Result<Self, StartError> {
        Self::open_with_runtime(config, default_url, Arc::new(agent::ReferenceRuntime)).await
    }

    /// [`AppState::open`] with another Agent runtime.
    pub async fn open_with_runtime(
        config: Config,
        default_url: &str,
        runtime: Arc<dyn agent::Runtime>,
    ) -> Result<Self, StartError> {
        let data_dir = config.data_dir.clone();
        let io = |source| StartError::DataDir {
            path: data_dir.clone(),
            source,
        };
        std::fs::create_dir_all(&data_dir).map_err(io)?;
        let signing_key = SigningKey::load_or_create(&data_dir).map_err(io)?;
        let sealer = Sealer::load_or_create(&data_dir).map_err(io)?;
        let store = Arc::new(SqliteStore::open(&data_dir).await?);
        let issuer = config
            .public_url
            .clone()
            .unwrap_or_else(|| default_url.trim_end_matches('/').to_owned());
        let document = serde_json::from_str(OPENAPI).expect("the embedded openapi.json parses");
        let operations = Operations::from_openapi(&document);
        let cursors = agent::cursor::CursorKey::load_or_create(&data_dir).map_err(io)?;
        let agent = agent::Agent::new(&config, cursors, runtime);
        let devnet = pipeline::Devnet::replay(store.as_ref()).await?;
        let state = Self(Arc::new(Inner {
            config,
            issuer,
            signing_key,
            sealer,
            store,
            operations,
            agent,
            devnet,
        }));
        agent::fail_orphaned_turns(&state).await?;
        Ok(state)
    }

    /// The issuer: the public base address, without a trailing slash.
    pub fn issuer(&self) -> &str {
        &self.0.issuer
    }

    /// The key that signs tokens.
    pub fn signing_key(&self) -> &SigningKey {
        &self.0.signing_key
    }

    /// The durable store.
    pub fn store(&self) -> &dyn Store {
        self.0.store.as_ref()
    }

    /// Mints an access token of this server for `grant`.
    pub fn mint_access_token(&self, grant: &Grant) -> String {
        token::mint(self.signing_key(), self.issuer(), grant, now())
    }

    /// The address of `resource`'s protected-resource metadata.
    pub fn resource_metadata_url(&self, resource: Resource) -> String {
        format!(
            "{}{}{}",
            self.issuer(),
            wellknown::RESOURCE_METADATA_PREFIX,
            resource.path()
        )
    }

    fn agent(&self) -> &agent::Agent {
        &self.0.agent
    }

    fn devnet(&self) -> &pipeline::Devnet {
        &self.0.devnet
    }

    fn config(&self) -> &Config {
        &self.0.config
    }

    fn oauth_client(&self, id: &str) -> Option<&OAuthClient> {
        self.0.config.clients.iter().find(|client| client.id == id)
    }

    fn sealer(&self) -> &Sealer {
        &self.0.sealer
    }

    fn operations(&self) -> &Operations {
        &self.0.operations
    }
}

/// Serves [`app`] on `listener` until the future is dropped.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    axum::serve(listener, app(state)).await
}

/// The whole service. The gateway runs on every request and guards the operations of
/// openapi.json, implemented here or not.
pub fn app(state: AppState) -> Router {
    let body_limit = state.0.config.body_limit;
    Router::new()
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi))
        .merge(wellknown::router())
        .merge(oauth::router())
        .nest("/v1/account", account::router())
        .nest("/v1/agent", agent::router())
        .nest("/v1/pipeline", pipeline::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            gateway::authorize,
        ))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Unix seconds now.
pub fn now() -> i64 {
    now_ms() / 1000
}

/// Unix milliseconds now.
pub(crate) fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970");
    i64::try_from(since_epoch.as_millis()).expect("milliseconds since 1970 fit in i64")
}

async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({ "status": "ok" }))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such resource")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this path",
    )
}
