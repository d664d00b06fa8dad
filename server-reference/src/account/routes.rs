//! The Account's HTTP layer: routes under `/v1/account`, each a few lines that parse, call
//! [`Account`](super::Account) and answer JSON.

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, State};
use axum::routing::{get, post, put};
use intent_models::{
    AccountAppList, AppInstallation, CredentialChange, CredentialList, CredentialValue,
    UsageStatement,
};
use serde::Deserialize;

use super::Account;
use crate::auth::principal::Principal;
use crate::error::ApiError;
use crate::ids::{ApplicationId, CredentialName};
use crate::json::Json;
use crate::web::{ApiJson, ApiPath, ApiQuery};

/// Routes under `/v1/account`, over any state that holds the [`Account`] service.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Account>: FromRef<S>,
{
    Router::new()
        .route("/v1/account/apps", get(list_apps))
        .route(
            "/v1/account/apps/{application_id}",
            post(install).delete(uninstall),
        )
        .route(
            "/v1/account/apps/{application_id}/secrets",
            get(list_credentials),
        )
        .route(
            "/v1/account/apps/{application_id}/secrets/{name}",
            put(save_credential).delete(remove_credential),
        )
        .route("/v1/account/statement", get(get_statement))
}

async fn list_apps(
    State(account): State<Arc<Account>>,
    principal: Principal,
) -> Result<Json<AccountAppList>, ApiError> {
    Ok(Json(account.apps(&principal.account).await?))
}

async fn install(
    State(account): State<Arc<Account>>,
    principal: Principal,
    ApiPath(app): ApiPath<ApplicationId>,
) -> Result<Json<AppInstallation>, ApiError> {
    Ok(Json(account.install(&principal.account, app).await?))
}

async fn uninstall(
    State(account): State<Arc<Account>>,
    principal: Principal,
    ApiPath(app): ApiPath<ApplicationId>,
) -> Result<Json<AppInstallation>, ApiError> {
    Ok(Json(account.uninstall(&principal.account, app).await?))
}

async fn list_credentials(
    State(account): State<Arc<Account>>,
    principal: Principal,
    ApiPath(app): ApiPath<ApplicationId>,
) -> Result<Json<CredentialList>, ApiError> {
    Ok(Json(account.credentials(&principal.account, app).await?))
}

async fn save_credential(
    State(account): State<Arc<Account>>,
    principal: Principal,
    ApiPath((app, name)): ApiPath<(ApplicationId, CredentialName)>,
    ApiJson(CredentialValue { value, .. }): ApiJson<CredentialValue>,
) -> Result<Json<CredentialChange>, ApiError> {
    let change = account
        .save_credential(&principal.account, app, &name, &value)
        .await?;
    Ok(Json(change))
}

async fn remove_credential(
    State(account): State<Arc<Account>>,
    principal: Principal,
    ApiPath((app, name)): ApiPath<(ApplicationId, CredentialName)>,
) -> Result<Json<CredentialChange>, ApiError> {
    let change = account
        .remove_credential(&principal.account, app, &name)
        .await?;
    Ok(Json(change))
}

#[derive(Deserialize)]
struct StatementQuery {
    period: Option<String>,
}

async fn get_statement(
    State(account): State<Arc<Account>>,
    principal: Principal,
    ApiQuery(query): ApiQuery<StatementQuery>,
) -> Result<Json<UsageStatement>, ApiError> {
    let statement = account
        .statement(&principal.account, query.period.as_deref())
        .await?;
    Ok(Json(statement))
}
