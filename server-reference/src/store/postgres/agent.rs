//! [`AgentStore`] on PostgreSQL. Every write to a session locks the session's row first, so that
//! writes from every process take turns on it: the turn state read, the sequence numbers assigned
//! and the rows written cannot race, and the locks are always taken in the same order.

use async_trait::async_trait;
use intent_models::TurnState;
use serde_json::{Map, Value};
use sqlx::{Postgres, Transaction};

use super::{EVENTS_CHANNEL, PgStore};
use crate::store::agent::{
    AgentStore, Append, Appended, Bounds, IdempotencyBegin, LogRead, Resolution, Resolved,
    SessionRecord, TurnStarted, event_body,
};
use crate::store::rows::{ActionRow, SessionRow, turn_state};
use crate::store::{Error, Meter, Result};

type Tx = Transaction<'static, Postgres>;

/// Locks session `id` (of `account`, when given) for the rest of the transaction; its last seq.
async fn lock_session(tx: &mut Tx, id: &str, account: Option<&str>) -> Result<Option<i64>> {
    let row: Option<(i64,)> = sqlx::query_as(
        "SELECT last_seq FROM sessions WHERE id = $1 AND ($2::TEXT IS NULL OR account = $2)
         FOR UPDATE",
    )
    .bind(id)
    .bind(account)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|(seq,)| seq))
}

