//! The embedded SQLite store: one file in the data dir, WAL journal, `synchronous=FULL`.

mod agent;

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::rows::{CodeRow, DeviceRow, authorization_code, device_grant, select_device_grant};
use super::{
    Authorization, AuthorizationCode, CommitRecorded, CredentialPresence, DeviceGrant, Error,
    Meter, NewCommit, Purged, RefreshUse, Result, Runner, Store,
};

/// SQLite behind [`Store`]: one process owns the file.
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    runner: Runner,
}

impl SqliteStore {
    /// Opens (creating it if needed) `intent.db` in `data_dir` and applies the migrations. The
    /// file has one process, `runner`: every turn lease of an earlier process has ended.
    pub async fn open(data_dir: &Path, runner: Runner) -> Result<Self> {
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
            .await?;
        super::migrations::sqlite()
            .await
            .map_err(Error::Migrate)?
            .run(&pool)
            .await
            .map_err(Error::Migrate)?;
        sqlx::query("UPDATE turns SET lease_until = 0 WHERE state = 'processing'")
            .execute(&pool)
            .await?;
        Ok(Self { pool, runner })
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn purge(&self, expired_before: i64, keys_before: i64) -> Result<Purged> {
        let mut tx = self.pool.begin().await?;
        let mut delete = async |sql: &'static str, before: i64| -> Result<u64> {
            let done = sqlx::query(sql).bind(before).execute(&mut *tx).await?;
            Ok(done.rows_affected())
        };
        let purged = Purged {
            codes: delete("DELETE FROM authorization_codes WHERE expires_at < ?", expired_before)
                .await?,
            device_grants: delete("DELETE FROM device_grants WHERE expires_at < ?", expired_before)
                .await?,
            idempotency_keys: delete(
                "DELETE FROM idempotency_keys WHERE created_at < ?",
                keys_before,
            )
            .await?,
            refresh_tokens: delete(
                "DELETE FROM refresh_tokens WHERE family IN
                     (SELECT family FROM refresh_tokens GROUP BY family HAVING MAX(expires_at) < ?)",
                expired_before,
            )
            .await?,
        };
        tx.commit().await?;
        Ok(purged)
    }

    async fn installations(&self, account: &str) -> Result<Vec<(i64, i64)>> {
        sqlx::query_as(
            "SELECT application_id, installed_at FROM installations WHERE account = ? ORDER BY application_id",
        )
        .bind(account)
        .fetch_all(&self.pool)
        .await
        .map_err(Error::from)
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
        .await?;
        Ok(installed_at)
    }

