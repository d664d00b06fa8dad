//! Typed errors: what went wrong with a call, as variants a user can match.
//!
//! The interface lets the envelope's `error` be any JSON value. The code is read from a bare
//! string (`{"error": "invalid_cursor"}`) or from an object's `code`
//! (`{"error": {"code": "invalid_cursor", "message": "..."}}`, the reference profile).

use std::fmt;
use std::time::Duration;

use intent_models::ErrorEnvelope;
use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};
use serde_json::Value;

use crate::resource::Resource;
use crate::retry::{retried_status, retry_after};

/// `Result` with the SDK's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error response: its status, the code and message read from the envelope, the body, and the
/// id the deployment gave the request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ErrorResponse {
    /// HTTP status.
    pub status: u16,
    /// The error code, from a string `error` or from `error.code`.
    pub code: Option<String>,
    /// The message for people, from `error.message`.
    pub message: Option<String>,
    /// The whole `error` value as sent.
    pub body: Value,
    /// The response's `x-request-id` ([`ErrorResponse::request_id`]).
    #[expect(
        clippy::box_collection,
        reason = "a thin pointer keeps every `Error` under clippy's size limit for an error"
    )]
    pub(crate) request_id: Option<Box<String>>,
}

impl ErrorResponse {
    /// The response's `x-request-id`: the name of the request in the deployment's logs.
    pub fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref().map(String::as_str)
    }
}

impl fmt::Display for ErrorResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "status {}", self.status)?;
        if let Some(code) = &self.code {
            write!(f, " {code}")?;
        }
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        if let Some(id) = &self.request_id {
            write!(f, " (request {id})")?;
        }
        Ok(())
    }
}

/// The header in which a deployment names its answer, for its logs.
const REQUEST_ID: &str = "x-request-id";

/// What names a call in the deployment's logs, as the AWS SDK's `RequestId` does: the
/// `x-request-id` of its answer. Errors and the generated client's [`ResponseValue`]s carry it.
///
/// [`ResponseValue`]: crate::raw::ResponseValue
pub trait RequestId {
    /// The id the deployment gave the request, when its answer named one.
    fn request_id(&self) -> Option<&str>;
}

impl<T> RequestId for progenitor_client::ResponseValue<T> {
    fn request_id(&self) -> Option<&str> {
        request_id(self.headers())
    }
}

impl RequestId for Error {
    fn request_id(&self) -> Option<&str> {
        self.response().and_then(ErrorResponse::request_id)
    }
}

