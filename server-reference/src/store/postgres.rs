//! The PostgreSQL store, shared by every server process of a deployment. Migrations run at
//! start under sqlx's advisory lock, so processes that start together apply them once. Writes
//! that must not interleave across processes lock a row (a session) or take a transaction-scoped
//! advisory lock (a chain's commits, a refresh-token family); every append notifies
//! [`EVENTS_CHANNEL`] when it commits, which wakes the readers of every process, and message
//! snapshots reach the streams of every process through [`SNAPSHOTS_CHANNEL`].

mod agent;
mod listen;

pub use listen::Notified;
use listen::Relayed;

use std::time::Duration;

use async_trait::async_trait;
use intent_models::MessageSnapshot;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection, Postgres, Transaction};

use super::rows::{CodeRow, DeviceRow, authorization_code, device_grant, select_device_grant};
use super::{
    Authorization, AuthorizationCode, CommitRecorded, CredentialPresence, DeviceGrant, Error,
    Meter, NewCommit, Purged, RefreshUse, Result, Runner, Store,
};

/// The channel appends notify, with `session:last_seq` as the payload, and deletions, with
/// `session:deleted`.
pub const EVENTS_CHANNEL: &str = "intent_events";

/// The channel message snapshots are relayed on, with a [`Relayed`] as the JSON payload.
pub const SNAPSHOTS_CHANNEL: &str = "intent_snapshots";

/// PostgreSQL refuses a notification payload of 8,000 bytes or more.
const MAX_PAYLOAD: usize = 7_999;

/// How long a request waits for a pooled connection before the database counts as unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// PostgreSQL behind [`Store`].
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    runner: Runner,
}

