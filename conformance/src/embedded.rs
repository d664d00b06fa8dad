//! A reference server started in-process on a free loopback port, with a temporary data dir
//! and tokens minted with its own key: what `intent-conformance run` checks without a base URL.

use std::sync::Arc;
use std::time::Duration;

use intent_server::auth::token::Grant;
use intent_server::config::Config;

use crate::target::{Account, Mint, Settings, Target, TokenRequest, TokenSource, Tokens};

/// Cursor lifetime of the embedded server: short, so that the expiry check can wait it out, as
/// it waits out a Build's, and long enough for a client that follows a log to hold a page's
/// cursor through a 429's one-second retry on a busy machine (at 2 s, a check running beside
/// others under rate limiting met an expired cursor).
pub const CURSOR_TTL: Duration = Duration::from_secs(4);

/// Build lifetime of the embedded server: short, so that the expiry check can wait it out.
pub const BUILD_TTL: Duration = Duration::from_secs(4);

/// A running embedded reference server; it stops, and its data dir goes, when dropped.
pub struct Embedded {
    base: String,
    mint: Mint,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _data_dir: tempfile::TempDir,
}

impl Embedded {
    /// Starts the reference server as it is.
    pub async fn start() -> Result<Self, String> {
        Self::start_with(|app| app).await
    }

    /// Starts the reference server with `wrap` applied to its router (to add layers).
    pub async fn start_with(
        wrap: impl FnOnce(axum::Router) -> axum::Router,
    ) -> Result<Self, String> {
        let data_dir = tempfile::tempdir().map_err(|e| format!("a temporary data dir: {e}"))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("a loopback port: {e}"))?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        let base = format!("http://{address}");
        let config = Config::new(data_dir.path())
            .cursor_ttl(CURSOR_TTL)
            .build_ttl(BUILD_TTL);
        let state = intent_server::AppState::open(config, &base)
            .await
            .map_err(|e| format!("opening the reference server: {e}"))?;
        let signer = state.clone();
        let client = "intent-conformance".to_owned();
        let mint: Mint = Arc::new(move |request: &TokenRequest, resource: &str| {
            let account = match request.account {
                Account::Primary => "conformance",
                Account::Secondary => "conformance-other",
            };
            Ok(signer.mint_access_token(&Grant {
                account: account.to_owned(),
                scopes: request.scopes.clone(),
                resource: resource.to_owned(),
                client_id: client.clone(),
                ttl: Duration::from_secs(3600),
            }))
        });
        let app = wrap(intent_server::app(state));
        let task =
            tokio::spawn(async move { axum::serve(listener, app.into_make_service()).await });
        Ok(Self {
            base,
            mint,
            task,
            _data_dir: data_dir,
        })
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A target for this server, knowing its short cursor lifetime.
    pub fn target(&self) -> Target {
        let settings = Settings {
            cursor_ttl: Some(CURSOR_TTL),
            ..Settings::default()
        };
        Target::new(&self.base, Tokens::default(), settings)
            .with_source(TokenSource::Mint(self.mint.clone()))
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.task.abort();
    }
}
