//! The Pipeline's HTTP layer: routes under `/v1/pipeline`, each a few lines that parse, call
//! [`Pipeline`](super::Pipeline) and answer JSON.

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, State};
use axum::routing::{get, post};
use intent_models::{ErrorCode, OperationDescriptor, PipelineChain, PipelineLifecycleResponse};
use serde_json::Value;

use super::{Lifecycle, Pipeline};
use crate::auth::principal::Principal;
use crate::error::ApiError;
use crate::json::Json;
use crate::web::{ApiJson, ApiPath};

/// Routes under `/v1/pipeline`, over any state that holds the [`Pipeline`].
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Pipeline>: FromRef<S>,
{
    Router::new()
        .route("/v1/pipeline/apps", get(list_apps))
        .route(
            "/v1/pipeline/apps/{app}/operations/{operation}",
            get(app_operation),
        )
        .route("/v1/pipeline/skills", get(list_skills))
        .route(
            "/v1/pipeline/skills/{skill}/operations/{operation}",
            post(call_skill),
        )
        .route("/v1/pipeline/evm/build", post(evm_build))
        .route("/v1/pipeline/svm/stage", post(svm_stage))
}

/// Longest app, skill or operation name (part 8).
const MAX_NAME: usize = 160;

/// `{app}` or `{skill}`, and `{operation}`: 1 to 160 characters each.
struct Names(String, String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Names {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let ApiPath((first, second)) =
            ApiPath::<(String, String)>::from_request_parts(parts, state).await?;
        for name in [&first, &second] {
            if name.is_empty() || name.chars().count() > MAX_NAME {
                return Err(ApiError::new(
                    ErrorCode::InvalidParameter,
                    format!("names are 1 to {MAX_NAME} characters"),
                ));
            }
        }
        Ok(Self(first, second))
    }
}

async fn list_apps(State(pipeline): State<Arc<Pipeline>>) -> Result<Json<Value>, ApiError> {
    Ok(Json(pipeline.apps()?))
}

async fn app_operation(
    State(pipeline): State<Arc<Pipeline>>,
    Names(app, operation): Names,
) -> Result<Json<OperationDescriptor>, ApiError> {
    Ok(Json(pipeline.app_operation(&app, &operation)?))
}

async fn list_skills(State(pipeline): State<Arc<Pipeline>>) -> Result<Json<Value>, ApiError> {
    Ok(Json(pipeline.skills()?))
}

async fn call_skill(
    State(pipeline): State<Arc<Pipeline>>,
    Names(skill, operation): Names,
    ApiJson(input): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(pipeline.call_skill(&skill, &operation, &input)?))
}

/// `POST /v1/pipeline/evm/build`.
async fn evm_build(
    State(pipeline): State<Arc<Pipeline>>,
    principal: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<PipelineLifecycleResponse>, ApiError> {
    lifecycle(&pipeline, &principal, PipelineChain::Evm, body).await
}

/// `POST /v1/pipeline/svm/stage`.
async fn svm_stage(
    State(pipeline): State<Arc<Pipeline>>,
    principal: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<PipelineLifecycleResponse>, ApiError> {
    lifecycle(&pipeline, &principal, PipelineChain::Svm, body).await
}

async fn lifecycle(
    pipeline: &Pipeline,
    principal: &Principal,
    chain: PipelineChain,
    body: Value,
) -> Result<Json<PipelineLifecycleResponse>, ApiError> {
    let request = Lifecycle::parse(chain, body)?;
    let response = pipeline
        .lifecycle(&principal.account, chain, request)
        .await?;
    Ok(Json(response))
}
