//! The Agent's rows as both engines read them, and the records they make.

use intent_models::TurnState;

use super::{Bounds, Resolution, Resolved, SessionRecord};
use crate::ids::{AccountId, SessionId};
use crate::store::rows::row;
use crate::store::{Error, Result};

row! {
    /// The columns of a session.
    pub struct SessionRow {
        id: String,
        account: String,
        title: String,
        archived: bool,
        updated_at: i64,
    }
}

impl TryFrom<SessionRow> for SessionRecord {
    type Error = Error;

    fn try_from(row: SessionRow) -> Result<Self> {
        Ok(Self {
            id: session_id(row.id)?,
            account: AccountId::stored(row.account),
            title: row.title,
            archived: row.archived,
            updated_at: row.updated_at,
        })
    }
}

row! {
    /// The columns of the action a resolution names.
    pub struct ActionRow {
        /// The action's turn.
        pub turn_id: String,
        revision: i64,
        pending: bool,
        digest: String,
        request: String,
    }
}

impl ActionRow {
    /// The revision `resolution` makes of this action, or why it is refused.
    pub fn resolve(&self, resolution: &Resolution) -> std::result::Result<i64, Resolved> {
        if self.revision != resolution.revision {
            return Err(Resolved::Stale {
                current: self.revision,
            });
        }
        if !self.pending {
            return Err(Resolved::NotPending);
        }
        if self.digest != resolution.digest {
            return Err(Resolved::DigestMismatch {
                expected: self.digest.clone(),
            });
        }
        Ok(self.revision + 1)
    }

    /// The resolution recorded at `revision`, the log then ending at `bounds`.
    pub fn resolved(self, revision: i64, bounds: Bounds) -> Result<Resolved> {
        let request = serde_json::from_str(&self.request)
            .map_err(|e| Error::Database(sqlx::Error::Decode(Box::new(e))))?;
        Ok(Resolved::Done {
            turn_id: self.turn_id,
            revision,
            request,
            bounds,
        })
    }
}

/// A stored session id, which was a [`SessionId`] when it was written.
pub fn session_id(id: String) -> Result<SessionId> {
    SessionId::try_from(id).map_err(|error| Error::Database(sqlx::Error::Decode(error.into())))
}

/// The state stored as `name`.
pub fn turn_state(name: &str) -> Result<TurnState> {
    name.parse().map_err(|_| {
        Error::Database(sqlx::Error::Decode(
            format!("unknown turn state {name:?}").into(),
        ))
    })
}

row! {
    /// A turn and its state.
    pub struct TurnRow {
        pub id: String,
        pub state: String,
    }
}

impl TurnRow {
    /// The turn id with its state.
    pub fn turn(self) -> Result<(String, TurnState)> {
        Ok((self.id, turn_state(&self.state)?))
    }
}

row! {
    /// A turn of a session.
    pub struct SessionTurn {
        pub session_id: String,
        pub id: String,
    }
}

row! {
    /// A session's log bounds, with one event after the reader's position when there is one.
    pub struct LogRow {
        pub last_seq: i64,
        pub pruned_through: i64,
        pub seq: Option<i64>,
        pub body: Option<String>,
    }
}

row! {
    /// An idempotency key's record.
    pub struct IdempotencyRow {
        pub request_hash: String,
        pub response: Option<String>,
    }
}
