//! What the HTTP layer shares: the configuration, the keys, the store and the services, opened
//! from the data dir; [`maintenance`] runs beside them while the server lives.

mod maintenance;

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::FromRef;

use crate::account::Account;
use crate::agent::feed::{self, Feed};
use crate::agent::routes::SseKeepAlive;
use crate::agent::{self, EventLog, Hub, Notifier, Relay, SessionCache, Sessions, Turns};
use crate::auth::rate::RateLimits;
use crate::auth::resource::Resource;
use crate::auth::token::{self, Grant};
use crate::config::{Config, OAuthClient};
use crate::fetch::{Fetcher, RootsError};
use crate::keys::sealer::Sealer;
use crate::keys::signing::SigningKeys;
use crate::pipeline::Pipeline;
use crate::store::{self, Runner, Store};
use crate::web::gateway::Gateway;
use crate::{clock, random};

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
    /// The roots for fetching client metadata documents could not be read.
    #[error(transparent)]
    ClientMetadataRoots(#[from] RootsError),
}

/// Everything handlers share. Cheap to clone. A handler extracts the one service it calls
/// (`State<Turns>`, `State<Arc<Pipeline>>`...), each a part of this state by [`FromRef`].
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

impl FromRef<AppState> for EventLog {
    fn from_ref(state: &AppState) -> Self {
        state.0.log.clone()
    }
}

impl FromRef<AppState> for Turns {
    fn from_ref(state: &AppState) -> Self {
        state.0.turns.clone()
    }
}

impl FromRef<AppState> for Sessions {
    fn from_ref(state: &AppState) -> Self {
        state.0.sessions.clone()
    }
}

impl FromRef<AppState> for Arc<Pipeline> {
    fn from_ref(state: &AppState) -> Self {
        state.0.pipeline.clone()
    }
}

impl FromRef<AppState> for Arc<Account> {
    fn from_ref(state: &AppState) -> Self {
        state.0.account.clone()
    }
}

impl FromRef<AppState> for Gateway {
    fn from_ref(state: &AppState) -> Self {
        state.0.gateway.clone()
    }
}

impl FromRef<AppState> for SseKeepAlive {
    fn from_ref(state: &AppState) -> Self {
        Self(state.0.config.sse_keep_alive)
    }
}

