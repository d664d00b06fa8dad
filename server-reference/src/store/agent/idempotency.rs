//! Idempotency keys: a request claims its key once, and a repeat replays the recorded answer.

use super::rows::IdempotencyRow;
use crate::ids::AccountId;
use crate::store::agent::IdempotencyBegin;
use crate::store::engine::sql;
use crate::store::{Result, Store};

impl Store {
    /// Claims `key` for a request whose body hashes to `request_hash`; a record created
    /// before `expired_before` is forgotten first.
    pub async fn begin_idempotent(
        &self,
        account: &AccountId,
        key: &str,
        request_hash: &str,
        at: i64,
        expired_before: i64,
    ) -> Result<IdempotencyBegin> {
        let mut tx = self.db.begin().await?;
        tx.execute(
            sql("DELETE FROM idempotency_keys WHERE account = $1 AND key = $2 AND created_at < $3")
                .bind(account.as_str())
                .bind(key)
                .bind(expired_before),
        )
        .await?;
        // A concurrent claim of the same key waits here for the first one to commit.
        let claimed = tx
            .execute(
                sql(
                    "INSERT INTO idempotency_keys (account, key, request_hash, created_at)
                     VALUES ($1, $2, $3, $4) ON CONFLICT (account, key) DO NOTHING",
                )
                .bind(account.as_str())
                .bind(key)
                .bind(request_hash)
                .bind(at),
            )
            .await?;
        let begin = if claimed == 1 {
            IdempotencyBegin::Started
        } else {
            let row: Option<IdempotencyRow> = tx
                .fetch_optional(
                    sql("SELECT request_hash, response FROM idempotency_keys
                         WHERE account = $1 AND key = $2")
                    .bind(account.as_str())
                    .bind(key),
                )
                .await?;
            match row {
                Some(row) if row.request_hash != request_hash => IdempotencyBegin::Reused,
                Some(IdempotencyRow {
                    response: Some(answer),
                    ..
                }) => IdempotencyBegin::Replay { answer },
                // In flight, or abandoned a moment ago: the client retries.
                Some(_) | None => IdempotencyBegin::InFlight,
            }
        };
        tx.commit().await?;
        Ok(begin)
    }

    /// Records the answer (JSON) to the request that claimed `key`.
    pub async fn finish_idempotent(
        &self,
        account: &AccountId,
        key: &str,
        answer: &str,
    ) -> Result<()> {
        self.db
            .execute(
                sql("UPDATE idempotency_keys SET response = $1 WHERE account = $2 AND key = $3")
                    .bind(answer)
                    .bind(account.as_str())
                    .bind(key),
            )
            .await?;
        Ok(())
    }

    /// Releases `key` after a failure that a retry may fix.
    pub async fn abandon_idempotent(&self, account: &AccountId, key: &str) -> Result<()> {
        self.db
            .execute(
                sql("DELETE FROM idempotency_keys
                     WHERE account = $1 AND key = $2 AND response IS NULL")
                .bind(account.as_str())
                .bind(key),
            )
            .await?;
        Ok(())
    }
}
