//! The engine several server processes share: PostgreSQL. Migrations run at start under sqlx's
//! advisory lock, so processes that start together apply them once. Every append, session change
//! and deletion notifies [`EVENTS_CHANNEL`] when it commits, which wakes the readers of every
//! process, and message snapshots reach the streams of every process through
//! [`SNAPSHOTS_CHANNEL`].

mod listen;

pub use listen::Notified;
use listen::Relayed;

use std::time::Duration;

use intent_models::MessageSnapshot;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection};

use super::{Error, Result};

/// The channel appends notify, with `session:last_seq` as the payload, and deletions, with
/// `session:deleted`.
pub const EVENTS_CHANNEL: &str = "intent_events";

/// The channel message snapshots are relayed on, with a [`Relayed`] as the JSON payload.
pub const SNAPSHOTS_CHANNEL: &str = "intent_snapshots";

/// PostgreSQL refuses a notification payload of 8,000 bytes or more.
const MAX_PAYLOAD: usize = 7_999;

/// How long a request waits for a pooled connection before the database counts as unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Connects to `url` and applies the migrations.
pub(super) async fn open(url: &str) -> Result<PgPool> {
    let options: PgConnectOptions = url.parse()?;
    // One connection first, so that an unreachable database fails with its own cause rather
    // than with the pool's time-out.
    let database = format!(
        "{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    );
    let probe = PgConnection::connect_with(&options)
        .await
        .map_err(|source| Error::Unreachable { database, source })?;
    probe.close().await?;
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options)
        .await?;
    super::migrations::postgres()
        .await
        .map_err(Error::Migrate)?
        .run(&pool)
        .await
        .map_err(Error::Migrate)?;
    Ok(pool)
}

/// A PostgreSQL store's link to the other processes of its database.
#[derive(Clone)]
pub struct Shared {
    pool: PgPool,
    runner: String,
}

impl Shared {
    pub(super) fn new(pool: PgPool, runner: String) -> Self {
        Self { pool, runner }
    }

    /// Tells `notified` what every process on the database appends and deletes and what the
    /// others relay, until the store closes.
    pub async fn listen(&self, notified: impl Notified) {
        listen::listen(self.pool.clone(), &self.runner, notified).await;
    }

    /// Hands `snapshot` of `session` to the other processes. One too large for a notification
    /// is not relayed: snapshots are transient, and the message's event follows.
    pub async fn relay_snapshot(&self, session: &str, snapshot: MessageSnapshot) -> Result<()> {
        let payload = serde_json::to_string(&Relayed {
            from: self.runner.clone(),
            session: session.to_owned(),
            snapshot,
        })
        .expect("a snapshot serializes");
        if payload.len() > MAX_PAYLOAD {
            return Ok(());
        }
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(SNAPSHOTS_CHANNEL)
            .bind(payload)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
