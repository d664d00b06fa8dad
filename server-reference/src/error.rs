//! The one error type of the server, written as the error envelope of openapi.json:
//! `{"error": {"code": "...", "message": "..."}}` with the status its code names.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use intent_models::{ErrorCode, ErrorDetail, ErrorEnvelope};

/// An error answered to the client.
#[derive(Debug)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
}

impl ApiError {
    /// An error with `code` and a message for people. Internal errors should say nothing of
    /// their cause; log it instead.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        status_of(self.code)
    }
}

/// The HTTP status each error code is answered with, as `x-status` in openapi.json gives it.
pub fn status_of(code: ErrorCode) -> StatusCode {
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
        Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let detail = ErrorDetail {
            code: self.code,
            message: self.message,
            details: Default::default(),
        };
        let body = ErrorEnvelope {
            error: serde_json::to_value(detail).expect("an error detail always serializes"),
        };
        (status_of(self.code), Json(body)).into_response()
    }
}
