//! The one error type of the server, written as the error envelope of openapi.json:
//! `{"error": {"code": "...", "message": "...", "details": {...}}}` with the status its code
//! names. JSON extraction failures, store failures and the errors of every service go through
//! it; each area maps its own errors beside them (`area/error.rs`), so that this module names
//! no area.

use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use intent_models::error::ConversionError;
use intent_models::{ErrorCode, ErrorDetail, ErrorEnvelope};
use serde_json::{Map, Value};

use crate::json::Json;

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

    /// The HTTP status answered.
    pub fn status(&self) -> StatusCode {
        status_of(&self.code)
    }

    /// The envelope answered, as JSON text.
    pub fn body(&self) -> String {
        serde_json::to_string(&self.envelope()).expect("an error envelope serializes")
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

/// The HTTP status each error code is answered with, as `x-status` in openapi.json gives it.
pub fn status_of(code: &ErrorCode) -> StatusCode {
    use ErrorCode::*;
    match code {
        InvalidRequest | InvalidParameter | InvalidCursor | ValidationFailed => {
            StatusCode::BAD_REQUEST
        }
        Unauthorized => StatusCode::UNAUTHORIZED,
        InsufficientScope => StatusCode::FORBIDDEN,
        NotFound => StatusCode::NOT_FOUND,
        MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        TurnInProgress | TurnNotActive | RevisionConflict | ActionNotPending
        | IdempotencyInFlight => StatusCode::CONFLICT,
        CursorExpired => StatusCode::GONE,
        PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        BuildExpired | BuildInvalid | SimulationFailed | ChainMismatch | IdempotencyKeyReused
        | CredentialsMissing => StatusCode::UNPROCESSABLE_ENTITY,
        RateLimited => StatusCode::TOO_MANY_REQUESTS,
        Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        // `Internal`, and a code of another deployment, which this server never answers with.
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(self.envelope())).into_response();
        if let Some(challenge) = self.challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::MissingJsonContentType(_) => Self::new(
                ErrorCode::UnsupportedMediaType,
                "expected a body of type application/json",
            ),
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Self::new(ErrorCode::PayloadTooLarge, "the request body is too large")
            }
            other => Self::new(ErrorCode::InvalidRequest, other.body_text()),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account;

    #[test]
    fn an_incomplete_model_is_a_bare_500_that_names_nothing_of_the_server() {
        let missing = ConversionError::from("no value supplied for installed_at");
        let api = ApiError::from(account::Error::Model(missing));
        assert_eq!(api.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(api.message(), "internal error");
        assert!(!api.body().contains("installed_at"), "{}", api.body());
    }
}