/// Appends `append.events` after `last_seq` in the locked session, prunes what left the retained
/// log, moves the turn to `append.next_state`, and notifies the readers of every process when the
/// transaction commits.
async fn write_events(tx: &mut Tx, append: &Append, last_seq: i64) -> Result<Bounds> {
    let mut seq = last_seq;
    for event in &append.events {
        seq += 1;
        sqlx::query(
            "INSERT INTO events (session_id, seq, body, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(&append.session_id)
        .bind(seq)
        .bind(event_body(event, seq))
        .bind(append.at_ms)
        .execute(&mut **tx)
        .await?;
    }
    let (pruned_through,): (i64,) = sqlx::query_as(
        "UPDATE sessions SET last_seq = $1, updated_at = $2,
             pruned_through = GREATEST(pruned_through, COALESCE(
                 (SELECT MAX(seq) FROM events WHERE session_id = $3 AND created_at < $4), 0))
         WHERE id = $3
         RETURNING pruned_through",
    )
    .bind(seq)
    .bind(append.at_ms / 1000)
    .bind(&append.session_id)
    .bind(append.prune_before_ms)
    .fetch_one(&mut **tx)
    .await?;
    sqlx::query("DELETE FROM events WHERE session_id = $1 AND created_at < $2")
        .bind(&append.session_id)
        .bind(append.prune_before_ms)
        .execute(&mut **tx)
        .await?;
    if let Some(state) = append.next_state {
        sqlx::query("UPDATE turns SET state = $1 WHERE id = $2")
            .bind(state.to_string())
            .bind(&append.turn_id)
            .execute(&mut **tx)
            .await?;
        if state != TurnState::AwaitingAction {
            sqlx::query("UPDATE actions SET pending = FALSE WHERE turn_id = $1")
                .bind(&append.turn_id)
                .execute(&mut **tx)
                .await?;
        }
    }
    if let Some(action) = &append.action {
        sqlx::query(
            "INSERT INTO actions (id, session_id, turn_id, revision, pending, digest, request)
             VALUES ($1, $2, $3, $4, TRUE, $5, $6)",
        )
        .bind(&action.id)
        .bind(&append.session_id)
        .bind(&append.turn_id)
        .bind(action.revision)
        .bind(&action.digest)
        .bind(action.request.to_string())
        .execute(&mut **tx)
        .await?;
    }
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(EVENTS_CHANNEL)
        .bind(format!("{}:{seq}", append.session_id))
        .execute(&mut **tx)
        .await?;
    Ok(Bounds {
        last_seq: seq,
        pruned_through,
    })
}

#[async_trait]
impl AgentStore for PgStore {
    async fn create_session(&self, session: &SessionRecord) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO sessions (id, account, title, archived, updated_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&session.id)
        .bind(&session.account)
        .bind(&session.title)
        .bind(session.archived)
        .bind(session.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn session(&self, account: &str, id: &str) -> Result<Option<SessionRecord>> {
        let row: Option<SessionRow> = sqlx::query_as(
            "SELECT id, account, title, archived, updated_at FROM sessions WHERE id = $1 AND account = $2",
        )
        .bind(id)
        .bind(account)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(SessionRecord::from))
    }

    async fn update_session(
        &self,
        account: &str,
        id: &str,
        title: Option<&str>,
        archived: Option<bool>,
        at: i64,
    ) -> Result<Option<SessionRecord>> {
        // One statement: the change and its notification commit together, and the heads of the
        // session on every process are retired.
        let row: Option<SessionRow> = sqlx::query_as(
            "WITH updated AS (
                 UPDATE sessions SET title = COALESCE($1, title),
                     archived = COALESCE($2, archived), updated_at = $3
                 WHERE id = $4 AND account = $5
                 RETURNING id, account, title, archived, updated_at
             )
             SELECT id, account, title, archived, updated_at FROM updated,
                 LATERAL (SELECT pg_notify($6, id || ':updated')) AS notified",
        )
        .bind(title)
        .bind(archived)
        .bind(at)
        .bind(id)
        .bind(account)
        .bind(EVENTS_CHANNEL)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(SessionRecord::from))
    }

    async fn delete_session(&self, account: &str, id: &str) -> Result<bool> {
        // One statement: the deletion and its notification commit together, and the streams of
        // the session on every process end.
        let deleted: Option<(String,)> = sqlx::query_as(
            "WITH deleted AS (DELETE FROM sessions WHERE id = $1 AND account = $2 RETURNING id)
             SELECT pg_notify($3, id || ':deleted')::text FROM deleted",
        )
        .bind(id)
        .bind(account)
        .bind(EVENTS_CHANNEL)
        .fetch_optional(&self.pool)
        .await?;
        Ok(deleted.is_some())
    }

    async fn start_turn(&self, account: &str, append: &Append) -> Result<TurnStarted> {
        let mut tx = self.pool.begin().await?;
        let Some(before_seq) = lock_session(&mut tx, &append.session_id, Some(account)).await?
        else {
            return Ok(TurnStarted::NoSession);
        };
        let active: Option<(String,)> = sqlx::query_as(
            "SELECT id FROM turns WHERE session_id = $1 AND state IN ('processing', 'awaiting_action')",
        )
        .bind(&append.session_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((turn_id,)) = active {
            return Ok(TurnStarted::Busy { turn_id });
        }
        sqlx::query(
            "INSERT INTO turns (id, session_id, state, created_at, runner, lease_until)
             VALUES ($1, $2, 'processing', $3, $4, $5)",
        )
        .bind(&append.turn_id)
        .bind(&append.session_id)
        .bind(append.at_ms / 1000)
        .bind(&self.runner.id)
        .bind(append.at_ms + self.runner.lease_ms)
        .execute(&mut *tx)
        .await?;
        let bounds = write_events(&mut tx, append, before_seq).await?;
        sqlx::query("INSERT INTO usage (account, meter, at) VALUES ($1, $2, $3)")
            .bind(account)
            .bind(Meter::Turn.as_str())
            .bind(append.at_ms / 1000)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(TurnStarted::Started { before_seq, bounds })
    }

    async fn active_turn(&self, session_id: &str) -> Result<Option<(String, TurnState)>> {
        let row: Option<(String, String)> = sqlx::query_as(
            "SELECT id, state FROM turns
             WHERE session_id = $1 AND state IN ('processing', 'awaiting_action')",
        )
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(id, state)| Ok((id, turn_state(&state)?)))
            .transpose()
    }

    async fn claim_orphans(&self, now_ms: i64) -> Result<Vec<(String, String)>> {
        sqlx::query_as(
            "UPDATE turns SET runner = $1, lease_until = $2
             WHERE state = 'processing' AND lease_until < $3
             RETURNING session_id, id",
        )
        .bind(&self.runner.id)
        .bind(now_ms + self.runner.lease_ms)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(Error::from)
    }

    async fn renew_leases(&self, now_ms: i64) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE turns SET lease_until = $1 WHERE runner = $2 AND state = 'processing'",
        )
        .bind(now_ms + self.runner.lease_ms)
        .bind(&self.runner.id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn append(
        &self,
        append: &Append,
        accept: &(dyn Fn(TurnState) -> bool + Send + Sync),
    ) -> Result<Appended> {
        let mut tx = self.pool.begin().await?;
        let Some(last_seq) = lock_session(&mut tx, &append.session_id, None).await? else {
            return Ok(Appended::NoTurn);
        };
        let row: Option<(String,)> =
            sqlx::query_as("SELECT state FROM turns WHERE id = $1 AND session_id = $2")
                .bind(&append.turn_id)
                .bind(&append.session_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((state,)) = row else {
            return Ok(Appended::NoTurn);
        };
        let state = turn_state(&state)?;
        if !accept(state) {
            return Ok(Appended::Refused(state));
        }
        let bounds = write_events(&mut tx, append, last_seq).await?;
        tx.commit().await?;
        Ok(Appended::Done(bounds))
    }

    async fn read_log(
        &self,
        account: &str,
        session_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Option<LogRead>> {
        // One statement, so one snapshot: ownership, the events and the bounds agree, in one
        // round trip. No row: no such session of `account`.
        let rows: Vec<(i64, i64, Option<String>)> = sqlx::query_as(
            "SELECT s.last_seq, s.pruned_through, e.body
             FROM sessions s
             LEFT JOIN LATERAL (
                 SELECT body, seq FROM events
                 WHERE session_id = s.id AND seq > $2 ORDER BY seq LIMIT $3
             ) e ON TRUE
             WHERE s.id = $1 AND s.account = $4
             ORDER BY e.seq",
        )
        .bind(session_id)
        .bind(after)
        .bind(limit)
        .bind(account)
        .fetch_all(&self.pool)
        .await?;
        let Some(&(last_seq, pruned_through, _)) = rows.first() else {
            return Ok(None);
        };
        Ok(Some(LogRead {
            events: rows.into_iter().filter_map(|(_, _, body)| body).collect(),
            last_seq,
            pruned_through,
        }))
    }

    async fn resolve_action(
        &self,
        resolution: &Resolution,
        events: &(dyn for<'t> Fn(&'t str, i64) -> Vec<Map<String, Value>> + Send + Sync),
    ) -> Result<Resolved> {
        let mut tx = self.pool.begin().await?;
        let Some(last_seq) =
            lock_session(&mut tx, &resolution.session_id, Some(&resolution.account)).await?
        else {
            return Ok(Resolved::NotFound);
        };
        let row: Option<ActionRow> = sqlx::query_as(
            "SELECT turn_id, revision, pending, digest, request FROM actions
             WHERE id = $1 AND session_id = $2",
        )
        .bind(&resolution.action_id)
        .bind(&resolution.session_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(action) = row else {
            return Ok(Resolved::NotFound);
        };
        let revision = match action.resolve(resolution) {
            Ok(revision) => revision,
            Err(refused) => return Ok(refused),
        };
        sqlx::query("UPDATE actions SET revision = $1, pending = FALSE WHERE id = $2")
            .bind(revision)
            .bind(&resolution.action_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE turns SET runner = $1, lease_until = $2 WHERE id = $3")
            .bind(&self.runner.id)
            .bind(resolution.at_ms + self.runner.lease_ms)
            .bind(&action.turn_id)
            .execute(&mut *tx)
            .await?;
        let append = Append {
            session_id: resolution.session_id.clone(),
            turn_id: action.turn_id.clone(),
            events: events(&action.turn_id, revision),
            next_state: Some(TurnState::Processing),
            action: None,
            at_ms: resolution.at_ms,
            prune_before_ms: 0,
        };
        let bounds = write_events(&mut tx, &append, last_seq).await?;
        tx.commit().await?;
        action.resolved(revision, bounds)
    }

    async fn begin_idempotent(
        &self,
        account: &str,
        key: &str,
        request_hash: &str,
        at: i64,
        expired_before: i64,
    ) -> Result<IdempotencyBegin> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE account = $1 AND key = $2 AND created_at < $3",
        )
        .bind(account)
        .bind(key)
        .bind(expired_before)
        .execute(&mut *tx)
        .await?;
        // A concurrent claim of the same key waits here for the first one to commit.
        let claimed = sqlx::query(
            "INSERT INTO idempotency_keys (account, key, request_hash, created_at)
             VALUES ($1, $2, $3, $4) ON CONFLICT (account, key) DO NOTHING",
        )
        .bind(account)
        .bind(key)
        .bind(request_hash)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        let begin = if claimed.rows_affected() == 1 {
            IdempotencyBegin::Started
        } else {
            let row: Option<(String, Option<String>)> = sqlx::query_as(
                "SELECT request_hash, response FROM idempotency_keys WHERE account = $1 AND key = $2",
            )
            .bind(account)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
            match row {
                Some((hash, _)) if hash != request_hash => IdempotencyBegin::Reused,
                Some((_, Some(answer))) => IdempotencyBegin::Replay { answer },
                // In flight, or abandoned a moment ago: the client retries.
                Some((_, None)) | None => IdempotencyBegin::InFlight,
            }
        };
        tx.commit().await?;
        Ok(begin)
    }

    async fn finish_idempotent(&self, account: &str, key: &str, answer: &str) -> Result<()> {
        sqlx::query("UPDATE idempotency_keys SET response = $1 WHERE account = $2 AND key = $3")
            .bind(answer)
            .bind(account)
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn abandon_idempotent(&self, account: &str, key: &str) -> Result<()> {
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE account = $1 AND key = $2 AND response IS NULL",
        )
        .bind(account)
        .bind(key)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
