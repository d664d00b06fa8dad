//! Turns: started one at a time per session, leased to the process that runs them, and claimed
//! by another process when their runner is gone.

use intent_models::TurnState;

use super::log::{lock_session, write_events};
use super::rows::{SessionTurn, TurnRow, session_id};
use crate::ids::{AccountId, SessionId};
use crate::store::account::{Meter, record_usage};
use crate::store::agent::{Append, TurnStarted};
use crate::store::engine::sql;
use crate::store::{Result, Store};

impl Store {
    /// Starts turn `append.turn_id` as `processing` in a session of `account` with no other
    /// active turn, leased to this process, and appends its first events and one unit of the
    /// `turn` meter, in one transaction.
    pub async fn start_turn(&self, account: &AccountId, append: &Append) -> Result<TurnStarted> {
        let mut tx = self.db.begin().await?;
        let Some(before_seq) = lock_session(&mut tx, &append.session_id, Some(account)).await?
        else {
            return Ok(TurnStarted::NoSession);
        };
        let active: Option<(String,)> = tx
            .fetch_optional(
                sql("SELECT id FROM turns
                     WHERE session_id = $1 AND state IN ('processing', 'awaiting_action')")
                .bind(append.session_id.as_str()),
            )
            .await?;
        if let Some((turn_id,)) = active {
            return Ok(TurnStarted::Busy { turn_id });
        }
        tx.execute(
            sql(
                "INSERT INTO turns (id, session_id, state, created_at, runner, lease_until)
                 VALUES ($1, $2, 'processing', $3, $4, $5)",
            )
            .bind(&append.turn_id)
            .bind(append.session_id.as_str())
            .bind(append.at_ms / 1000)
            .bind(&self.runner.id)
            .bind(append.at_ms + self.runner.lease_ms),
        )
        .await?;
        let bounds = write_events(&mut tx, append, before_seq).await?;
        tx.execute(record_usage(account, Meter::Turn, append.at_ms / 1000))
            .await?;
        tx.commit().await?;
        Ok(TurnStarted::Started { before_seq, bounds })
    }

    /// The session's turn that is processing or awaiting an action, with its state.
    pub async fn active_turn(&self, session_id: &SessionId) -> Result<Option<(String, TurnState)>> {
        let row: Option<TurnRow> = self
            .db
            .fetch_optional(
                sql("SELECT id, state FROM turns
                     WHERE session_id = $1 AND state IN ('processing', 'awaiting_action')")
                .bind(session_id.as_str()),
            )
            .await?;
        row.map(TurnRow::turn).transpose()
    }

    /// Takes over every turn in `processing` whose runner's lease ended before `now_ms`, leasing
    /// it to this process, and returns them as (session, turn): one process claims each orphan,
    /// and a turn resumed meanwhile (with a fresh lease) is not one.
    pub async fn claim_orphans(&self, now_ms: i64) -> Result<Vec<(SessionId, String)>> {
        let rows: Vec<SessionTurn> = self
            .db
            .fetch_all(
                sql("UPDATE turns SET runner = $1, lease_until = $2
                     WHERE state = 'processing' AND lease_until < $3
                     RETURNING session_id, id")
                .bind(&self.runner.id)
                .bind(now_ms + self.runner.lease_ms)
                .bind(now_ms),
            )
            .await?;
        rows.into_iter()
            .map(|row| Ok((session_id(row.session_id)?, row.id)))
            .collect()
    }

    /// Extends to `now_ms` plus the lease the leases of this process's processing turns.
    pub async fn renew_leases(&self, now_ms: i64) -> Result<u64> {
        self.db
            .execute(
                sql("UPDATE turns SET lease_until = $1 WHERE runner = $2 AND state = 'processing'")
                    .bind(now_ms + self.runner.lease_ms)
                    .bind(&self.runner.id),
            )
            .await
    }

    /// Gives up this process's lease on turn `turn_id` while it is processing, so that the next
    /// sweep of any process (this one's restart included) claims it at once.
    pub async fn release_turn(&self, turn_id: &str) -> Result<u64> {
        self.db
            .execute(
                sql("UPDATE turns SET runner = NULL, lease_until = 0
                     WHERE id = $1 AND runner = $2 AND state = 'processing'")
                .bind(turn_id)
                .bind(&self.runner.id),
            )
            .await
    }

    /// The account of `session_id` and its whole retained log, as (event body, Unix
    /// milliseconds appended) in order; `None` when there is no such session.
    pub async fn session_log(
        &self,
        session_id: &SessionId,
    ) -> Result<Option<(AccountId, Vec<(String, i64)>)>> {
        let rows: Vec<(String, Option<String>, Option<i64>)> = self
            .db
            .fetch_all(
                sql("SELECT s.account, e.body, e.created_at FROM sessions s
                     LEFT JOIN events e ON e.session_id = s.id
                     WHERE s.id = $1 ORDER BY e.seq")
                .bind(session_id.as_str()),
            )
            .await?;
        let Some((account, ..)) = rows.first() else {
            return Ok(None);
        };
        let account = AccountId::stored(account.clone());
        let events = rows
            .into_iter()
            .filter_map(|(_, body, at)| Some((body?, at?)))
            .collect();
        Ok(Some((account, events)))
    }
}
