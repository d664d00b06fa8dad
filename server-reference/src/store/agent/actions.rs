//! Actions: resolved once, at their current revision, for the Build under review.

use intent_models::TurnState;

use super::log::{lock_session, write_events};
use super::rows::ActionRow;
use crate::store::agent::{Append, Resolution, ResolutionEvents, Resolved};
use crate::store::engine::sql;
use crate::store::{Result, Store};

impl Store {
    /// Resolves a pending action at its current revision, moves its turn back to `processing`
    /// (leased to this process) and appends the events `events` makes from the turn id and the
    /// resulting revision.
    pub async fn resolve_action(
        &self,
        resolution: &Resolution,
        events: &ResolutionEvents<'_>,
    ) -> Result<Resolved> {
        let mut tx = self.db.begin().await?;
        let Some(last_seq) =
            lock_session(&mut tx, &resolution.session_id, Some(&resolution.account)).await?
        else {
            return Ok(Resolved::NotFound);
        };
        let row: Option<ActionRow> = tx
            .fetch_optional(
                sql(
                    "SELECT turn_id, revision, pending, digest, request FROM actions
                     WHERE id = $1 AND session_id = $2",
                )
                .bind(resolution.action_id.as_str())
                .bind(resolution.session_id.as_str()),
            )
            .await?;
        let Some(action) = row else {
            return Ok(Resolved::NotFound);
        };
        let revision = match action.resolve(resolution) {
            Ok(revision) => revision,
            Err(refused) => return Ok(refused),
        };
        tx.execute(
            sql("UPDATE actions SET revision = $1, pending = FALSE WHERE id = $2")
                .bind(revision)
                .bind(resolution.action_id.as_str()),
        )
        .await?;
        tx.execute(
            sql("UPDATE turns SET runner = $1, lease_until = $2 WHERE id = $3")
                .bind(&self.runner.id)
                .bind(resolution.at_ms + self.runner.lease_ms)
                .bind(&action.turn_id),
        )
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
}
