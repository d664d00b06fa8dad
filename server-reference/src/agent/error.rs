//! Why an Agent call failed.

use intent_models::ErrorCode;
use intent_models::error::ConversionError;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::store;

/// An Agent failure. It becomes the error envelope (`ApiError`, below), which the HTTP layer answers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is out of its range.
    #[error("{0}")]
    InvalidParameter(String),
    /// The request asks for nothing.
    #[error("{0}")]
    InvalidRequest(String),
    /// No such session for this account.
    #[error("no session {0}")]
    NoSession(String),
    /// The cursor is malformed, altered, beyond the log, or another session's.
    #[error(
        "the cursor is malformed or belongs to another session; request the page without a cursor"
    )]
    InvalidCursor,
    /// The cursor expired, or its events left the retained log.
    #[error(
        "the cursor expired or its events left the retained log; request the page without a cursor"
    )]
    CursorExpired,
    /// Another turn of the session is active.
    #[error(
        "a turn of this session is still active: wait for it, resolve its action, or interrupt it"
    )]
    TurnInProgress {
        /// That turn.
        turn_id: String,
    },
    /// No turn of the session is active.
    #[error("no turn of this session is active")]
    TurnNotActive,
    /// The action resolution was refused; a retry with the same key gets the same refusal.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// A request with the same idempotency key is still running.
    #[error("a request with this Idempotency-Key is still in flight; retry later")]
    IdempotencyInFlight,
    /// The idempotency key was used for another request.
    #[error("this Idempotency-Key was used with a different request")]
    IdempotencyKeyReused,
    /// Stored data does not read back; the cause is logged.
    #[error("internal error")]
    Internal,
    /// The durable store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// An answer's model was left without a required member (a bug of this server).
    #[error("an answer was left incomplete: {0}")]
    Model(#[from] ConversionError),
}

/// Why an action resolution was refused. Refusals are recorded under the idempotency key and
/// replayed, like resolutions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum Refusal {
    /// No such action in a session of the account.
    #[error("no action {action_id} in session {session_id}")]
    NoAction {
        /// The session.
        session_id: String,
        /// The action.
        action_id: String,
    },
    /// The action was resolved already or its turn ended.
    #[error("the action was already resolved or its turn ended")]
    NotPending,
    /// The revision answered is not the current one.
    #[error("the action is at revision {current}")]
    Stale {
        /// The current revision.
        current: i64,
    },
    /// The result names another Build than the one under review.
    #[error("the result must name the digest of the reviewed Build")]
    DigestMismatch {
        /// The digest of the Build under review.
        expected: String,
    },
}

impl Error {
    /// The machine-readable code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidParameter(_) => ErrorCode::InvalidParameter,
            Self::InvalidRequest(_) => ErrorCode::InvalidRequest,
            Self::NoSession(_) => ErrorCode::NotFound,
            Self::InvalidCursor => ErrorCode::InvalidCursor,
            Self::CursorExpired => ErrorCode::CursorExpired,
            Self::TurnInProgress { .. } => ErrorCode::TurnInProgress,
            Self::TurnNotActive => ErrorCode::TurnNotActive,
            Self::Refused(refusal) => match refusal {
                Refusal::NoAction { .. } => ErrorCode::NotFound,
                Refusal::NotPending => ErrorCode::ActionNotPending,
                Refusal::Stale { .. } => ErrorCode::RevisionConflict,
                Refusal::DigestMismatch { .. } => ErrorCode::ValidationFailed,
            },
            Self::IdempotencyInFlight => ErrorCode::IdempotencyInFlight,
            Self::IdempotencyKeyReused => ErrorCode::IdempotencyKeyReused,
            Self::Internal | Self::Store(_) | Self::Model(_) => ErrorCode::Internal,
        }
    }
}

/// The answer of an Agent failure: its code, its message, and its details.
impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let api = ApiError::new(error.code(), error.to_string());
        match error {
            Error::Store(error) => error.into(),
            Error::Model(error) => error.into(),
            Error::Internal => ApiError::internal(),
            Error::TurnInProgress { turn_id } => api.with_detail("turnId", turn_id.into()),
            Error::Refused(Refusal::Stale { current }) => {
                api.with_detail("revision", current.into())
            }
            Error::Refused(Refusal::DigestMismatch { expected }) => {
                api.with_detail("digest", expected.into())
            }
            _ => api,
        }
    }
}

/// `Result` with the Agent's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
