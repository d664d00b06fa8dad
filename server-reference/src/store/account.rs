//! Account: installed applications, their sealed credentials, and metered usage.

use super::engine::{Sql, sql};
use super::rows::{Count, Installation, row};
use super::{Result, Store};
use crate::ids::AccountId;

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

/// The statement that records one unit: adds it to the counter of its account (`$1`), day
/// ([`counter_day`], `$2`) and meter (`$3`).
pub const RECORD_USAGE: &str = "INSERT INTO usage_counters (account, day, meter, units)
     VALUES ($1, $2, $3, 1)
     ON CONFLICT (account, day, meter) DO UPDATE SET units = usage_counters.units + 1";

/// The start (Unix seconds, UTC) of the day whose counter holds a unit recorded at `at`.
pub fn counter_day(at: i64) -> i64 {
    at - at.rem_euclid(86_400)
}

/// Records one unit of a meter at `at` (Unix seconds); the same statement inside a turn's or a
/// commit's transaction.
pub(super) fn record_usage(account: &AccountId, meter: Meter, at: i64) -> Sql {
    sql(RECORD_USAGE)
        .bind(account.as_str())
        .bind(counter_day(at))
        .bind(meter.as_str())
}

row! {
    /// A credential's presence, never its value.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CredentialPresence {
        /// The credential name.
        pub name: String,
        /// Unix seconds of the last save.
        pub updated_at: i64,
    }
}

impl Store {
    /// Installed applications of `account` with their install time.
    pub async fn installations(&self, account: &AccountId) -> Result<Vec<(i64, i64)>> {
        let rows: Vec<Installation> = self
            .db
            .fetch_all(
                sql("SELECT application_id, installed_at FROM installations
                     WHERE account = $1 ORDER BY application_id")
                .bind(account.as_str()),
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| (row.application_id, row.installed_at))
            .collect())
    }

    /// Installs `application` at `at` unless it already is; returns the install time.
    pub async fn install(&self, account: &AccountId, application: i64, at: i64) -> Result<i64> {
        let (installed_at,): (i64,) = self
            .db
            .fetch_one(
                sql(
                    "INSERT INTO installations (account, application_id, installed_at)
                     VALUES ($1, $2, $3)
                     ON CONFLICT (account, application_id)
                         DO UPDATE SET installed_at = installations.installed_at
                     RETURNING installed_at",
                )
                .bind(account.as_str())
                .bind(application)
                .bind(at),
            )
            .await?;
        Ok(installed_at)
    }

    /// Uninstalls `application`; whether it was installed.
    pub async fn uninstall(&self, account: &AccountId, application: i64) -> Result<bool> {
        let removed = self
            .db
            .execute(
                sql("DELETE FROM installations WHERE account = $1 AND application_id = $2")
                    .bind(account.as_str())
                    .bind(application),
            )
            .await?;
        Ok(removed > 0)
    }

    /// The credentials saved for `application`.
    pub async fn credentials(
        &self,
        account: &AccountId,
        application: i64,
    ) -> Result<Vec<CredentialPresence>> {
        self.db
            .fetch_all(
                sql("SELECT name, updated_at FROM credentials
                     WHERE account = $1 AND application_id = $2 ORDER BY name")
                .bind(account.as_str())
                .bind(application),
            )
            .await
    }

    /// Saves a sealed credential, replacing an earlier one of the same name.
    pub async fn save_credential(
        &self,
        account: &AccountId,
        application: i64,
        name: &str,
        sealed: &[u8],
        at: i64,
    ) -> Result<()> {
        self.db
            .execute(
                sql(
                    "INSERT INTO credentials (account, application_id, name, sealed, updated_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (account, application_id, name)
                         DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
                )
                .bind(account.as_str())
                .bind(application)
                .bind(name)
                .bind(sealed)
                .bind(at),
            )
            .await?;
        Ok(())
    }

    /// Removes a credential; whether it was present.
    pub async fn remove_credential(
        &self,
        account: &AccountId,
        application: i64,
        name: &str,
    ) -> Result<bool> {
        let removed = self
            .db
            .execute(
                sql("DELETE FROM credentials
                     WHERE account = $1 AND application_id = $2 AND name = $3")
                .bind(account.as_str())
                .bind(application)
                .bind(name),
            )
            .await?;
        Ok(removed > 0)
    }

    /// Records one unit of `meter` for `account` at `at`.
    pub async fn record_usage(&self, account: &AccountId, meter: Meter, at: i64) -> Result<()> {
        self.db.execute(record_usage(account, meter, at)).await?;
        Ok(())
    }

    /// Units recorded per meter for `account` in the days that start in `from..to` (Unix
    /// seconds; a statement's month starts and ends on a day). Reads at most one counter per
    /// meter and day, whatever the number of units.
    pub async fn usage(
        &self,
        account: &AccountId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(Meter, i64)>> {
        let rows: Vec<Count> = self
            .db
            .fetch_all(
                sql("SELECT meter AS name, CAST(SUM(units) AS BIGINT) AS count
                     FROM usage_counters
                     WHERE account = $1 AND day >= $2 AND day < $3 GROUP BY meter")
                .bind(account.as_str())
                .bind(from)
                .bind(to),
            )
            .await?;
        // Only the meters this server knows are written; a name it does not know is skipped.
        Ok(rows
            .into_iter()
            .filter_map(|row| Some((Meter::parse(&row.name)?, row.count)))
            .collect())
    }
}
