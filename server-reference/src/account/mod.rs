//! The Account area (part 4.3): applications, credentials and the usage statement. Every
//! handler is scoped to the caller's account; handlers parse, check, call the store and map.

mod catalog;
mod statement;

use std::num::NonZeroU64;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use intent_models::{
    AccountApp, AccountAppList, AppInstallation, CredentialChange, CredentialList,
    CredentialStatus, CredentialValue, ErrorCode, Money, StatementLine, StatementLineMeter,
    StatementPeriod, UsageStatement, UsageStatementCurrency,
};
use serde::Deserialize;

use crate::error::ApiError;
use crate::gateway::Principal;
use crate::store::Meter;
use crate::{AppState, now};

use catalog::AppSpec;

/// Routes under `/v1/account`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/apps", get(list_apps))
        .route("/apps/{application_id}", post(install).delete(uninstall))
        .route("/apps/{application_id}/secrets", get(list_credentials))
        .route(
            "/apps/{application_id}/secrets/{name}",
            put(save_credential).delete(remove_credential),
        )
        .route("/statement", get(get_statement))
}

async fn list_apps(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Json<AccountAppList>, ApiError> {
    let installed = state.store().installations(&principal.account).await?;
    let apps = catalog::APPS
        .iter()
        .map(|app| {
            let installed_at = installed
                .iter()
                .find(|(id, _)| *id == app.id)
                .map(|(_, at)| *at);
            AccountApp {
                id: app_id(app),
                name: app.name.to_owned(),
                description: app.description.to_owned(),
                installed: installed_at.is_some(),
                installed_at,
                required_credentials: app
                    .credentials
                    .iter()
                    .filter(|c| c.required)
                    .map(|c| c.name.to_owned())
                    .collect(),
            }
        })
        .collect();
    Ok(Json(AccountAppList { apps }))
}

async fn install(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<AppInstallation>, ApiError> {
    let app = application(path)?;
    let present = state
        .store()
        .credentials(&principal.account, app.id)
        .await?;
    let missing: Vec<&str> = app
        .credentials
        .iter()
        .filter(|c| c.required && !present.iter().any(|p| p.name == c.name))
        .map(|c| c.name)
        .collect();
    if !missing.is_empty() {
        return Err(ApiError::new(
            ErrorCode::CredentialsMissing,
            format!(
                "save the required credentials first: {}",
                missing.join(", ")
            ),
        )
        .with_detail("missing", missing.into()));
    }
    let installed_at = state
        .store()
        .install(&principal.account, app.id, now())
        .await?;
    Ok(Json(AppInstallation {
        application_id: app_id(app),
        installed: true,
        installed_at: Some(installed_at),
    }))
}

async fn uninstall(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<AppInstallation>, ApiError> {
    let app = application(path)?;
    state.store().uninstall(&principal.account, app.id).await?;
    Ok(Json(AppInstallation {
        application_id: app_id(app),
        installed: false,
        installed_at: None,
    }))
}

async fn list_credentials(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<CredentialList>, ApiError> {
    let app = application(path)?;
    let present = state
        .store()
        .credentials(&principal.account, app.id)
        .await?;
    let credentials = app
        .credentials
        .iter()
        .map(|spec| {
            let updated_at = present
                .iter()
                .find(|p| p.name == spec.name)
                .map(|p| p.updated_at);
            CredentialStatus {
                name: spec.name.to_owned(),
                description: spec.description.to_owned(),
                required: spec.required,
                present: updated_at.is_some(),
                updated_at,
            }
        })
        .collect();
    Ok(Json(CredentialList {
        application_id: app_id(app),
        credentials,
    }))
}

async fn save_credential(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Result<Json<CredentialValue>, JsonRejection>,
) -> Result<Json<CredentialChange>, ApiError> {
    let (app, name) = credential(path)?;
    let Json(CredentialValue { value }) = body?;
    let sealed = state
        .sealer()
        .seal(&sealing_context(&principal, app, name), &value);
    state
        .store()
        .save_credential(&principal.account, app.id, name, &sealed, now())
        .await?;
    Ok(Json(CredentialChange {
        application_id: app_id(app),
        name: name.to_owned(),
        present: true,
    }))
}

async fn remove_credential(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<CredentialChange>, ApiError> {
    let (app, name) = credential(path)?;
    if !state
        .store()
        .remove_credential(&principal.account, app.id, name)
        .await?
    {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no credential {name} is saved for this application"),
        ));
    }
    Ok(Json(CredentialChange {
        application_id: app_id(app),
        name: name.to_owned(),
        present: false,
    }))
}

#[derive(Deserialize)]
struct StatementQuery {
    period: Option<String>,
}

async fn get_statement(
    State(state): State<AppState>,
    principal: Principal,
    query: Result<Query<StatementQuery>, QueryRejection>,
) -> Result<Json<UsageStatement>, ApiError> {
    let Query(query) =
        query.map_err(|e| ApiError::new(ErrorCode::InvalidParameter, e.body_text()))?;
    let month = match query.period.as_deref() {
        None => statement::Month::containing(now()),
        Some(text) => statement::Month::parse(text).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidParameter,
                "period must be a month as YYYY-MM",
            )
        })?,
    };
    let (start, end) = month.bounds();
    let usage = state.store().usage(&principal.account, start, end).await?;
    let mut total = 0;
    let lines = Meter::ALL
        .into_iter()
        .map(|meter| {
            let quantity = usage
                .iter()
                .find(|(m, _)| *m == meter)
                .map_or(0, |(_, n)| *n);
            let price = statement::unit_price_millis(meter);
            total += quantity * price;
            StatementLine {
                meter: statement_meter(meter),
                quantity,
                unit_price: money(price),
                amount: money(quantity * price),
            }
        })
        .collect();
    Ok(Json(UsageStatement {
        period: StatementPeriod { start, end },
        currency: UsageStatementCurrency::Usd,
        lines,
        total: money(total),
    }))
}

