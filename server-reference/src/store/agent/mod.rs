//! What the Agent keeps: sessions, turns, each session's ordered event log, actions and
//! idempotency keys. Sequence numbers are assigned inside the write transaction, so that a
//! session's log is strictly increasing with no gap. Every write to a session holds the
//! session's row first (the whole database on SQLite), so that writes from every process take
//! turns on it: the turn state read, the sequence numbers assigned and the rows written cannot
//! race, and the locks are always taken in the same order.

mod actions;
mod idempotency;
mod log;
mod rows;
mod sessions;
mod turns;

use std::sync::Arc;

use intent_models::TurnState;
use serde_json::{Map, Value};

use crate::ids::{AccountId, ActionId, SessionId};

/// A stored session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session id.
    pub id: SessionId,
    /// The owning account.
    pub account: AccountId,
    /// The title.
    pub title: String,
    /// Whether the session is archived.
    pub archived: bool,
    /// Unix seconds of the last change.
    pub updated_at: i64,
}

impl SessionRecord {
    /// Whether `account` owns the session: another account's session is none of its own.
    pub fn is_owned_by(&self, account: &AccountId) -> bool {
        self.account == *account
    }
}

/// Events to append to a session's log, for one turn, in one transaction.
#[derive(Debug, Clone)]
pub struct Append {
    /// The session.
    pub session_id: SessionId,
    /// The turn the events belong to.
    pub turn_id: String,
    /// The events as JSON objects; the store sets each one's `seq`.
    pub events: Vec<Map<String, Value>>,
    /// The state the turn enters with these events.
    pub next_state: Option<TurnState>,
    /// An action the events ask the client to resolve.
    pub action: Option<NewAction>,
    /// Unix milliseconds now.
    pub at_ms: i64,
    /// Events created before this (Unix milliseconds) leave the retained log.
    pub prune_before_ms: i64,
}

/// An action opened by an append.
#[derive(Debug, Clone)]
pub struct NewAction {
    /// The action id.
    pub id: String,
    /// Its first revision.
    pub revision: i64,
    /// The digest of the Build under review.
    pub digest: String,
    /// The ActionRequest as JSON.
    pub request: Value,
}

/// Where a session's log stands after a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The last assigned sequence number.
    pub last_seq: i64,
    /// Events up to this sequence number have left the retained log.
    pub pruned_through: i64,
}

/// The stored body of a draft event at `seq`: the draft with its `seq` set, as JSON text. The
/// session cache's in-memory head keeps the same bytes.
pub fn event_body(draft: &Map<String, Value>, seq: i64) -> String {
    let mut body = draft.clone();
    body.insert("seq".to_owned(), Value::from(seq));
    Value::Object(body).to_string()
}

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Appended {
    /// The events were appended.
    Done(Bounds),
    /// The turn's state refused the append; nothing was written.
    Refused(TurnState),
    /// No such turn in that session.
    NoTurn,
}

/// What starting a turn did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnStarted {
    /// The turn started; its first event follows `before_seq`.
    Started {
        /// The last sequence number before the turn's first event.
        before_seq: i64,
        /// Where the log stands after them.
        bounds: Bounds,
    },
    /// The session does not exist or belongs to another account.
    NoSession,
    /// Another turn of the session is processing or awaiting an action.
    Busy {
        /// That turn.
        turn_id: String,
    },
}

/// A slice of a session's retained log, read in one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRead {
    /// Event bodies (JSON, with `seq`) with `after < seq`, in order, at most the limit; shared
    /// with the head that holds them.
    pub events: Vec<Arc<str>>,
    /// The seq of the first event, or of the next one to come when there is none; each next
    /// one's is one more, as a log's seqs are consecutive.
    pub first_seq: i64,
    /// The highest sequence number of the log.
    pub last_seq: i64,
    /// Events up to this sequence number have left the retained log.
    pub pruned_through: i64,
}

/// The answer to an action resolution, as recorded.
#[derive(Debug, Clone)]
pub struct Resolution {
    /// The account resolving.
    pub account: AccountId,
    /// The session.
    pub session_id: SessionId,
    /// The action.
    pub action_id: ActionId,
    /// The revision the result answers.
    pub revision: i64,
    /// The digest the result names.
    pub digest: String,
    /// Unix milliseconds now.
    pub at_ms: i64,
}

/// Makes the events a resolution appends from its turn id and the resulting revision.
pub type ResolutionEvents<'a> =
    dyn for<'t> Fn(&'t str, i64) -> Vec<Map<String, Value>> + Send + Sync + 'a;

/// What resolving an action did.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// Recorded; the turn is processing again.
    Done {
        /// The action's turn.
        turn_id: String,
        /// The resulting revision.
        revision: i64,
        /// The ActionRequest that was resolved.
        request: Value,
        /// Where the log stands after the resolution's events.
        bounds: Bounds,
    },
    /// No such action in a session of this account.
    NotFound,
    /// The action was already resolved or its turn ended.
    NotPending,
    /// The revision is not the current one.
    Stale {
        /// The current revision.
        current: i64,
    },
    /// The result names another Build.
    DigestMismatch {
        /// The digest of the Build under review.
        expected: String,
    },
}

/// What looking up an idempotency key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyBegin {
    /// The key is new (or its record expired): the request goes ahead.
    Started,
    /// The same request finished before: replay its answer.
    Replay {
        /// The answer recorded by [`Store::finish_idempotent`](super::Store::finish_idempotent).
        answer: String,
    },
    /// The same request is still in flight.
    InFlight,
    /// The key was used for a different request.
    Reused,
}