/// The `x-request-id` of an answer's `headers`.
pub(crate) fn request_id(headers: &HeaderMap) -> Option<&str> {
    headers.get(REQUEST_ID).and_then(|id| id.to_str().ok())
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// 400 `invalid_cursor`: request the page without a cursor and reconcile.
    #[error("invalid cursor ({0})")]
    InvalidCursor(ErrorResponse),
    /// 410: the cursor expired; request the page without a cursor and reconcile.
    #[error("cursor expired ({0})")]
    CursorExpired(ErrorResponse),
    /// 401: missing, bad, expired or wrong-audience token.
    #[error("unauthorized ({0})")]
    Unauthorized(ErrorResponse),
    /// 403: the token lacks `scope`.
    #[error("forbidden: needs scope {} ({response})", scope.as_deref().unwrap_or("unknown"))]
    Forbidden {
        /// The missing scope, from `error.details.scope` or the `WWW-Authenticate` challenge.
        scope: Option<String>,
        /// The response.
        response: ErrorResponse,
    },
    /// 404: absent, or owned by another account.
    #[error("not found ({0})")]
    NotFound(ErrorResponse),
    /// 409: conflicts with the resource's state (a stale revision, a turn in progress...).
    #[error("conflict ({0})")]
    Conflict(ErrorResponse),
    /// `build_expired`: the Build was presented after its `expiresAt`.
    #[error("build expired ({0})")]
    BuildExpired(ErrorResponse),
    /// 429: wait `retry_after` before trying again.
    #[error("rate limited ({response})")]
    RateLimited {
        /// The `Retry-After` delay, when given in seconds.
        retry_after: Option<Duration>,
        /// The response.
        response: ErrorResponse,
    },
    /// Any other error response.
    #[error("error response ({0})")]
    Api(ErrorResponse),
    /// The request did not reach the server, or its response did not arrive whole.
    #[error("transport error")]
    Transport(#[source] reqwest::Error),
    /// The SDK refused the input before sending it.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A Build failed a local check: its digest, its attestation or its expiry.
    #[error(transparent)]
    Build(#[from] crate::sealed::BuildError),
    /// A token source failed: a credential process that exits with an error (its standard error
    /// is in the message), or a token that cannot be sent.
    #[error("no token: {0}")]
    Token(String),
    /// A response the SDK cannot read. Sending the request again would not help.
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    /// The connection dropped in the middle of a response, such as an event stream that broke.
    #[error("disconnected: {0}")]
    Disconnected(String),
    /// The client has no token source for this resource: the request was not sent.
    #[error("no token for the {0:?} resource: the request was not sent")]
    NoToken(Resource),
    /// A turn did not settle within the client's turn deadline.
    #[error("the turn did not settle within {0:?}")]
    Deadline(Duration),
}

impl Error {
    /// Whether a failed GET ended in what retrying can fix: the transport, a broken stream, or
    /// a status the policy retries. A body that does not decode would not decode again.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, Error::Transport(_) | Error::Disconnected(_))
            || self.status().is_some_and(retried_status)
    }

    /// Classifies an error response by its code first, then by its status.
    pub fn from_response(status: u16, headers: &HeaderMap, error: Value) -> Self {
        let (code, message) = match &error {
            Value::String(code) => (Some(code.clone()), None),
            Value::Object(object) => (
                object
                    .get("code")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                object
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            ),
            _ => (None, None),
        };
        let scope = error
            .pointer("/details/scope")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let response = ErrorResponse {
            status,
            code,
            message,
            body: error,
            request_id: request_id(headers).map(|id| Box::new(id.to_owned())),
        };
        match (response.code.as_deref(), status) {
            (Some("invalid_cursor"), _) => Self::InvalidCursor(response),
            (Some("cursor_expired"), _) | (_, 410) => Self::CursorExpired(response),
            (Some("build_expired"), _) => Self::BuildExpired(response),
            (_, 401) => Self::Unauthorized(response),
            (_, 403) => Self::Forbidden {
                scope: scope.or_else(|| challenge_scope(headers)),
                response,
            },
            (_, 404) => Self::NotFound(response),
            (_, 409) => Self::Conflict(response),
            (_, 429) => Self::RateLimited {
                retry_after: retry_after(headers),
                response,
            },
            _ => Self::Api(response),
        }
    }

    /// The error response, when the server sent one.
    pub fn response(&self) -> Option<&ErrorResponse> {
        match self {
            Self::InvalidCursor(r)
            | Self::CursorExpired(r)
            | Self::Unauthorized(r)
            | Self::NotFound(r)
            | Self::Conflict(r)
            | Self::BuildExpired(r)
            | Self::Api(r)
            | Self::Forbidden { response: r, .. }
            | Self::RateLimited { response: r, .. } => Some(r),
            Self::Transport(_)
            | Self::InvalidInput(_)
            | Self::InvalidResponse(_)
            | Self::Disconnected(_)
            | Self::Deadline(_)
            | Self::NoToken(_)
            | Self::Token(_)
            | Self::Build(_) => None,
        }
    }

    /// The HTTP status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Transport(e) => e.status().map(|s| s.as_u16()),
            other => other.response().map(|r| r.status),
        }
    }

    /// The error code, when the server sent one.
    pub fn code(&self) -> Option<&str> {
        self.response().and_then(|r| r.code.as_deref())
    }

    /// The id the deployment gave the request, when it answered with one (see [`RequestId`]).
    pub fn request_id(&self) -> Option<&str> {
        RequestId::request_id(self)
    }
}

/// How the hooks say, through progenitor's `Custom` error, that a resource has no token source.
const NO_TOKEN: &str = "intent-sdk: no token source for ";

/// The hooks' message for `resource` without a token source, which becomes [`Error::NoToken`].
pub(crate) fn no_token(resource: Resource) -> String {
    format!("{NO_TOKEN}{}", resource.path())
}

/// Input the SDK refuses before sending, with the reason.
pub(crate) fn invalid(error: impl fmt::Display) -> Error {
    Error::InvalidInput(error.to_string())
}

/// A success answer whose body does not decode: the error, the status when known, and the body's
/// first 200 characters.
pub(crate) fn undecodable(status: Option<u16>, error: impl fmt::Display, body: &[u8]) -> Error {
    let text = String::from_utf8_lossy(body);
    let excerpt: String = text.chars().take(200).collect();
    let status = status.map(|status| format!(" (status {status})"));
    Error::InvalidResponse(format!(
        "{error}{}; the body: {excerpt}",
        status.unwrap_or_default()
    ))
}

