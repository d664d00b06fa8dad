//! The token endpoint: the authorization-code, refresh-token and device-code grants. Refresh
//! tokens rotate on every use; a replayed one revokes its whole family.

use axum::Form;
use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{OAuthError, client, hash};
use crate::auth::token::Grant;
use crate::clock::{now, now_ms, seconds};
use crate::json::Json;
use crate::state::AppState;
use crate::store::{Authorization, DeviceStatus, RefreshUse};

/// The device grant's `grant_type` (RFC 8628, 3.4).
pub(super) const DEVICE_CODE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Seconds added to a device client's interval when it polls too fast (RFC 8628, 3.5).
const SLOW_DOWN_STEP: i64 = 5;

#[derive(Deserialize)]
pub struct TokenForm {
    grant_type: Option<String>,
    client_id: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    code_verifier: Option<String>,
    refresh_token: Option<String>,
    device_code: Option<String>,
    resource: Option<String>,
    scope: Option<String>,
}

pub async fn token(
    State(state): State<AppState>,
    form: Result<Form<TokenForm>, FormRejection>,
) -> Result<Response, OAuthError> {
    let Form(form) = form?;
    let client_id = form.client_id.clone().unwrap_or_default();
    if client(&state, &client_id).await?.is_none() {
        return Err(OAuthError::invalid_client(&client_id));
    }
    let (grant, family) = match form.grant_type.as_deref() {
        Some("authorization_code") => {
            let (grant, family) = authorization_code(&state, &form, &client_id).await?;
            (grant, Some(family))
        }
        Some("refresh_token") => refresh(&state, &form, &client_id).await?,
        Some(DEVICE_CODE_GRANT) => (device_code(&state, &form, &client_id).await?, None),
        Some(other) => {
            return Err(OAuthError::new(
                "unsupported_grant_type",
                format!("grant_type {other} is not supported"),
            ));
        }
        None => return Err(OAuthError::new("invalid_request", "grant_type is required")),
    };
    let access_scopes = narrowed(&grant.scopes, form.scope.as_deref())?;
    issue(&state, grant, family, access_scopes).await
}

async fn authorization_code(
    state: &AppState,
    form: &TokenForm,
    client_id: &str,
) -> Result<(Authorization, String), OAuthError> {
    let code = form
        .code
        .as_deref()
        .ok_or_else(|| OAuthError::new("invalid_request", "code is required"))?;
    let invalid = |why: &str| OAuthError::new("invalid_grant", why.to_owned());
    let code_hash = hash(code);
    let family = format!("code:{code_hash}");
    let Some(stored) = state.store().take_code(&code_hash).await? else {
        // A used code presented again: revoke the refresh tokens it produced (OAuth 2.1, 4.1.3).
        state.store().revoke_refresh_family(&family).await?;
        return Err(invalid("the code is unknown or used"));
    };
    if stored.expires_at <= now() {
        return Err(invalid("the code has expired"));
    }
    if stored.grant.client_id != client_id {
        return Err(invalid("the code was issued to another client"));
    }
    if form.redirect_uri.as_deref() != Some(stored.redirect_uri.as_str()) {
        return Err(invalid(
            "redirect_uri differs from the authorization request",
        ));
    }
    let verifier = form.code_verifier.as_deref().unwrap_or_default();
    if !(43..=128).contains(&verifier.len())
        || URL_SAFE_NO_PAD.encode(Sha256::digest(verifier)) != stored.code_challenge
    {
        return Err(invalid("code_verifier does not match the code_challenge"));
    }
    check_resource(form, &stored.grant.resource)?;
    Ok((stored.grant, family))
}

async fn refresh(
    state: &AppState,
    form: &TokenForm,
    client_id: &str,
) -> Result<(Authorization, Option<String>), OAuthError> {
    let presented = form
        .refresh_token
        .as_deref()
        .ok_or_else(|| OAuthError::new("invalid_request", "refresh_token is required"))?;
    let check =
        |grant: &Authorization, expires_at: i64| check_refresh(grant, expires_at, form, client_id);
    let accept = |grant: &Authorization, expires_at: i64| check(grant, expires_at).is_ok();
    match state
        .store()
        .use_refresh_token(&hash(presented), &accept)
        .await?
    {
        RefreshUse::Rotated { grant, family, .. } => Ok((grant, Some(family))),
        RefreshUse::Refused { grant, expires_at } => Err(check(&grant, expires_at)
            .err()
            .unwrap_or_else(|| OAuthError::new("invalid_grant", "the refresh token was refused"))),
        RefreshUse::Replayed => Err(OAuthError::new(
            "invalid_grant",
            "the refresh token was already used; its family is revoked",
        )),
        RefreshUse::Unknown => Err(OAuthError::new(
            "invalid_grant",
            "the refresh token is unknown",
        )),
    }
}

