//! Durable state, written once for two engines: SQLite, the embedded default (one file in the
//! data dir), and PostgreSQL, which several server processes share. The statements are the same
//! on both (`engine` runs them and keeps what differs); the methods of [`Store`] are grouped
//! by concept: [`account`], [`commits`], [`oauth`], and the Agent's sessions, turns, log, actions
//! and idempotency keys under [`agent`].

pub mod account;
pub mod agent;
pub mod commits;
pub(crate) mod data_dir;
mod engine;
mod migrations;
pub mod oauth;
mod postgres;
mod rows;
mod sqlite;

use std::path::Path;

use engine::{Db, sql};

pub use account::{CredentialPresence, Meter};
pub use commits::{CommitRecorded, NewCommit};
pub use oauth::{
    Authorization, AuthorizationCode, DeviceGrant, DeviceStatus, RefreshUse, RegisteredClient,
};
pub use postgres::{Notified, Shared};

/// Who runs the turns this process starts or resumes, and for how long a claim on one lasts
/// unless renewed: a processing turn whose lease ran out has lost its runner.
#[derive(Debug, Clone)]
pub struct Runner {
    /// This process, unique among the processes of a database.
    pub id: String,
    /// Milliseconds a claim lasts.
    pub lease_ms: i64,
}

/// The server's durable state. Every method is scoped to one account: ownership comes from the
/// caller's principal, never from the data.
#[derive(Clone)]
pub struct Store {
    db: Db,
    runner: Runner,
}

/// The SQLite database's file in the data dir.
pub(crate) const SQLITE_FILE: &str = "intent.db";

impl Store {
    /// Opens (creating it if needed) `intent.db` in `data_dir` and applies the migrations. The
    /// file has one process, `runner`: every turn lease of an earlier process has ended.
    pub async fn sqlite(data_dir: &Path, runner: Runner) -> Result<Self> {
        let db = Db::Sqlite(sqlite::open(data_dir).await?);
        Ok(Self { db, runner })
    }

    /// Connects to the PostgreSQL database at `url` and applies the migrations; turns this
    /// process starts are leased to `runner`.
    pub async fn postgres(url: &str, runner: Runner) -> Result<Self> {
        let db = Db::Postgres(postgres::open(url).await?);
        Ok(Self { db, runner })
    }

    /// What only a database several processes share does: hearing the others and relaying to
    /// them. `None` on SQLite.
    pub fn shared(&self) -> Option<Shared> {
        match &self.db {
            Db::Postgres(pool) => Some(Shared::new(pool.clone(), self.runner.id.clone())),
            Db::Sqlite(_) => None,
        }
    }

    /// Answers when the database does: a readiness probe.
    pub async fn ping(&self) -> Result<()> {
        self.db.execute(sql("SELECT 1")).await?;
        Ok(())
    }

    /// Removes what can no longer be used: authorization codes and device grants expired
    /// before `expired_before`, idempotency keys created before `keys_before`, and refresh-token
    /// families whose every token expired before `expired_before`.
    pub async fn purge(&self, expired_before: i64, keys_before: i64) -> Result<Purged> {
        let mut tx = self.db.begin().await?;
        let mut delete = async |text: &'static str, before: i64| -> Result<u64> {
            tx.execute(sql(text).bind(before)).await
        };
        let purged = Purged {
            codes: delete(
                "DELETE FROM authorization_codes WHERE expires_at < $1",
                expired_before,
            )
            .await?,
            device_grants: delete(
                "DELETE FROM device_grants WHERE expires_at < $1",
                expired_before,
            )
            .await?,
            idempotency_keys: delete(
                "DELETE FROM idempotency_keys WHERE created_at < $1",
                keys_before,
            )
            .await?,
            refresh_tokens: delete(
                "DELETE FROM refresh_tokens WHERE family IN
                     (SELECT family FROM refresh_tokens GROUP BY family HAVING MAX(expires_at) < $1)",
                expired_before,
            )
            .await?,
        };
        tx.commit().await?;
        Ok(purged)
    }
}

/// What a [`Store::purge`] removed, in rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Authorization codes.
    pub codes: u64,
    /// Device grants.
    pub device_grants: u64,
    /// Idempotency keys with their answers.
    pub idempotency_keys: u64,
    /// Refresh tokens.
    pub refresh_tokens: u64,
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database failed.
    #[error("database error")]
    Database(#[from] sqlx::Error),
    /// The database could not be reached at start.
    #[error("cannot reach the database at {database}")]
    Unreachable {
        /// Host, port and database name (never the password).
        database: String,
        /// The cause.
        #[source]
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error("migrating the database")]
    Migrate(#[source] sqlx::migrate::MigrateError),
}

impl Error {
    /// Whether the database is out of reach for now (connection lost or refused, pool timed
    /// out, server shutting down, no space left to write): a retry may succeed, and nothing was
    /// written (the statement's transaction rolled back).
    pub fn unavailable(&self) -> bool {
        let Error::Database(error) = self else {
            return false;
        };
        match error {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => true,
            // A FATAL error ends the session (the server refused or dropped the connection);
            // or a connection exception (08), insufficient resources (53), operator
            // intervention (57P: shutdown, cannot connect now).
            // SQLite's disk or database full (13), or an I/O error (10) such as a short write,
            // in the primary code of its extended code.
            sqlx::Error::Database(error)
                if error
                    .try_downcast_ref::<sqlx::sqlite::SqliteError>()
                    .is_some() =>
            {
                error
                    .code()
                    .and_then(|code| code.parse::<i32>().ok())
                    .is_some_and(|code| matches!(code & 0xff, 10 | 13))
            }
            sqlx::Error::Database(error) => {
                let fatal = error
                    .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some_and(|error| {
                        matches!(
                            error.severity(),
                            sqlx::postgres::PgSeverity::Fatal | sqlx::postgres::PgSeverity::Panic
                        )
                    });
                fatal
                    || error.code().is_some_and(|code| {
                        ["08", "53", "57P"]
                            .iter()
                            .any(|class| code.starts_with(class))
                    })
            }
            _ => false,
        }
    }
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