impl PgStore {
    /// Connects to `url` and applies the migrations; turns this process starts are leased to
    /// `runner`.
    pub async fn open(url: &str, runner: Runner) -> Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        // One connection first, so that an unreachable database fails with its own cause
        // rather than with the pool's time-out.
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
        Ok(Self { pool, runner })
    }

    /// Tells `notified` what every process on the database appends and deletes and what the
    /// others relay, until the store closes.
    pub async fn follow_notifications(&self, notified: impl Notified) {
        listen::follow(self.pool.clone(), &self.runner.id, notified).await;
    }

    /// Hands `snapshot` of `session` to the other processes. One too large for a notification
    /// is not relayed: snapshots are transient, and the message's event follows.
    pub async fn relay_snapshot(&self, session: &str, snapshot: MessageSnapshot) -> Result<()> {
        let payload = serde_json::to_string(&Relayed {
            from: self.runner.id.clone(),
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

/// Takes the transaction-scoped advisory lock named `name`.
async fn advisory_lock(tx: &mut Transaction<'static, Postgres>, name: &str) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(name)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[async_trait]
impl Store for PgStore {
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
            codes: delete("DELETE FROM authorization_codes WHERE expires_at < $1", expired_before)
                .await?,
            device_grants: delete("DELETE FROM device_grants WHERE expires_at < $1", expired_before)
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

    async fn installations(&self, account: &str) -> Result<Vec<(i64, i64)>> {
        sqlx::query_as(
            "SELECT application_id, installed_at FROM installations WHERE account = $1 ORDER BY application_id",
        )
        .bind(account)
        .fetch_all(&self.pool)
        .await
        .map_err(Error::from)
    }

    async fn install(&self, account: &str, application: i64, at: i64) -> Result<i64> {
        let (installed_at,): (i64,) = sqlx::query_as(
            "INSERT INTO installations (account, application_id, installed_at) VALUES ($1, $2, $3)
             ON CONFLICT (account, application_id)
                 DO UPDATE SET installed_at = installations.installed_at
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
            sqlx::query("DELETE FROM installations WHERE account = $1 AND application_id = $2")
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
            "SELECT name, updated_at FROM credentials WHERE account = $1 AND application_id = $2 ORDER BY name",
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
            "INSERT INTO credentials (account, application_id, name, sealed, updated_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (account, application_id, name)
                 DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
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
            "DELETE FROM credentials WHERE account = $1 AND application_id = $2 AND name = $3",
        )
        .bind(account)
        .bind(application)
        .bind(name)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn record_usage(&self, account: &str, meter: Meter, at: i64) -> Result<()> {
        sqlx::query("INSERT INTO usage (account, meter, at) VALUES ($1, $2, $3)")
            .bind(account)
            .bind(meter.as_str())
            .bind(at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn usage(&self, account: &str, from: i64, to: i64) -> Result<Vec<(Meter, i64)>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT meter, COUNT(*) FROM usage WHERE account = $1 AND at >= $2 AND at < $3 GROUP BY meter",
        )
        .bind(account)
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(name, count)| Some((Meter::parse(&name)?, count)))
            .collect())
    }

    async fn record_commit(&self, commit: &NewCommit<'_>) -> Result<CommitRecorded> {
        let mut tx = self.pool.begin().await?;
        // One committer per chain across every process, until this transaction ends.
        advisory_lock(&mut tx, &format!("intent.devnet.{}", commit.chain)).await?;
        let (last,): (i64,) =
            sqlx::query_as("SELECT COALESCE(MAX(seq), 0) FROM commits WHERE chain = $1")
                .bind(commit.chain)
                .fetch_one(&mut *tx)
                .await?;
        if last != commit.applied_through {
            return Ok(CommitRecorded::Behind);
        }
        let seq: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO commits (chain, digest, account, actions, committed_at) VALUES ($1, $2, $3, $4, $5)
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
        sqlx::query("INSERT INTO usage (account, meter, at) VALUES ($1, $2, $3)")
            .bind(commit.account)
            .bind(Meter::Commit.as_str())
            .bind(commit.at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(CommitRecorded::Done(seq))
    }

    async fn commits_after(&self, chain: &str, after: i64) -> Result<Vec<(i64, String)>> {
        sqlx::query_as(
            "SELECT seq, actions FROM commits WHERE chain = $1 AND seq > $2 ORDER BY seq",
        )
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
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
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
            "UPDATE authorization_codes SET used = TRUE WHERE code_hash = $1 AND NOT used
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
             VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7)",
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
        let row: Option<DeviceRow> = sqlx::query_as(select_device_grant!("user_code = $1"))
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
            "UPDATE device_grants SET status = $1, account = $2
             WHERE user_code = $3 AND status = 'pending' AND expires_at > $4",
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
        let mut tx = self.pool.begin().await?;
        let row: Option<DeviceRow> =
            sqlx::query_as(select_device_grant!("device_code_hash = $1 FOR UPDATE"))
                .bind(device_code_hash)
                .fetch_optional(&mut *tx)
                .await?;
        sqlx::query("UPDATE device_grants SET last_poll_ms = $1 WHERE device_code_hash = $2")
            .bind(now_ms)
            .bind(device_code_hash)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(row.and_then(device_grant))
    }

    async fn slow_device_grant(&self, device_code_hash: &str, by: i64) -> Result<()> {
        sqlx::query(
            "UPDATE device_grants SET interval_secs = interval_secs + $1 WHERE device_code_hash = $2",
        )
        .bind(by)
        .bind(device_code_hash)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn consume_device_grant(&self, device_code_hash: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE device_grants SET status = 'used' WHERE device_code_hash = $1 AND status = 'approved'",
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
        // Under the family's lock, so that a replay revoking it cannot slip between the check
        // and the insert: a revoked family never gains an active token.
        let mut tx = self.pool.begin().await?;
        advisory_lock(&mut tx, &format!("intent.refresh.{family}")).await?;
        let done = sqlx::query(
            "INSERT INTO refresh_tokens (token_hash, family, client_id, account, scopes, resource, expires_at, status)
             SELECT $1, $2, $3, $4, $5, $6, $7, 'active'
             WHERE NOT EXISTS (SELECT 1 FROM refresh_tokens WHERE family = $2 AND status = 'revoked')",
        )
        .bind(token_hash)
        .bind(family)
        .bind(&grant.client_id)
        .bind(&grant.account)
        .bind(&grant.scopes)
        .bind(&grant.resource)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    async fn revoke_refresh_family(&self, family: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        advisory_lock(&mut tx, &format!("intent.refresh.{family}")).await?;
        sqlx::query("UPDATE refresh_tokens SET status = 'revoked' WHERE family = $1")
            .bind(family)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn use_refresh_token(
        &self,
        token_hash: &str,
        accept: &(dyn for<'g> Fn(&'g Authorization, i64) -> bool + Send + Sync),
    ) -> Result<RefreshUse> {
        let mut tx = self.pool.begin().await?;
        type Row = (String, String, String, String, String, i64, String);
        let row: Option<Row> = sqlx::query_as(
            "SELECT family, client_id, account, scopes, resource, expires_at, status
             FROM refresh_tokens WHERE token_hash = $1 FOR UPDATE",
        )
        .bind(token_hash)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((family, client_id, account, scopes, stored_resource, expires_at, status)) = row
        else {
            return Ok(RefreshUse::Unknown);
        };
        let outcome = if status != "active" {
            advisory_lock(&mut tx, &format!("intent.refresh.{family}")).await?;
            sqlx::query("UPDATE refresh_tokens SET status = 'revoked' WHERE family = $1")
                .bind(&family)
                .execute(&mut *tx)
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
                sqlx::query("UPDATE refresh_tokens SET status = 'used' WHERE token_hash = $1")
                    .bind(token_hash)
                    .execute(&mut *tx)
                    .await?;
                RefreshUse::Rotated {
                    grant,
                    family,
                    expires_at,
                }
            } else {
                RefreshUse::Refused { grant, expires_at }
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }
}
