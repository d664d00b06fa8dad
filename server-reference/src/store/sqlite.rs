//! The embedded SQLite store: one file in the data dir, WAL journal, `synchronous=FULL`.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{CredentialPresence, Error, Meter, Result, Store};

/// SQLite behind [`Store`].
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating it if needed) `intent.db` in `data_dir` and applies the migrations.
    pub async fn open(data_dir: &Path) -> Result<Self> {
        let options = SqliteConnectOptions::new()
            .filename(data_dir.join("intent.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(Error::Database)?;
        sqlx::migrate!("./migrations")
            .run(&pool)
            .await
            .map_err(Error::Migrate)?;
        Ok(Self { pool })
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn installations(&self, account: &str) -> Result<Vec<(i64, i64)>> {
        sqlx::query_as(
            "SELECT application_id, installed_at FROM installations WHERE account = ? ORDER BY application_id",
        )
        .bind(account)
        .fetch_all(&self.pool)
        .await
        .map_err(Error::Database)
    }

    async fn install(&self, account: &str, application: i64, at: i64) -> Result<i64> {
        let (installed_at,): (i64,) = sqlx::query_as(
            "INSERT INTO installations (account, application_id, installed_at) VALUES (?, ?, ?)
             ON CONFLICT (account, application_id) DO UPDATE SET installed_at = installed_at
             RETURNING installed_at",
        )
        .bind(account)
        .bind(application)
        .bind(at)
        .fetch_one(&self.pool)
        .await
        .map_err(Error::Database)?;
        Ok(installed_at)
    }

    async fn uninstall(&self, account: &str, application: i64) -> Result<bool> {
        let done =
            sqlx::query("DELETE FROM installations WHERE account = ? AND application_id = ?")
                .bind(account)
                .bind(application)
                .execute(&self.pool)
                .await
                .map_err(Error::Database)?;
        Ok(done.rows_affected() > 0)
    }

    async fn credentials(
        &self,
        account: &str,
        application: i64,
    ) -> Result<Vec<CredentialPresence>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT name, updated_at FROM credentials WHERE account = ? AND application_id = ? ORDER BY name",
        )
        .bind(account)
        .bind(application)
        .fetch_all(&self.pool)
        .await
        .map_err(Error::Database)?;
        Ok(rows
            .into_iter()
            .map(|(name, updated_at)| CredentialPresence { name, updated_at })
            .collect())
    }

    async fn save_credential(
        &self,
        account: &str,
        application: i64,
        name: &str,
        sealed: &[u8],
        at: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO credentials (account, application_id, name, sealed, updated_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (account, application_id, name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
        )
        .bind(account)
        .bind(application)
        .bind(name)
        .bind(sealed)
        .bind(at)
        .execute(&self.pool)
        .await
        .map_err(Error::Database)?;
        Ok(())
    }

    async fn remove_credential(&self, account: &str, application: i64, name: &str) -> Result<bool> {
        let done = sqlx::query(
            "DELETE FROM credentials WHERE account = ? AND application_id = ? AND name = ?",
        )
        .bind(account)
        .bind(application)
        .bind(name)
        .execute(&self.pool)
        .await
        .map_err(Error::Database)?;
        Ok(done.rows_affected() > 0)
    }

    async fn record_usage(&self, account: &str, meter: Meter, at: i64) -> Result<()> {
        sqlx::query("INSERT INTO usage (account, meter, at) VALUES (?, ?, ?)")
            .bind(account)
            .bind(meter.as_str())
            .bind(at)
            .execute(&self.pool)
            .await
            .map_err(Error::Database)?;
        Ok(())
    }

    async fn usage(&self, account: &str, from: i64, to: i64) -> Result<Vec<(Meter, i64)>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT meter, COUNT(*) FROM usage WHERE account = ? AND at >= ? AND at < ? GROUP BY meter",
        )
        .bind(account)
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await
        .map_err(Error::Database)?;
        // The CHECK constraint keeps unknown meter names out of the table.
        Ok(rows
            .into_iter()
            .filter_map(|(name, count)| Some((Meter::parse(&name)?, count)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (SqliteStore::open(dir.path()).await.unwrap(), dir)
    }

    #[tokio::test]
    async fn install_keeps_the_first_install_time_and_is_per_account() {
        let (store, _dir) = store().await;
        assert_eq!(store.install("alice", 1, 100).await.unwrap(), 100);
        assert_eq!(store.install("alice", 1, 200).await.unwrap(), 100);
        assert_eq!(store.installations("alice").await.unwrap(), vec![(1, 100)]);
        assert!(store.installations("bob").await.unwrap().is_empty());
        assert!(!store.uninstall("bob", 1).await.unwrap());
        assert!(store.uninstall("alice", 1).await.unwrap());
    }

    #[tokio::test]
    async fn usage_counts_per_meter_inside_the_period_only() {
        let (store, _dir) = store().await;
        for (meter, at) in [
            (Meter::Turn, 10),
            (Meter::Turn, 19),
            (Meter::Commit, 15),
            (Meter::Turn, 20),
        ] {
            store.record_usage("alice", meter, at).await.unwrap();
        }
        store.record_usage("bob", Meter::Turn, 12).await.unwrap();
        let mut usage = store.usage("alice", 10, 20).await.unwrap();
        usage.sort();
        assert_eq!(usage, vec![(Meter::Turn, 2), (Meter::Commit, 1)]);
    }

    #[tokio::test]
    async fn database_survives_reopening() {
        let (store, dir) = store().await;
        store
            .save_credential("alice", 1, "API_KEY", b"sealed", 5)
            .await
            .unwrap();
        drop(store);
        let reopened = SqliteStore::open(dir.path()).await.unwrap();
        let presence = reopened.credentials("alice", 1).await.unwrap();
        assert_eq!(
            presence,
            vec![CredentialPresence {
                name: "API_KEY".into(),
                updated_at: 5
            }]
        );
    }
}