/// Whether a refresh token may be used for this request; checked before the token is used, so a
/// refused request leaves it active.
fn check_refresh(
    grant: &Authorization,
    expires_at: i64,
    form: &TokenForm,
    client_id: &str,
) -> Result<(), OAuthError> {
    if expires_at <= now() {
        return Err(OAuthError::new(
            "invalid_grant",
            "the refresh token has expired",
        ));
    }
    if grant.client_id != client_id {
        return Err(OAuthError::new(
            "invalid_grant",
            "the refresh token was issued to another client",
        ));
    }
    check_resource(form, &grant.resource)?;
    narrowed(&grant.scopes, form.scope.as_deref()).map(|_| ())
}

async fn device_code(
    state: &AppState,
    form: &TokenForm,
    client_id: &str,
) -> Result<Authorization, OAuthError> {
    let code = form
        .device_code
        .as_deref()
        .ok_or_else(|| OAuthError::new("invalid_request", "device_code is required"))?;
    let code_hash = hash(code);
    let now_ms = now_ms();
    let grant = state
        .store()
        .poll_device_grant(&code_hash, now_ms)
        .await?
        .filter(|grant| grant.client_id == client_id)
        .ok_or_else(|| OAuthError::new("invalid_grant", "the device code is unknown"))?;
    if grant.expires_at <= now() {
        return Err(OAuthError::new(
            "expired_token",
            "the device code has expired; start again",
        ));
    }
    match grant.status {
        DeviceStatus::Pending => {
            let too_soon = grant
                .last_poll_ms
                .is_some_and(|last| now_ms - last < grant.interval_secs * 1000);
            if too_soon {
                state
                    .store()
                    .slow_device_grant(&code_hash, SLOW_DOWN_STEP)
                    .await?;
                let interval = grant.interval_secs + SLOW_DOWN_STEP;
                return Err(OAuthError::new(
                    "slow_down",
                    format!("poll at most every {interval} seconds"),
                ));
            }
            Err(OAuthError::new(
                "authorization_pending",
                "the user has not approved the device yet",
            ))
        }
        DeviceStatus::Denied => Err(OAuthError::new(
            "access_denied",
            "the user denied the device",
        )),
        DeviceStatus::Used => Err(OAuthError::new(
            "invalid_grant",
            "a token was already issued for this device code",
        )),
        DeviceStatus::Approved => {
            // Refused before the grant is used, so the device can ask again correctly.
            check_resource(form, &grant.resource)?;
            let account = grant.account.clone().unwrap_or_default();
            if !state.store().consume_device_grant(&code_hash).await? {
                return Err(OAuthError::new(
                    "invalid_grant",
                    "a token was already issued for this device code",
                ));
            }
            Ok(Authorization {
                client_id: grant.client_id,
                account,
                scopes: grant.scopes,
                resource: grant.resource,
            })
        }
    }
}

/// Issues an access token with `access_scopes` and a refresh token for all of `grant` (in
/// `family`, or a new one).
async fn issue(
    state: &AppState,
    grant: Authorization,
    family: Option<String>,
    access_scopes: String,
) -> Result<Response, OAuthError> {
    let config = state.config();
    let refresh_token = crate::random::id("rt");
    let family = family.unwrap_or_else(|| crate::random::id("fam"));
    let refresh_expires = now() + seconds(config.refresh_token_ttl);
    let saved = state
        .store()
        .save_refresh_token(&hash(&refresh_token), &family, &grant, refresh_expires)
        .await?;
    if !saved {
        return Err(OAuthError::new(
            "invalid_grant",
            "the refresh token family was revoked",
        ));
    }
    let access_token = state.mint_access_token(&Grant {
        account: grant.account.clone(),
        scopes: access_scopes.split(' ').map(str::to_owned).collect(),
        resource: grant.resource.clone(),
        client_id: grant.client_id.clone(),
        ttl: config.access_token_ttl,
    });
    let body = json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": config.access_token_ttl.as_secs(),
        "refresh_token": refresh_token,
        "scope": access_scopes,
    });
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(body)).into_response())
}

/// `invalid_target` when the request names a `resource` other than the `granted` one (RFC 8707).
fn check_resource(form: &TokenForm, granted: &str) -> Result<(), OAuthError> {
    match form.resource.as_deref() {
        Some(resource) if resource != granted => Err(OAuthError::new(
            "invalid_target",
            format!("this grant is for {granted}, not {resource}"),
        )),
        _ => Ok(()),
    }
}

/// The scopes of the access token: `requested` when it asks for some of `granted` (RFC 6749, 6),
/// else all of `granted`.
fn narrowed(granted: &str, requested: Option<&str>) -> Result<String, OAuthError> {
    let Some(requested) = requested.filter(|r| !r.trim().is_empty()) else {
        return Ok(granted.to_owned());
    };
    let granted: Vec<&str> = granted.split(' ').collect();
    if let Some(extra) = requested.split_whitespace().find(|s| !granted.contains(s)) {
        return Err(OAuthError::new(
            "invalid_scope",
            format!("scope {extra} was not granted"),
        ));
    }
    Ok(requested.split_whitespace().collect::<Vec<_>>().join(" "))
}
