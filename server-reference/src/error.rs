//! The one error of the server, as the interface writes it: the error envelope of openapi.json,
//! `{"error": {"code": "...", "message": "...", "details": {...}}}`, with what its answer's
//! headers say (a challenge, a time to wait). Store failures and the errors of every service
//! become it; each area maps its own errors (`area/error.rs`), so that this module names no area.
//! The HTTP layer (`web/error.rs`) alone turns it into a status and an answer.

use intent_models::error::ConversionError;
use intent_models::{ErrorCode, ErrorDetail, ErrorEnvelope};
use serde_json::{Map, Value};

/// An error answered to the client.
#[derive(Debug)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
    details: Map<String, Value>,
    challenge: Option<String>,
    retry_after: Option<u64>,
}

impl ApiError {
    /// An error with `code` and a message for people.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Map::new(),
            challenge: None,
            retry_after: None,
        }
    }

    /// A 500 that says nothing of its cause; log the cause where it happens.
    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, "internal error")
    }

    /// Adds one entry to `details`.
    pub fn with_detail(mut self, key: &str, value: Value) -> Self {
        self.details.insert(key.to_owned(), value);
        self
    }

    /// Sends `challenge` as the `WWW-Authenticate` header.
    pub fn with_challenge(mut self, challenge: String) -> Self {
        self.challenge = Some(challenge);
        self
    }

    /// Sends `seconds` as the `Retry-After` header.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// The error code.
    pub fn code(&self) -> &ErrorCode {
        &self.code
    }

    /// The message for people.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `WWW-Authenticate` challenge to send.
    pub fn challenge(&self) -> Option<&str> {
        self.challenge.as_deref()
    }

    /// The seconds to send as `Retry-After`.
    pub fn retry_after(&self) -> Option<u64> {
        self.retry_after
    }

    /// The envelope answered. It has no error of its own to answer with: every member is set
    /// here from this error's fields, so its builders cannot fail.
    pub fn envelope(&self) -> ErrorEnvelope {
        let detail: ErrorDetail = ErrorDetail::builder()
            .code(self.code.clone())
            .message(self.message.clone())
            .details(self.details.clone())
            .try_into()
            .expect("every member of an error detail is set");
        ErrorEnvelope::builder()
            .error(serde_json::to_value(detail).expect("an error detail serializes"))
            .try_into()
            .expect("every member of an error envelope is set")
    }
}

/// Seconds a client is asked to wait while the database is out of reach.
pub const UNAVAILABLE_RETRY_AFTER: u64 = 1;

impl From<crate::store::Error> for ApiError {
    fn from(error: crate::store::Error) -> Self {
        tracing::error!(error = &error as &dyn std::error::Error, "store failed");
        if error.unavailable() {
            Self::new(
                ErrorCode::Unavailable,
                "the database is unavailable; retry later",
            )
            .with_retry_after(UNAVAILABLE_RETRY_AFTER)
        } else {
            Self::internal()
        }
    }
}

/// An answer's model left without a required member: a bug of this server, logged here and
/// answered as a bare 500.
impl From<ConversionError> for ApiError {
    fn from(error: ConversionError) -> Self {
        tracing::error!(%error, "an answer's model is incomplete");
        Self::internal()
    }
}
