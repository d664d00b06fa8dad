//! The device authorization grant (RFC 8628): a device asks for codes, the user approves or
//! denies the user code on the verification page, and the device polls the token endpoint.

use axum::Form;
use axum::extract::rejection::FormRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{DEVICE_VERIFY_PATH, OAuthError, client, hash, html, requested, valid_account};
use crate::clock::now;
use crate::json::Json;
use crate::state::AppState;
use crate::store::{DeviceGrant, DeviceStatus};

/// Letters of a user code: no vowels, no look-alikes (RFC 8628, 6.1).
const USER_CODE_ALPHABET: &[u8] = b"BCDFGHJKLMNPQRSTVWXZ";

#[derive(Deserialize)]
pub struct StartForm {
    client_id: Option<String>,
    scope: Option<String>,
    resource: Option<String>,
}

pub async fn start(
    State(state): State<AppState>,
    form: Result<Form<StartForm>, FormRejection>,
) -> Result<Json<Value>, OAuthError> {
    let Form(form) = form?;
    let client_id = form.client_id.unwrap_or_default();
    let client = client(&state, &client_id)
        .await?
        .ok_or_else(|| OAuthError::invalid_client(&client_id))?;
    let (resource, scopes) = requested(&state, form.resource.as_deref(), form.scope.as_deref())?;
    let config = state.config();
    let device_code = crate::random::id("dc");
    let user_code = user_code();
    let expires_in = config.device_code_ttl.as_secs();
    let interval = config.device_poll_interval.as_secs().max(1);
    let grant = DeviceGrant {
        user_code: user_code.clone(),
        client_id: client.id.clone(),
        scopes,
        resource,
        account: None,
        status: DeviceStatus::Pending,
        interval_secs: interval.try_into().unwrap_or(i64::MAX),
        last_poll_ms: None,
        expires_at: now() + i64::try_from(expires_in).unwrap_or(i64::MAX / 2),
    };
    state
        .store()
        .save_device_grant(&hash(&device_code), &grant)
        .await?;
    let verification_uri = format!("{}{DEVICE_VERIFY_PATH}", state.issuer());
    Ok(Json(json!({
        "device_code": device_code,
        "user_code": user_code,
        "verification_uri": verification_uri,
        "verification_uri_complete": format!("{verification_uri}?user_code={user_code}"),
        "expires_in": expires_in,
        "interval": interval,
    })))
}

#[derive(Deserialize)]
pub struct ShowQuery {
    user_code: Option<String>,
}

pub async fn show(Query(query): Query<ShowQuery>) -> Response {
    let user_code = html::escape(&query.user_code.unwrap_or_default());
    let csrf = html::csrf_token();
    let body = format!(
        "<form method=\"post\">{csrf_field}\n\
         <label>Code <input name=\"user_code\" value=\"{user_code}\" required></label>\n\
         <label>Act as account <input name=\"account\" maxlength=\"128\"></label>\n\
         <button name=\"decision\" value=\"approve\">Approve</button>\n\
         <button name=\"decision\" value=\"deny\">Deny</button></form>",
        csrf_field = html::csrf_field(&csrf),
    );
    html::with_csrf_cookie(
        html::render(StatusCode::OK, "Connect a device", &body),
        &csrf,
    )
}

#[derive(Deserialize)]
pub struct Decision {
    user_code: Option<String>,
    account: Option<String>,
    decision: Option<String>,
    csrf: Option<String>,
}

pub async fn decide(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<Decision>,
) -> Response {
    if !html::csrf_ok(&headers, form.csrf.as_deref()) {
        return html::csrf_refused();
    }
    let user_code = normalize(&form.user_code.unwrap_or_default());
    let account = match form.decision.as_deref() {
        Some("approve") => match form.account.filter(|a| valid_account(a)) {
            Some(account) => Some(account),
            None => {
                return html::render(
                    StatusCode::BAD_REQUEST,
                    "Bad request",
                    "<p>Name a valid account.</p>",
                );
            }
        },
        Some("deny") => None,
        _ => {
            return html::render(
                StatusCode::BAD_REQUEST,
                "Bad request",
                "<p>Choose approve or deny.</p>",
            );
        }
    };
    match state
        .store()
        .decide_device_grant(&user_code, account.as_deref(), now())
        .await
    {
        Ok(true) if account.is_some() => html::render(
            StatusCode::OK,
            "Device approved",
            "<p>Return to your device.</p>",
        ),
        Ok(true) => html::render(
            StatusCode::OK,
            "Device denied",
            "<p>The device gets no access.</p>",
        ),
        Ok(false) => html::render(
            StatusCode::BAD_REQUEST,
            "Unknown code",
            "<p>The code is unknown, expired, or already decided.</p>",
        ),
        Err(error) => OAuthError::from(error).into_response(),
    }
}

/// `XXXX-XXXX` from [`USER_CODE_ALPHABET`].
fn user_code() -> String {
    let letters: String = crate::random::bytes::<8>()
        .iter()
        .map(|b| char::from(USER_CODE_ALPHABET[usize::from(*b) % USER_CODE_ALPHABET.len()]))
        .collect();
    format!("{}-{}", &letters[..4], &letters[4..])
}

/// Upper case, with the dash put back where people leave it out.
fn normalize(input: &str) -> String {
    let letters: String = input
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if letters.len() == 8 {
        format!("{}-{}", &letters[..4], &letters[4..])
    } else {
        letters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_codes_are_two_groups_of_four_unambiguous_letters() {
        let code = user_code();
        assert_eq!(code.len(), 9);
        assert_eq!(&code[4..5], "-");
        assert!(
            code.bytes()
                .filter(|b| *b != b'-')
                .all(|b| USER_CODE_ALPHABET.contains(&b))
        );
    }

    #[test]
    fn typed_codes_are_normalized() {
        assert_eq!(normalize("bcdf ghjk"), "BCDF-GHJK");
        assert_eq!(normalize("BCDF-GHJK"), "BCDF-GHJK");
    }
}
