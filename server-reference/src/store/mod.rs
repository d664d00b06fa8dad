//! Durable state behind a narrow interface, so that another backend (PostgreSQL) can follow
//! without touching handlers. [`SqliteStore`] is the embedded one.

mod sqlite;

use async_trait::async_trait;

pub use sqlite::SqliteStore;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database failed.
    #[error("database error")]
    Database(#[source] sqlx::Error),
    /// A migration failed.
    #[error("migrating the database")]
    Migrate(#[source] sqlx::migrate::MigrateError),
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

/// A credential's presence, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialPresence {
    /// The credential name.
    pub name: String,
    /// Unix seconds of the last save.
    pub updated_at: i64,
}

/// The server's durable state. Every method is scoped to one account: ownership comes from the
/// caller's principal, never from the data.
#[async_trait]
pub trait Store: Send + Sync + 'static {
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
}
