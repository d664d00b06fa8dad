//! Sessions: created, read, changed and deleted, each change told to every process.

use super::rows::SessionRow;
use crate::ids::{AccountId, SessionId};
use crate::store::agent::SessionRecord;
use crate::store::engine::sql;
use crate::store::{Result, Store};

impl Store {
    /// Creates a session for `account` unless `id` exists already (then `false`).
    pub async fn create_session(&self, session: &SessionRecord) -> Result<bool> {
        let created = self
            .db
            .execute(
                sql(
                    "INSERT INTO sessions (id, account, title, archived, updated_at)
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
                )
                .bind(session.id.as_str())
                .bind(session.account.as_str())
                .bind(&session.title)
                .bind(session.archived)
                .bind(session.updated_at),
            )
            .await?;
        Ok(created == 1)
    }

    /// The session `id` if `account` owns it.
    pub async fn session(
        &self,
        account: &AccountId,
        id: &SessionId,
    ) -> Result<Option<SessionRecord>> {
        let row: Option<SessionRow> = self
            .db
            .fetch_optional(
                sql(
                    "SELECT id, account, title, archived, updated_at FROM sessions
                     WHERE id = $1 AND account = $2",
                )
                .bind(id.as_str())
                .bind(account.as_str()),
            )
            .await?;
        row.map(SessionRecord::try_from).transpose()
    }

    /// Sets the title and/or the archived flag; the updated session if `account` owns it. The
    /// change is notified with it, so that the heads of the session on every process retire.
    pub async fn update_session(
        &self,
        account: &AccountId,
        id: &SessionId,
        title: Option<&str>,
        archived: Option<bool>,
        at: i64,
    ) -> Result<Option<SessionRecord>> {
        let mut tx = self.db.begin().await?;
        let row: Option<SessionRow> = tx
            .fetch_optional(
                sql("UPDATE sessions SET title = COALESCE($1, title),
                         archived = COALESCE($2, archived), updated_at = $3
                     WHERE id = $4 AND account = $5
                     RETURNING id, account, title, archived, updated_at")
                .bind(title)
                .bind(archived)
                .bind(at)
                .bind(id.as_str())
                .bind(account.as_str()),
            )
            .await?;
        if row.is_some() {
            tx.notify(format!("{}:updated", id.as_str())).await?;
        }
        tx.commit().await?;
        row.map(SessionRecord::try_from).transpose()
    }

    /// Deletes a session with its turns, log and actions; whether `account` owned it. The
    /// deletion is notified with it, so that the streams of the session on every process end.
    pub async fn delete_session(&self, account: &AccountId, id: &SessionId) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        let deleted = tx
            .execute(
                sql("DELETE FROM sessions WHERE id = $1 AND account = $2")
                    .bind(id.as_str())
                    .bind(account.as_str()),
            )
            .await?
            == 1;
        if deleted {
            tx.notify(format!("{}:deleted", id.as_str())).await?;
        }
        tx.commit().await?;
        Ok(deleted)
    }
}
