//! Reference server of the Pipeline, Agent and Account interface.
//!
//! [`app`] builds the router, separate from `main`, so that tests serve it on a real socket.

#![forbid(unsafe_code)]

pub mod error;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use intent_models::ErrorCode;

use crate::error::ApiError;

/// The interface document this server implements, served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("../../openapi.json");

/// Serves [`app`] on `listener` until the future is dropped.
pub async fn serve(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    axum::serve(listener, app()).await
}

/// The whole service.
pub fn app() -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({ "status": "ok" }))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such resource")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this path",
    )
}