/// The application named by the path, or 400 for a malformed id and 404 for an unknown one.
fn application(path: Result<Path<String>, PathRejection>) -> Result<&'static AppSpec, ApiError> {
    let Path(raw) = path.map_err(|e| ApiError::new(ErrorCode::InvalidParameter, e.body_text()))?;
    find_application(&raw)
}

fn find_application(raw: &str) -> Result<&'static AppSpec, ApiError> {
    let id: i64 = raw.parse().ok().filter(|id| *id >= 1).ok_or_else(|| {
        ApiError::new(
            ErrorCode::InvalidParameter,
            "applicationId must be an integer of at least 1",
        )
    })?;
    catalog::app(id)
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no application {id}")))
}

/// The application and a credential name it declares.
fn credential(
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(&'static AppSpec, &'static str), ApiError> {
    let Path((raw_app, name)) =
        path.map_err(|e| ApiError::new(ErrorCode::InvalidParameter, e.body_text()))?;
    if !is_credential_name(&name) {
        return Err(ApiError::new(
            ErrorCode::InvalidParameter,
            "name must match ^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        ));
    }
    let app = find_application(&raw_app)?;
    let spec = app.credential(&name).ok_or_else(|| {
        ApiError::new(
            ErrorCode::NotFound,
            format!("application {} declares no credential {name}", app.id),
        )
    })?;
    Ok((app, spec.name))
}

/// `^[A-Za-z_][A-Za-z0-9_]{0,127}$`
fn is_credential_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    first_ok && name.len() <= 128 && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// What a sealed value is bound to: it opens for this account, application and name only.
fn sealing_context(principal: &Principal, app: &AppSpec, name: &str) -> String {
    format!("{}\u{0}{}\u{0}{name}", principal.account, app.id)
}

fn app_id(app: &AppSpec) -> NonZeroU64 {
    NonZeroU64::new(app.id.unsigned_abs()).expect("catalog ids start at 1")
}

fn money(millis: i64) -> Money {
    statement::format_millis(millis)
        .parse()
        .expect("formatted money matches the Money pattern")
}

fn statement_meter(meter: Meter) -> StatementLineMeter {
    match meter {
        Meter::Turn => StatementLineMeter::Turn,
        Meter::Build => StatementLineMeter::Build,
        Meter::Simulation => StatementLineMeter::Simulation,
        Meter::Commit => StatementLineMeter::Commit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_follow_the_interface_pattern() {
        for ok in ["API_KEY", "_x", "a", &"a".repeat(128)] {
            assert!(is_credential_name(ok), "{ok}");
        }
        for bad in ["", "1KEY", "API-KEY", "key space", &"a".repeat(129), "é"] {
            assert!(!is_credential_name(bad), "{bad}");
        }
    }

    #[test]
    fn application_ids_below_1_or_not_numeric_are_invalid_and_unknown_ones_absent() {
        for bad in ["0", "-1", "x", "1.5", ""] {
            assert_eq!(
                find_application(bad).unwrap_err().code(),
                ErrorCode::InvalidParameter,
                "{bad}"
            );
        }
        assert_eq!(
            find_application("999").unwrap_err().code(),
            ErrorCode::NotFound
        );
        assert_eq!(find_application("1").unwrap().name, "price-feeds");
    }

    #[test]
    fn every_catalog_credential_name_is_valid() {
        for app in catalog::APPS {
            for credential in app.credentials {
                assert!(is_credential_name(credential.name), "{}", credential.name);
            }
        }
    }
}
