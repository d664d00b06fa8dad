//! What every area's HTTP layer shares: extractors whose rejection is the error envelope, and the
//! handlers of the paths outside the three resources (health, readiness, the document, and the
//! metrics on their own address).

pub(crate) mod body_limit;
pub(crate) mod endpoints;
mod error;
pub(crate) mod gateway;
pub(crate) mod request_log;
pub(crate) mod serve;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use intent_models::ErrorCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::auth::principal::Principal;
use crate::error::ApiError;
use crate::ids::{self, SessionId};
use crate::json::{self, Json};
use crate::web::endpoints::BodySchema;

/// A JSON body that holds against its operation's schema in openapi.json (the gateway's
/// [`BodySchema`]); a missing content type is 415, an oversized body 413, anything else 400.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let schema = request.extensions().get::<BodySchema>().cloned();
        let axum::Json(body) = axum::Json::<Value>::from_request(request, state)
            .await
            .map_err(|e: JsonRejection| ApiError::from(e))?;
        if let Some(violation) = schema.and_then(|schema| schema.0.first_violation(&body)) {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("the body does not match openapi.json: {violation}"),
            ));
        }
        serde_json::from_value(body)
            .map(Self)
            .map_err(|e| ApiError::new(ErrorCode::InvalidRequest, e.to_string()))
    }
}

/// Path parameters; one that does not parse is 400 `invalid_parameter`.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(value) = Path::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e: PathRejection| invalid_parameter(e.body_text()))?;
        Ok(Self(value))
    }
}

/// Query parameters; one that does not parse is 400 `invalid_parameter`, naming it.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        // A query that parses is read by serde_urlencoded alone. axum's `Query` reads it through
        // serde_path_to_error, which names the parameter that does not parse but costs 1,000
        // instructions a request (a third of a page GET's handler): a refused query is read again
        // by it, for its message.
        if let Ok(value) = serde_urlencoded::from_str(parts.uri.query().unwrap_or_default()) {
            return Ok(Self(value));
        }
        let Query(value) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e: QueryRejection| invalid_parameter(e.body_text()))?;
        Ok(Self(value))
    }
}

/// The `{session_id}` path parameter, of the paths that name other parameters too.
pub struct SessionPath(pub SessionId);

impl<S: Send + Sync> FromRequestParts<S> for SessionPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        #[derive(Deserialize)]
        struct Params {
            session_id: String,
        }
        let ApiPath(Params { session_id }) = ApiPath::from_request_parts(parts, state).await?;
        ids::session_id(session_id)
            .map(Self)
            .map_err(|refused| invalid_parameter(refused.to_string()))
    }
}

/// Longest idempotency key.
const MAX_IDEMPOTENCY_KEY: usize = 255;

/// The `Idempotency-Key` header: required, 1 to 255 visible ASCII characters.
pub struct IdempotencyKey(pub String);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let key = parts
            .headers
            .get("idempotency-key")
            .map(|v| v.to_str().unwrap_or_default())
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    "the Idempotency-Key header is required",
                )
            })?;
        if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY {
            return Err(invalid_parameter(format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"
            )));
        }
        Ok(Self(key.to_owned()))
    }
}

fn invalid_parameter(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidParameter, message)
}

/// `GET /healthz`.
pub async fn healthz() -> Response {
    json::json(r#"{"status":"ok"}"#)
}

/// `GET /readyz`: 200 `ready`, or 503 with why the server takes no requests now.
pub async fn readyz<S>(State(state): State<S>) -> Response
where
    S: Ready + Send + Sync,
{
    match state.unready().await {
        None => Json(serde_json::json!({ "status": "ready" })).into_response(),
        Some(status) => {
            let body = Json(serde_json::json!({ "status": status }));
            (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
        }
    }
}

/// What `/readyz` asks of the server.
pub trait Ready {
    /// Why the server takes no requests now (it drains, its store does not answer), or `None`.
    fn unready(&self) -> impl Future<Output = Option<&'static str>> + Send;
}

/// `GET /openapi.json`: the document this server implements.
pub async fn openapi() -> Response {
    json::json(crate::interface::TEXT)
}

/// `GET /metrics` of the metrics' own address: the registry in the OpenMetrics text format.
pub async fn metrics() -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            crate::metrics::CONTENT_TYPE,
        )],
        crate::metrics::text(),
    )
        .into_response()
}

/// Any path that no route serves.
pub async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such resource")
}

/// A known path with another method.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this path",
    )
}

/// The principal the gateway put on the request, taken from it (a clone would write its counts,
/// which every worker thread writes); a handler reached without it, or taking it twice, is a
/// bug.
impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.remove::<Principal>().ok_or_else(|| {
            tracing::error!(path = %parts.uri.path(), "handler reached without the gateway's principal, or taking it twice");
            ApiError::internal()
        })
    }
}
