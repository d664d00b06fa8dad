//! The event log: appends, each assigned the next sequence numbers of its session, and reads of
//! one snapshot.

use std::sync::Arc;

use intent_models::TurnState;

use super::rows::{LogRow, turn_state};
use crate::ids::{AccountId, SessionId};
use crate::store::agent::{Append, Appended, Bounds, LogRead, event_body};
use crate::store::engine::{Tx, sql};
use crate::store::{Result, Store};

/// Locks session `id` (of `account`, when given) for the rest of the transaction; its last seq.
pub(super) async fn lock_session(
    tx: &mut Tx,
    id: &SessionId,
    account: Option<&AccountId>,
) -> Result<Option<i64>> {
    let row: Option<(i64,)> = tx
        .fetch_optional(
            sql("SELECT last_seq FROM sessions WHERE id = $1 AND ($2 IS NULL OR account = $2)")
                .bind(id.as_str())
                .bind(account.map(AccountId::as_str))
                .for_update(),
        )
        .await?;
    Ok(row.map(|(seq,)| seq))
}

/// Appends `append.events` after `last_seq` in the locked session, prunes what left the retained
/// log, moves the turn to `append.next_state`, and notifies the readers of every process when the
/// transaction commits.
pub(super) async fn write_events(tx: &mut Tx, append: &Append, last_seq: i64) -> Result<Bounds> {
    let mut seq = last_seq;
    for event in &append.events {
        seq += 1;
        tx.execute(
            sql("INSERT INTO events (session_id, seq, body, created_at) VALUES ($1, $2, $3, $4)")
                .bind(append.session_id.as_str())
                .bind(seq)
                .bind(event_body(event, seq))
                .bind(append.at_ms),
        )
        .await?;
    }
    // Pruned through the last event that leaves now, if it is past the last that left before.
    let (pruned_through,): (i64,) = tx
        .fetch_one(
            sql("UPDATE sessions SET last_seq = $1, updated_at = $2,
                     pruned_through = COALESCE((SELECT MAX(seq) FROM events
                         WHERE session_id = $3 AND created_at < $4 AND seq > pruned_through),
                         pruned_through)
                 WHERE id = $3
                 RETURNING pruned_through")
            .bind(seq)
            .bind(append.at_ms / 1000)
            .bind(append.session_id.as_str())
            .bind(append.prune_before_ms),
        )
        .await?;
    tx.execute(
        sql("DELETE FROM events WHERE session_id = $1 AND created_at < $2")
            .bind(append.session_id.as_str())
            .bind(append.prune_before_ms),
    )
    .await?;
    if let Some(state) = append.next_state {
        tx.execute(
            sql("UPDATE turns SET state = $1 WHERE id = $2")
                .bind(state.to_string())
                .bind(&append.turn_id),
        )
        .await?;
        if state != TurnState::AwaitingAction {
            tx.execute(
                sql("UPDATE actions SET pending = FALSE WHERE turn_id = $1").bind(&append.turn_id),
            )
            .await?;
        }
    }
    if let Some(action) = &append.action {
        tx.execute(
            sql(
                "INSERT INTO actions (id, session_id, turn_id, revision, pending, digest, request)
                 VALUES ($1, $2, $3, $4, TRUE, $5, $6)",
            )
            .bind(&action.id)
            .bind(append.session_id.as_str())
            .bind(&append.turn_id)
            .bind(action.revision)
            .bind(&action.digest)
            .bind(action.request.to_string()),
        )
        .await?;
    }
    tx.notify(format!("{}:{seq}", append.session_id.as_str()))
        .await?;
    Ok(Bounds {
        last_seq: seq,
        pruned_through,
    })
}

impl Store {
    /// Appends events of a turn if `accept` agrees with the turn's current state and whether
    /// this process holds its lease.
    pub async fn append(
        &self,
        append: &Append,
        accept: &(dyn Fn(TurnState, bool) -> bool + Send + Sync),
    ) -> Result<Appended> {
        let mut tx = self.db.begin().await?;
        let Some(last_seq) = lock_session(&mut tx, &append.session_id, None).await? else {
            return Ok(Appended::NoTurn);
        };
        let row: Option<(String, Option<String>)> = tx
            .fetch_optional(
                sql("SELECT state, runner FROM turns WHERE id = $1 AND session_id = $2")
                    .bind(&append.turn_id)
                    .bind(append.session_id.as_str()),
            )
            .await?;
        let Some((state, runner)) = row else {
            return Ok(Appended::NoTurn);
        };
        let state = turn_state(&state)?;
        if !accept(state, runner.as_deref() == Some(self.runner.id.as_str())) {
            return Ok(Appended::Refused(state));
        }
        let bounds = write_events(&mut tx, append, last_seq).await?;
        tx.commit().await?;
        Ok(Appended::Done(bounds))
    }

    /// Up to `limit` events of `account`'s session after `after`, from one snapshot of the log;
    /// `None` when `account` has no such session.
    pub async fn read_log(
        &self,
        account: &AccountId,
        session_id: &SessionId,
        after: i64,
        limit: i64,
    ) -> Result<Option<LogRead>> {
        // One statement, so one snapshot: ownership, the events and the bounds agree, in one
        // round trip. No row: no such session of `account`.
        let rows: Vec<LogRow> = self
            .db
            .fetch_all(
                sql("SELECT s.last_seq, s.pruned_through, e.seq, e.body
                     FROM sessions s
                     LEFT JOIN (
                         SELECT body, seq FROM events
                         WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3
                     ) e ON TRUE
                     WHERE s.id = $1 AND s.account = $4
                     ORDER BY e.seq")
                .bind(session_id.as_str())
                .bind(after)
                .bind(limit)
                .bind(account.as_str()),
            )
            .await?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let (last_seq, pruned_through) = (first.last_seq, first.pruned_through);
        let first_seq = first
            .seq
            .unwrap_or(after.max(pruned_through).saturating_add(1));
        Ok(Some(LogRead {
            first_seq,
            events: rows
                .into_iter()
                .filter_map(|row| row.body.map(Arc::from))
                .collect(),
            last_seq,
            pruned_through,
        }))
    }
}