impl From<progenitor_client::Error<ErrorEnvelope>> for Error {
    fn from(error: progenitor_client::Error<ErrorEnvelope>) -> Self {
        use progenitor_client::Error as Generated;
        match error {
            Generated::ErrorResponse(response) => {
                let (status, headers) = (response.status().as_u16(), response.headers().clone());
                Self::from_response(status, &headers, response.into_inner().error)
            }
            Generated::UnexpectedResponse(response) if !response.status().is_success() => {
                let status = response.status().as_u16();
                Self::from_response(status, response.headers(), Value::Null)
            }
            Generated::UnexpectedResponse(response) => {
                Self::InvalidResponse(format!("undocumented status {}", response.status()))
            }
            Generated::CommunicationError(e)
            | Generated::ResponseBodyError(e)
            | Generated::InvalidUpgrade(e) => Self::Transport(e),
            Generated::InvalidRequest(message) => Self::InvalidInput(message),
            Generated::InvalidResponsePayload(body, e) => undecodable(None, e, &body),
            // Only the SDK's hooks make `Custom` errors: a resource without a token source, or a
            // token source that failed.
            Generated::Custom(message) => {
                match message.strip_prefix(NO_TOKEN).and_then(Resource::of_path) {
                    Some(resource) => Self::NoToken(resource),
                    None => Self::Token(message),
                }
            }
        }
    }
}

/// A model or a parameter that does not hold its schema (a string too long, a pattern unmet, a
/// required member left out of a builder): the SDK refuses it before sending.
impl From<intent_models::error::ConversionError> for Error {
    fn from(error: intent_models::error::ConversionError) -> Self {
        invalid(error)
    }
}

/// `scope="..."` of a `Bearer` challenge.
fn challenge_scope(headers: &HeaderMap) -> Option<String> {
    let challenge = headers.get(WWW_AUTHENTICATE)?.to_str().ok()?;
    let (_, rest) = challenge.split_once("scope=\"")?;
    Some(rest.split('"').next()?.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn a_bare_string_code_and_an_object_code_classify_alike() {
        let bare = Error::from_response(400, &HeaderMap::new(), json!("invalid_cursor"));
        let object = Error::from_response(
            400,
            &HeaderMap::new(),
            json!({ "code": "invalid_cursor", "message": "m" }),
        );
        assert!(matches!(bare, Error::InvalidCursor(_)), "{bare:?}");
        assert!(matches!(object, Error::InvalidCursor(_)), "{object:?}");
        assert_eq!(bare.code(), Some("invalid_cursor"));
        assert_eq!(object.response().unwrap().message.as_deref(), Some("m"));
    }

    #[test]
    fn statuses_classify_when_the_code_is_unknown_or_absent() {
        let cases: [(u16, Value); 6] = [
            (410, json!(null)),
            (401, json!({ "code": "whatever" })),
            (404, json!(42)),
            (409, json!("revision_conflict")),
            (422, json!({ "code": "build_expired" })),
            (500, json!({ "code": "internal" })),
        ];
        let kinds: Vec<&str> = cases
            .into_iter()
            .map(
                |(status, body)| match Error::from_response(status, &HeaderMap::new(), body) {
                    Error::CursorExpired(_) => "expired",
                    Error::Unauthorized(_) => "unauthorized",
                    Error::NotFound(_) => "not found",
                    Error::Conflict(_) => "conflict",
                    Error::BuildExpired(_) => "build expired",
                    Error::Api(_) => "api",
                    other => panic!("{other:?}"),
                },
            )
            .collect();
        assert_eq!(
            kinds,
            [
                "expired",
                "unauthorized",
                "not found",
                "conflict",
                "build expired",
                "api"
            ]
        );
    }

    #[test]
    fn forbidden_names_the_scope_from_details_or_the_challenge() {
        let from_details = Error::from_response(
            403,
            &HeaderMap::new(),
            json!({ "code": "insufficient_scope", "details": { "scope": "agent:read" } }),
        );
        assert!(
            matches!(from_details, Error::Forbidden { scope: Some(ref s), .. } if s == "agent:read")
        );
        let challenge = headers(&[(
            "www-authenticate",
            r#"Bearer error="insufficient_scope", scope="pipeline:execute""#,
        )]);
        let from_challenge = Error::from_response(403, &challenge, json!("insufficient_scope"));
        assert!(
            matches!(from_challenge, Error::Forbidden { scope: Some(ref s), .. } if s == "pipeline:execute")
        );
    }

    #[test]
    fn rate_limited_reads_retry_after_seconds() {
        let error = Error::from_response(
            429,
            &headers(&[("retry-after", "7")]),
            json!("rate_limited"),
        );
        assert!(
            matches!(error, Error::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(7))
        );
        let date = headers(&[("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT")]);
        assert!(matches!(
            Error::from_response(429, &date, json!(null)),
            Error::RateLimited {
                retry_after: None,
                ..
            }
        ));
    }
}
