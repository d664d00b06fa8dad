//! Durable state behind a narrow interface: [`SqliteStore`] is the embedded one, [`PgStore`] the
//! one several server processes share.

pub mod agent;
mod migrations;
mod postgres;
mod rows;
mod sqlite;

use async_trait::async_trait;

pub use agent::AgentStore;
pub use postgres::{Notified, PgStore};
pub use sqlite::SqliteStore;

/// Who runs the turns this process starts or resumes, and for how long a claim on one lasts
/// unless renewed: a processing turn whose lease ran out has lost its runner.
#[derive(Debug, Clone)]
pub struct Runner {
    /// This process, unique among the processes of a database.
    pub id: String,
    /// Milliseconds a claim lasts.
    pub lease_ms: i64,
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
    /// out, server shutting down): a retry may succeed, and nothing was written.
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

/// A metered unit of usage, priced on the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Meter {
    /// A started Agent turn.
    Turn,
    /// A Pipeline build or stage.
    Build,
    /// A simulation of a Build.
    Simulation,
    /// A committed Build.
    Commit,
}

impl Meter {
    /// Every meter, in statement order.
    pub const ALL: [Meter; 4] = [Meter::Turn, Meter::Build, Meter::Simulation, Meter::Commit];

    /// The name stored and shown on the statement.
    pub fn as_str(self) -> &'static str {
        match self {
            Meter::Turn => "turn",
            Meter::Build => "build",
            Meter::Simulation => "simulation",
            Meter::Commit => "commit",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|meter| meter.as_str() == name)
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

/// A credential's presence, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialPresence {
    /// The credential name.
    pub name: String,
    /// Unix seconds of the last save.
    pub updated_at: i64,
}

/// What a grant authorizes: who, for which client, which scopes on which one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The OAuth client.
    pub client_id: String,
    /// The account.
    pub account: String,
    /// Granted scopes, space-separated.
    pub scopes: String,
    /// The one resource identifier.
    pub resource: String,
}

/// A stored authorization code.
#[derive(Debug, Clone)]
pub struct AuthorizationCode {
    /// What the code grants.
    pub grant: Authorization,
    /// The redirect URI the code was issued to.
    pub redirect_uri: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    /// Unix seconds after which the code is void.
    pub expires_at: i64,
}

/// The state of a device authorization (RFC 8628).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceStatus {
    /// Waiting for the user.
    Pending,
    /// The user approved; a token may be issued once.
    Approved,
    /// The user denied.
    Denied,
    /// A token was issued.
    Used,
}

/// A stored device authorization.
#[derive(Debug, Clone)]
pub struct DeviceGrant {
    /// The code the user types.
    pub user_code: String,
    /// The client, scopes and resource asked for; the account once approved.
    pub client_id: String,
    /// Requested scopes, space-separated.
    pub scopes: String,
    /// The resource identifier.
    pub resource: String,
    /// The approving account.
    pub account: Option<String>,
    /// Where the grant stands.
    pub status: DeviceStatus,
    /// Seconds the client must wait between polls.
    pub interval_secs: i64,
    /// Unix milliseconds of the previous poll.
    pub last_poll_ms: Option<i64>,
    /// Unix seconds after which the grant is void.
    pub expires_at: i64,
}

/// What presenting a refresh token found.
#[derive(Debug, Clone)]
pub enum RefreshUse {
    /// The token was active and is now used; rotate to a new one in `family`.
    Rotated {
        /// What the token granted.
        grant: Authorization,
        /// The rotation family.
        family: String,
        /// Unix seconds after which the token was void.
        expires_at: i64,
    },
    /// The token was already used or revoked; its whole family is now revoked.
    Replayed,
    /// The token is active but the caller's check refused it; it was left unused.
    Refused {
        /// What the token grants.
        grant: Authorization,
        /// Unix seconds after which the token is void.
        expires_at: i64,
    },
    /// No such token.
    Unknown,
}

/// A Build to record as committed.
#[derive(Debug, Clone, Copy)]
pub struct NewCommit<'a> {
    /// The chain, `evm` or `svm`.
    pub chain: &'a str,
    /// The seq of the last commit on `chain` the caller's state includes.
    pub applied_through: i64,
    /// The Build's digest.
    pub digest: &'a str,
    /// The committing account.
    pub account: &'a str,
    /// The Build's actions as JSON.
    pub actions: &'a str,
    /// Unix seconds now.
    pub at: i64,
}

/// What recording a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitRecorded {
    /// Recorded at this seq.
    Done(i64),
    /// Another commit on the chain came first: catch up and re-simulate.
    Behind,
    /// The Build was committed before.
    Duplicate,
}