struct Inner {
    config: Config,
    issuer: String,
    signing_key: Arc<SigningKeys>,
    store: Arc<Store>,
    gateway: Gateway,
    log: EventLog,
    turns: Turns,
    sessions: Sessions,
    pipeline: Arc<Pipeline>,
    account: Arc<Account>,
    fetcher: Option<Fetcher>,
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
        let fetcher = Fetcher::from_config(&config)?;
        let database = config.database_url.is_none().then_some(store::SQLITE_FILE);
        crate::store::data_dir::prepare(&data_dir, database).map_err(io)?;
        let signing_lifetime = config.access_token_ttl.max(config.build_ttl);
        let signing_key =
            Arc::new(SigningKeys::load_or_create(&data_dir, signing_lifetime).map_err(io)?);
        let sealer = Sealer::load_or_create(&data_dir).map_err(io)?;
        let cursors =
            agent::cursor::CursorKey::load_or_create(&data_dir, config.cursor_ttl).map_err(io)?;
        let runner = Runner {
            id: random::id("run"),
            lease_ms: i64::try_from(config.turn_lease.as_millis()).unwrap_or(i64::MAX),
        };
        let hub = Arc::new(Hub::default());
        let fed = Arc::downgrade(&hub);
        let store = Arc::new(match &config.database_url {
            Some(url) => Store::postgres(url, runner).await?,
            None => Store::sqlite(&data_dir, runner).await?,
        });
        let shared = store.shared();
        let notifier: Arc<dyn Notifier> = match &shared {
            Some(shared) => Arc::new(Relay::new(hub, feed::relay_snapshots(shared.clone()))),
            None => hub,
        };
        // The gateway's operations are read from openapi.json at start, not by the first request.
        crate::web::endpoints::all();
        let issuer = config
            .public_url
            .clone()
            .unwrap_or_else(|| default_url.trim_end_matches('/').to_owned());
        let pipeline = Arc::new(Pipeline::new(
            store.clone(),
            signing_key.clone(),
            config.build_ttl,
        ));
        let cache = SessionCache::new(store.clone(), notifier, config.event_retention);
        let log = EventLog::new(cache.clone(), cursors, config.cursor_ttl);
        // Other processes write a shared store: their notifications wake this one's readers and
        // retire the heads they make out of date.
        if let Some(shared) = shared {
            cache.hearing_changes(false);
            let feed = Feed::new(fed, cache.downgrade());
            tokio::spawn(async move { shared.listen(feed).await });
        }
        let turns = Turns::new(
            cache.clone(),
            log.clone(),
            store.clone(),
            pipeline.clone(),
            runtime,
            config.idempotency_key_ttl,
        );
        turns.resume_orphans().await?;
        let sessions = Sessions::new(cache, turns.clone());
        let account = Arc::new(Account::new(store.clone(), sealer));
        let gateway = Gateway::new(
            issuer.clone(),
            signing_key.clone(),
            config.rate_limit.map(RateLimits::new),
        );
        let cleanup_interval = config.cleanup_interval;
        let turn_lease = config.turn_lease;
        let state = Self(Arc::new(Inner {
            config,
            issuer,
            signing_key,
            store,
            gateway,
            log,
            turns,
            sessions,
            pipeline,
            account,
            fetcher,
        }));
        tokio::spawn(maintenance::clean_up(
            Arc::downgrade(&state.0),
            cleanup_interval,
        ));
        tokio::spawn(maintenance::keep_turns(
            Arc::downgrade(&state.0),
            turn_lease,
        ));
        Ok(state)
    }

    /// The issuer: the public base address, without a trailing slash.
    pub fn issuer(&self) -> &str {
        &self.0.issuer
    }

    /// The keys that sign tokens and attest Builds.
    pub fn signing_key(&self) -> &SigningKeys {
        &self.0.signing_key
    }

    /// The durable store.
    pub fn store(&self) -> &Store {
        &self.0.store
    }

    /// The configuration the server runs with.
    pub fn config(&self) -> &Config {
        &self.0.config
    }

    /// Every session's event log.
    pub fn log(&self) -> &EventLog {
        &self.0.log
    }

    /// The Turns service.
    pub fn turns(&self) -> &Turns {
        &self.0.turns
    }

    /// The Pipeline service.
    pub fn pipeline(&self) -> &Pipeline {
        &self.0.pipeline
    }

    /// Mints an access token of this server for `grant`.
    pub fn mint_access_token(&self, grant: &Grant) -> String {
        token::mint(self.signing_key(), self.issuer(), grant, clock::now())
    }

    /// The address of `resource`'s protected-resource metadata.
    pub fn resource_metadata_url(&self, resource: Resource) -> String {
        resource.metadata_url(self.issuer())
    }

    /// The fetcher of client metadata documents, when they are on.
    pub fn client_metadata_fetcher(&self) -> Option<&Fetcher> {
        self.0.fetcher.as_ref()
    }

    /// The registered OAuth client `id`.
    pub fn oauth_client(&self, id: &str) -> Option<&OAuthClient> {
        self.0.config.clients.iter().find(|client| client.id == id)
    }
}

impl crate::web::Ready for AppState {
    async fn unready(&self) -> Option<&'static str> {
        if self.log().is_draining() {
            return Some("draining");
        }
        let error = self.store().ping().await.err()?;
        tracing::error!(
            error = &error as &dyn std::error::Error,
            "the store does not answer"
        );
        Some("store unavailable")
    }
}
