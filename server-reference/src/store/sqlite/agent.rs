//! [`AgentStore`] on SQLite. Every write runs in one `BEGIN IMMEDIATE` transaction, so that the
//! turn state read, the sequence numbers assigned and the rows written cannot race.

use async_trait::async_trait;
use intent_models::TurnState;
use serde_json::{Map, Value};
use sqlx::{Sqlite, Transaction};

use super::SqliteStore;
use crate::store::agent::{
    AgentStore, Append, Appended, Bounds, IdempotencyBegin, LogRead, Resolution, Resolved,
    SessionRecord, TurnStarted, event_body,
};
use crate::store::rows::{ActionRow, SessionRow, turn_state};
use crate::store::{Error, Meter, Result};

type Tx = Transaction<'static, Sqlite>;

impl SqliteStore {
    async fn immediate(&self) -> Result<Tx> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(Error::from)
    }
}

/// Appends `append.events` after the session's last sequence number, prunes what left the
/// retained log, and moves the turn to `append.next_state`.
async fn write_events(tx: &mut Tx, append: &Append) -> Result<Bounds> {
    let (mut seq,): (i64,) = sqlx::query_as("SELECT last_seq FROM sessions WHERE id = ?")
        .bind(&append.session_id)
        .fetch_one(&mut **tx)
        .await?;
    for event in &append.events {
        seq += 1;
        sqlx::query("INSERT INTO events (session_id, seq, body, created_at) VALUES (?, ?, ?, ?)")
            .bind(&append.session_id)
            .bind(seq)
            .bind(event_body(event, seq))
            .bind(append.at_ms)
            .execute(&mut **tx)
            .await?;
    }
    let (pruned_through,): (i64,) = sqlx::query_as(
        "UPDATE sessions SET last_seq = ?1, updated_at = ?2,
             pruned_through = MAX(pruned_through, COALESCE(
                 (SELECT MAX(seq) FROM events WHERE session_id = ?3 AND created_at < ?4), 0))
         WHERE id = ?3
         RETURNING pruned_through",
    )
    .bind(seq)
    .bind(append.at_ms / 1000)
    .bind(&append.session_id)
    .bind(append.prune_before_ms)
    .fetch_one(&mut **tx)
    .await?;
    sqlx::query("DELETE FROM events WHERE session_id = ? AND created_at < ?")
        .bind(&append.session_id)
        .bind(append.prune_before_ms)
        .execute(&mut **tx)
        .await?;
    if let Some(state) = append.next_state {
        sqlx::query("UPDATE turns SET state = ? WHERE id = ?")
            .bind(state.to_string())
            .bind(&append.turn_id)
            .execute(&mut **tx)
            .await?;
        if state != TurnState::AwaitingAction {
            sqlx::query("UPDATE actions SET pending = 0 WHERE turn_id = ?")
                .bind(&append.turn_id)
                .execute(&mut **tx)
                .await?;
        }
    }
    if let Some(action) = &append.action {
        sqlx::query(
            "INSERT INTO actions (id, session_id, turn_id, revision, pending, digest, request)
             VALUES (?, ?, ?, ?, 1, ?, ?)",
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
    Ok(Bounds {
        last_seq: seq,
        pruned_through,
    })
}

#[async_trait]
impl AgentStore for SqliteStore {
    async fn create_session(&self, session: &SessionRecord) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO sessions (id, account, title, archived, updated_at) VALUES (?, ?, ?, ?, ?)
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
            "SELECT id, account, title, archived, updated_at FROM sessions WHERE id = ? AND account = ?",
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
        let row: Option<SessionRow> = sqlx::query_as(
            "UPDATE sessions SET title = COALESCE(?, title), archived = COALESCE(?, archived),
                 updated_at = ?
             WHERE id = ? AND account = ?
             RETURNING id, account, title, archived, updated_at",
        )
        .bind(title)
        .bind(archived)
        .bind(at)
        .bind(id)
        .bind(account)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(SessionRecord::from))
    }

    async fn delete_session(&self, account: &str, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM sessions WHERE id = ? AND account = ?")
            .bind(id)
            .bind(account)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn start_turn(&self, account: &str, append: &Append) -> Result<TurnStarted> {
        let mut tx = self.immediate().await?;
        let owner: Option<(i64,)> =
            sqlx::query_as("SELECT last_seq FROM sessions WHERE id = ? AND account = ?")
                .bind(&append.session_id)
                .bind(account)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((before_seq,)) = owner else {
            return Ok(TurnStarted::NoSession);
        };
        let active: Option<(String,)> = sqlx::query_as(
            "SELECT id FROM turns WHERE session_id = ? AND state IN ('processing', 'awaiting_action')",
        )
        .bind(&append.session_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((turn_id,)) = active {
            return Ok(TurnStarted::Busy { turn_id });
        }
        sqlx::query(
            "INSERT INTO turns (id, session_id, state, created_at, runner, lease_until)
             VALUES (?, ?, 'processing', ?, ?, ?)",
        )
        .bind(&append.turn_id)
        .bind(&append.session_id)
        .bind(append.at_ms / 1000)
        .bind(&self.runner.id)
        .bind(append.at_ms + self.runner.lease_ms)
        .execute(&mut *tx)
        .await?;
        let bounds = write_events(&mut tx, append).await?;
        sqlx::query("INSERT INTO usage (account, meter, at) VALUES (?, ?, ?)")
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
             WHERE session_id = ? AND state IN ('processing', 'awaiting_action')",
        )
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(id, state)| Ok((id, turn_state(&state)?)))
            .transpose()
    }

    async fn claim_orphans(&self, now_ms: i64) -> Result<Vec<(String, String)>> {
        sqlx::query_as(
            "UPDATE turns SET runner = ?, lease_until = ?
             WHERE state = 'processing' AND lease_until < ?
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
            "UPDATE turns SET lease_until = ? WHERE runner = ? AND state = 'processing'",
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
        let mut tx = self.immediate().await?;
        let row: Option<(String,)> =
            sqlx::query_as("SELECT state FROM turns WHERE id = ? AND session_id = ?")
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
        let bounds = write_events(&mut tx, append).await?;
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
        // One read transaction: the events and the log's bounds come from the same snapshot.
        let mut tx = self.pool.begin().await?;
        let bounds: Option<(i64, i64)> = sqlx::query_as(
            "SELECT last_seq, pruned_through FROM sessions WHERE id = ? AND account = ?",
        )
        .bind(session_id)
        .bind(account)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((last_seq, pruned_through)) = bounds else {
            return Ok(None);
        };
        let events: Vec<(String,)> = sqlx::query_as(
            "SELECT body FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(session_id)
        .bind(after)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(LogRead {
            events: events.into_iter().map(|(body,)| body).collect(),
            last_seq,
            pruned_through,
        }))
    }

    async fn resolve_action(
        &self,
        resolution: &Resolution,
        events: &(dyn for<'t> Fn(&'t str, i64) -> Vec<Map<String, Value>> + Send + Sync),
    ) -> Result<Resolved> {
        let mut tx = self.immediate().await?;
        let row: Option<ActionRow> = sqlx::query_as(
            "SELECT a.turn_id, a.revision, a.pending, a.digest, a.request
             FROM actions a JOIN sessions s ON s.id = a.session_id
             WHERE a.id = ? AND a.session_id = ? AND s.account = ?",
        )
        .bind(&resolution.action_id)
        .bind(&resolution.session_id)
        .bind(&resolution.account)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(action) = row else {
            return Ok(Resolved::NotFound);
        };
        let revision = match action.resolve(resolution) {
            Ok(revision) => revision,
            Err(refused) => return Ok(refused),
        };
        sqlx::query("UPDATE actions SET revision = ?, pending = 0 WHERE id = ?")
            .bind(revision)
            .bind(&resolution.action_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE turns SET runner = ?, lease_until = ? WHERE id = ?")
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
        let bounds = write_events(&mut tx, &append).await?;
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
        let mut tx = self.immediate().await?;
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE account = ? AND key = ? AND created_at < ?",
        )
        .bind(account)
        .bind(key)
        .bind(expired_before)
        .execute(&mut *tx)
        .await?;
        let row: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT request_hash, response FROM idempotency_keys WHERE account = ? AND key = ?",
        )
        .bind(account)
        .bind(key)
        .fetch_optional(&mut *tx)
        .await?;
        let begin = match row {
            Some((hash, _)) if hash != request_hash => IdempotencyBegin::Reused,
            Some((_, Some(answer))) => IdempotencyBegin::Replay { answer },
            Some(_) => IdempotencyBegin::InFlight,
            None => {
                sqlx::query(
                    "INSERT INTO idempotency_keys (account, key, request_hash, created_at)
                     VALUES (?, ?, ?, ?)",
                )
                .bind(account)
                .bind(key)
                .bind(request_hash)
                .bind(at)
                .execute(&mut *tx)
                .await?;
                IdempotencyBegin::Started
            }
        };
        tx.commit().await?;
        Ok(begin)
    }

    async fn finish_idempotent(&self, account: &str, key: &str, answer: &str) -> Result<()> {
        sqlx::query("UPDATE idempotency_keys SET response = ? WHERE account = ? AND key = ?")
            .bind(answer)
            .bind(account)
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn abandon_idempotent(&self, account: &str, key: &str) -> Result<()> {
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE account = ? AND key = ? AND response IS NULL",
        )
        .bind(account)
        .bind(key)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