/// The server's durable state. Every method is scoped to one account: ownership comes from the
/// caller's principal, never from the data.
#[async_trait]
pub trait Store: AgentStore + 'static {
    /// Answers when the database does: a readiness probe.
    async fn ping(&self) -> Result<()>;
    /// Removes what can no longer be used: authorization codes and device grants expired
    /// before `expired_before`, idempotency keys created before `keys_before`, and refresh-token
    /// families whose every token expired before `expired_before`.
    async fn purge(&self, expired_before: i64, keys_before: i64) -> Result<Purged>;
    /// Installed applications of `account` with their install time.
    async fn installations(&self, account: &str) -> Result<Vec<(i64, i64)>>;
    /// Installs `application` at `at` unless it already is; returns the install time.
    async fn install(&self, account: &str, application: i64, at: i64) -> Result<i64>;
    /// Uninstalls `application`; whether it was installed.
    async fn uninstall(&self, account: &str, application: i64) -> Result<bool>;
    /// The credentials saved for `application`.
    async fn credentials(&self, account: &str, application: i64)
    -> Result<Vec<CredentialPresence>>;
    /// Saves a sealed credential, replacing an earlier one of the same name.
    async fn save_credential(
        &self,
        account: &str,
        application: i64,
        name: &str,
        sealed: &[u8],
        at: i64,
    ) -> Result<()>;
    /// Removes a credential; whether it was present.
    async fn remove_credential(&self, account: &str, application: i64, name: &str) -> Result<bool>;
    /// Records one unit of `meter` for `account` at `at`.
    async fn record_usage(&self, account: &str, meter: Meter, at: i64) -> Result<()>;
    /// Units recorded per meter for `account` with `from <= at < to`.
    async fn usage(&self, account: &str, from: i64, to: i64) -> Result<Vec<(Meter, i64)>>;

    /// Records a committed Build's actions (JSON) on `chain`, if the last commit on that chain
    /// is still `applied_through` (the one the caller's devnet state ends at), with one unit of
    /// the `commit` meter for its account, in one transaction. Commits of one chain are
    /// serialized across every process of the database.
    async fn record_commit(&self, commit: &NewCommit<'_>) -> Result<CommitRecorded>;
    /// The commits on `chain` after `after`, in commit order, as (seq, actions JSON).
    async fn commits_after(&self, chain: &str, after: i64) -> Result<Vec<(i64, String)>>;

    /// Stores an authorization code under the hash of its value.
    async fn save_code(&self, code_hash: &str, code: &AuthorizationCode) -> Result<()>;
    /// Marks the code used and returns it; `None` when unknown or already used.
    async fn take_code(&self, code_hash: &str) -> Result<Option<AuthorizationCode>>;

    /// Stores a new pending device grant under the hash of its device code.
    async fn save_device_grant(&self, device_code_hash: &str, grant: &DeviceGrant) -> Result<()>;
    /// The grant whose user code is `user_code`.
    async fn device_grant_by_user_code(&self, user_code: &str) -> Result<Option<DeviceGrant>>;
    /// Approves (with the account) or denies (with `None`) a pending grant that has not expired at
    /// `now`; whether it was pending.
    async fn decide_device_grant(
        &self,
        user_code: &str,
        account: Option<&str>,
        now: i64,
    ) -> Result<bool>;
    /// Records a poll at `now_ms` and returns the grant as it was before the poll.
    async fn poll_device_grant(
        &self,
        device_code_hash: &str,
        now_ms: i64,
    ) -> Result<Option<DeviceGrant>>;
    /// Adds `by` seconds to the grant's poll interval (`slow_down`).
    async fn slow_device_grant(&self, device_code_hash: &str, by: i64) -> Result<()>;
    /// Moves an approved grant to used; whether it was approved.
    async fn consume_device_grant(&self, device_code_hash: &str) -> Result<bool>;

    /// Stores an active refresh token in `family`, unless the family is revoked; whether it was
    /// stored.
    async fn save_refresh_token(
        &self,
        token_hash: &str,
        family: &str,
        grant: &Authorization,
        expires_at: i64,
    ) -> Result<bool>;
    /// Revokes every refresh token of `family`.
    async fn revoke_refresh_family(&self, family: &str) -> Result<()>;
    /// Uses a refresh token: rotates an active one that `accept` (given the grant and its expiry)
    /// agrees to, leaves it unused when `accept` refuses, and revokes the family of a replayed one.
    async fn use_refresh_token(
        &self,
        token_hash: &str,
        accept: &(dyn for<'g> Fn(&'g Authorization, i64) -> bool + Send + Sync),
    ) -> Result<RefreshUse>;
}
