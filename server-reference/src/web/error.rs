//! How the HTTP layer answers an [`ApiError`]: the status its code names (`x-status` in
//! openapi.json), the envelope as the body, and its headers; and a JSON body it cannot read.

use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use intent_models::ErrorCode;

use crate::error::ApiError;
use crate::json::Json;

/// The HTTP status each error code is answered with, as `x-status` in openapi.json gives it.
fn status_of(code: &ErrorCode) -> StatusCode {
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
        let mut response = (status_of(self.code()), Json(self.envelope())).into_response();
        if let Some(challenge) = self.challenge().and_then(|c| HeaderValue::from_str(c).ok()) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        if let Some(seconds) = self.retry_after() {
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

#[cfg(test)]
mod tests {
    use intent_models::error::ConversionError;

    use super::*;
    use crate::account;

    #[test]
    fn an_incomplete_model_is_a_bare_500_that_names_nothing_of_the_server() {
        let missing = ConversionError::from("no value supplied for installed_at");
        let api = ApiError::from(account::Error::Model(missing));
        assert_eq!(status_of(api.code()), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(api.message(), "internal error");
        let body = serde_json::to_string(&api.envelope()).unwrap();
        assert!(!body.contains("installed_at"), "{body}");
    }

    #[test]
    fn every_error_code_has_the_status_openapi_json_names() {
        let statuses = &crate::interface::document().schema("ErrorCode").unwrap()["x-status"];
        let statuses = statuses.as_object().unwrap();
        assert!(statuses.len() >= 20);
        for (code, status) in statuses {
            let parsed: ErrorCode = code.parse().unwrap();
            assert!(
                !matches!(parsed, ErrorCode::Unknown(_)),
                "{code} is a known code"
            );
            let served = status_of(&parsed).as_u16();
            assert_eq!(u64::from(served), status.as_u64().unwrap(), "{code}");
        }
    }
}