    async fn uninstall(&self, account: &str, application: i64) -> Result<bool> {
        let done =
            sqlx::query("DELETE FROM installations WHERE account = ? AND application_id = ?")
                .bind(account)
                .bind(application)
                .execute(&self.pool)
                .await?;
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
        .await?;
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
        .await?;
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
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn record_usage(&self, account: &str, meter: Meter, at: i64) -> Result<()> {
        sqlx::query("INSERT INTO usage (account, meter, at) VALUES (?, ?, ?)")
            .bind(account)
            .bind(meter.as_str())
            .bind(at)
            .execute(&self.pool)
            .await?;
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
        .await?;
        // The CHECK constraint keeps unknown meter names out of the table.
        Ok(rows
            .into_iter()
            .filter_map(|(name, count)| Some((Meter::parse(&name)?, count)))
            .collect())
    }

    async fn record_commit(&self, commit: &NewCommit<'_>) -> Result<CommitRecorded> {
        // Immediate: the check and the insert hold the database's one write lock.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let (last,): (i64,) =
            sqlx::query_as("SELECT COALESCE(MAX(seq), 0) FROM commits WHERE chain = ?")
                .bind(commit.chain)
                .fetch_one(&mut *tx)
                .await?;
        if last != commit.applied_through {
            return Ok(CommitRecorded::Behind);
        }
        let seq: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO commits (chain, digest, account, actions, committed_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (digest) DO NOTHING RETURNING seq",
        )
        .bind(commit.chain)
        .bind(commit.digest)
        .bind(commit.account)
        .bind(commit.actions)
        .bind(commit.at)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((seq,)) = seq else {
            return Ok(CommitRecorded::Duplicate);
        };
        sqlx::query("INSERT INTO usage (account, meter, at) VALUES (?, ?, ?)")
            .bind(commit.account)
            .bind(Meter::Commit.as_str())
            .bind(commit.at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(CommitRecorded::Done(seq))
    }

    async fn commits_after(&self, chain: &str, after: i64) -> Result<Vec<(i64, String)>> {
        sqlx::query_as("SELECT seq, actions FROM commits WHERE chain = ? AND seq > ? ORDER BY seq")
            .bind(chain)
            .bind(after)
            .fetch_all(&self.pool)
            .await
            .map_err(Error::from)
    }

    async fn save_code(&self, code_hash: &str, code: &AuthorizationCode) -> Result<()> {
        sqlx::query(
            "INSERT INTO authorization_codes
             (code_hash, client_id, redirect_uri, account, scopes, resource, code_challenge, expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(code_hash)
        .bind(&code.grant.client_id)
        .bind(&code.redirect_uri)
        .bind(&code.grant.account)
        .bind(&code.grant.scopes)
        .bind(&code.grant.resource)
        .bind(&code.code_challenge)
        .bind(code.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn take_code(&self, code_hash: &str) -> Result<Option<AuthorizationCode>> {
        let row: Option<CodeRow> = sqlx::query_as(
            "UPDATE authorization_codes SET used = 1 WHERE code_hash = ? AND used = 0
             RETURNING client_id, redirect_uri, account, scopes, resource, code_challenge, expires_at",
        )
        .bind(code_hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(authorization_code))
    }

    async fn save_device_grant(&self, device_code_hash: &str, grant: &DeviceGrant) -> Result<()> {
        sqlx::query(
            "INSERT INTO device_grants
             (device_code_hash, user_code, client_id, scopes, resource, status, interval_secs, expires_at)
             VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
        )
        .bind(device_code_hash)
        .bind(&grant.user_code)
        .bind(&grant.client_id)
        .bind(&grant.scopes)
        .bind(&grant.resource)
        .bind(grant.interval_secs)
        .bind(grant.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn device_grant_by_user_code(&self, user_code: &str) -> Result<Option<DeviceGrant>> {
        let row: Option<DeviceRow> = sqlx::query_as(select_device_grant!("user_code = ?"))
            .bind(user_code)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.and_then(device_grant))
    }

    async fn decide_device_grant(
        &self,
        user_code: &str,
        account: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        let status = if account.is_some() {
            "approved"
        } else {
            "denied"
        };
        let done = sqlx::query(
            "UPDATE device_grants SET status = ?, account = ?
             WHERE user_code = ? AND status = 'pending' AND expires_at > ?",
        )
        .bind(status)
        .bind(account)
        .bind(user_code)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn poll_device_grant(
        &self,
        device_code_hash: &str,
        now_ms: i64,
    ) -> Result<Option<DeviceGrant>> {
        // Immediate: the read and the write below must not race another poll's commit.
        let mut transaction = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row: Option<DeviceRow> = sqlx::query_as(select_device_grant!("device_code_hash = ?"))
            .bind(device_code_hash)
            .fetch_optional(&mut *transaction)
            .await?;
        sqlx::query("UPDATE device_grants SET last_poll_ms = ? WHERE device_code_hash = ?")
            .bind(now_ms)
            .bind(device_code_hash)
            .execute(&mut *transaction)
            .await?;
        transaction.commit().await?;
        Ok(row.and_then(device_grant))
    }

    async fn slow_device_grant(&self, device_code_hash: &str, by: i64) -> Result<()> {
        sqlx::query(
            "UPDATE device_grants SET interval_secs = interval_secs + ? WHERE device_code_hash = ?",
        )
        .bind(by)
        .bind(device_code_hash)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn consume_device_grant(&self, device_code_hash: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE device_grants SET status = 'used' WHERE device_code_hash = ? AND status = 'approved'",
        )
        .bind(device_code_hash)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn save_refresh_token(
        &self,
        token_hash: &str,
        family: &str,
        grant: &Authorization,
        expires_at: i64,
    ) -> Result<bool> {
        // One statement, so that a replay revoking the family cannot slip between the check and
        // the insert: a revoked family never gains an active token.
        let done = sqlx::query(
            "INSERT INTO refresh_tokens (token_hash, family, client_id, account, scopes, resource, expires_at, status)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'active'
             WHERE NOT EXISTS (SELECT 1 FROM refresh_tokens WHERE family = ?2 AND status = 'revoked')",
        )
        .bind(token_hash)
        .bind(family)
        .bind(&grant.client_id)
        .bind(&grant.account)
        .bind(&grant.scopes)
        .bind(&grant.resource)
        .bind(expires_at)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn revoke_refresh_family(&self, family: &str) -> Result<()> {
        sqlx::query("UPDATE refresh_tokens SET status = 'revoked' WHERE family = ?")
            .bind(family)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn use_refresh_token(
        &self,
        token_hash: &str,
        accept: &(dyn for<'g> Fn(&'g Authorization, i64) -> bool + Send + Sync),
    ) -> Result<RefreshUse> {
        let mut transaction = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        type Row = (String, String, String, String, String, i64, String);
        let row: Option<Row> = sqlx::query_as(
            "SELECT family, client_id, account, scopes, resource, expires_at, status
             FROM refresh_tokens WHERE token_hash = ?",
        )
        .bind(token_hash)
        .fetch_optional(&mut *transaction)
        .await?;
        let Some((family, client_id, account, scopes, stored_resource, expires_at, status)) = row
        else {
            return Ok(RefreshUse::Unknown);
        };
        let outcome = if status != "active" {
            // A used or revoked token presented again: revoke everything rotated from it.
            sqlx::query("UPDATE refresh_tokens SET status = 'revoked' WHERE family = ?")
                .bind(&family)
                .execute(&mut *transaction)
                .await?;
            RefreshUse::Replayed
        } else {
            let grant = Authorization {
                client_id,
                account,
                scopes,
                resource: stored_resource,
            };
            if accept(&grant, expires_at) {
                sqlx::query("UPDATE refresh_tokens SET status = 'used' WHERE token_hash = ?")
                    .bind(token_hash)
                    .execute(&mut *transaction)
                    .await?;
                RefreshUse::Rotated {
                    grant,
                    family,
                    expires_at,
                }
            } else {
                // Refused before use: the token stays active.
                RefreshUse::Refused { grant, expires_at }
            }
        };
        transaction.commit().await?;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner() -> Runner {
        Runner {
            id: "test".into(),
            lease_ms: 10_000,
        }
    }

    async fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (SqliteStore::open(dir.path(), runner()).await.unwrap(), dir)
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
    async fn a_commit_is_recorded_behind_the_last_one_with_its_usage_or_not_at_all() {
        let (store, _dir) = store().await;
        let commit = |digest, applied_through| NewCommit {
            chain: "evm",
            applied_through,
            digest,
            account: "alice",
            actions: "[]",
            at: 15,
        };
        let first = store.record_commit(&commit("0x01", 0)).await.unwrap();
        assert_eq!(first, CommitRecorded::Done(1));
        // A state that does not include commit 1, and a digest committed already.
        let behind = store.record_commit(&commit("0x02", 0)).await.unwrap();
        assert_eq!(behind, CommitRecorded::Behind);
        let again = store.record_commit(&commit("0x01", 1)).await.unwrap();
        assert_eq!(again, CommitRecorded::Duplicate);
        assert_eq!(
            store.usage("alice", 0, 100).await.unwrap(),
            vec![(Meter::Commit, 1)]
        );
        assert_eq!(store.commits_after("evm", 0).await.unwrap().len(), 1);
    }

    /// What the refresh tokens of these tests grant.
    fn agent_grant() -> Authorization {
        Authorization {
            client_id: "c".into(),
            account: "alice".into(),
            scopes: "agent:read".into(),
            resource: "http://h/v1/agent".into(),
        }
    }

    #[tokio::test]
    async fn a_replayed_refresh_token_revokes_its_family_for_good() {
        let (store, _dir) = store().await;
        let grant = agent_grant();
        assert!(
            store
                .save_refresh_token("first", "fam", &grant, 100)
                .await
                .unwrap()
        );
        let rotated = store
            .use_refresh_token("first", &|_, _| true)
            .await
            .unwrap();
        assert!(matches!(rotated, RefreshUse::Rotated { .. }));
        assert!(
            store
                .save_refresh_token("second", "fam", &grant, 100)
                .await
                .unwrap()
        );
        assert!(matches!(
            store
                .use_refresh_token("first", &|_, _| true)
                .await
                .unwrap(),
            RefreshUse::Replayed
        ));
        let second = store
            .use_refresh_token("second", &|_, _| true)
            .await
            .unwrap();
        assert!(matches!(second, RefreshUse::Replayed), "family revoked");
        // A rotation that finishes after the replay must not revive the family.
        assert!(
            !store
                .save_refresh_token("third", "fam", &grant, 100)
                .await
                .unwrap()
        );
        assert!(matches!(
            store
                .use_refresh_token("third", &|_, _| true)
                .await
                .unwrap(),
            RefreshUse::Unknown
        ));
    }

    #[tokio::test]
    async fn a_refused_refresh_token_stays_usable() {
        let (store, _dir) = store().await;
        let grant = agent_grant();
        assert!(
            store
                .save_refresh_token("t", "fam", &grant, 100)
                .await
                .unwrap()
        );
        let wrong = store
            .use_refresh_token("t", &|g, _| g.resource == "http://h/v1/account")
            .await
            .unwrap();
        assert!(matches!(wrong, RefreshUse::Refused { .. }));
        let right = store
            .use_refresh_token("t", &|g, _| g.resource == "http://h/v1/agent")
            .await
            .unwrap();
        assert!(matches!(right, RefreshUse::Rotated { .. }));
    }

    #[tokio::test]
    async fn database_survives_reopening() {
        let (store, dir) = store().await;
        store
            .save_credential("alice", 1, "API_KEY", b"sealed", 5)
            .await
            .unwrap();
        drop(store);
        let reopened = SqliteStore::open(dir.path(), runner()).await.unwrap();
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
