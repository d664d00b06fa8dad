//! The authorization endpoint: authorization code with PKCE S256 and exact redirect URIs. GET
//! shows a consent page that asks which account to act as; POST approves or denies.

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::{OAuthError, client, hash, html, requested, valid_account};
use crate::clock::now;
use crate::state::AppState;
use crate::store::{Authorization, AuthorizationCode};

/// Lifetime of an authorization code, seconds.
const CODE_TTL: i64 = 60;

/// The parameters of an authorization request (RFC 6749, 4.1.1; RFC 7636; RFC 8707).
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct AuthorizeParams {
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    scope: Option<String>,
    state: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    resource: Option<String>,
}

/// The consent form: the request again, the account, and the decision.
#[derive(Debug, Deserialize)]
pub struct Consent {
    #[serde(flatten)]
    params: AuthorizeParams,
    account: Option<String>,
    decision: Option<String>,
    csrf: Option<String>,
}

/// A request that passed every check.
struct Checked {
    client_id: String,
    /// How the consent page names the client.
    client_label: String,
    redirect_uri: String,
    state: Option<String>,
    code_challenge: String,
    resource: String,
    scopes: String,
}

/// Why a request was refused: before the redirect URI is trusted the refusal is a page; after,
/// the error goes back to the client.
enum Refusal {
    Page(String),
    /// The request could not be checked (the store failed).
    Failed(OAuthError),
    Redirect {
        redirect_uri: String,
        state: Option<String>,
        error: OAuthError,
    },
}

pub async fn show(
    State(state): State<AppState>,
    Query(params): Query<AuthorizeParams>,
) -> Response {
    match check(&state, &params).await {
        Ok(checked) => consent_page(&params, &checked),
        Err(refusal) => refuse(refusal, state.issuer()),
    }
}

pub async fn decide(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(consent): Form<Consent>,
) -> Response {
    if !html::csrf_ok(&headers, consent.csrf.as_deref()) {
        return html::csrf_refused();
    }
    let checked = match check(&state, &consent.params).await {
        Ok(checked) => checked,
        Err(refusal) => return refuse(refusal, state.issuer()),
    };
    match consent.decision.as_deref() {
        Some("approve") => {}
        Some("deny") => {
            let error = OAuthError::new("access_denied", "the user denied the request");
            return refuse(
                Refusal::Redirect {
                    redirect_uri: checked.redirect_uri,
                    state: checked.state,
                    error,
                },
                state.issuer(),
            );
        }
        _ => {
            return html::render(
                StatusCode::BAD_REQUEST,
                "Bad request",
                "<p>Choose approve or deny.</p>",
            );
        }
    }
    let Some(account) = consent.account.filter(|a| valid_account(a)) else {
        let body = "<p>The account must be 1 to 128 letters, digits or <code>_ . @ -</code>.</p>";
        return html::render(StatusCode::BAD_REQUEST, "Bad request", body);
    };
    let code = crate::random::id("ac");
    let stored = AuthorizationCode {
        grant: Authorization {
            client_id: checked.client_id,
            account,
            scopes: checked.scopes,
            resource: checked.resource,
        },
        redirect_uri: checked.redirect_uri.clone(),
        code_challenge: checked.code_challenge,
        expires_at: now() + CODE_TTL,
    };
    if let Err(error) = state.store().save_code(&hash(&code), &stored).await {
        return OAuthError::from(error).into_response();
    }
    let query = [
        ("code", Some(code.as_str())),
        ("state", checked.state.as_deref()),
        ("iss", Some(state.issuer())),
    ];
    redirect(&checked.redirect_uri, &query)
}

async fn check(state: &AppState, params: &AuthorizeParams) -> Result<Checked, Refusal> {
    let client_id = params.client_id.as_deref().unwrap_or_default();
    let client = client(state, client_id)
        .await
        .map_err(|error| match error.error {
            // A metadata document that describes no client, said on the page.
            "invalid_client" => Refusal::Page(format!("{}.", error.description)),
            _ => Refusal::Failed(error),
        })?
        .ok_or_else(|| Refusal::Page(format!("Unknown client {client_id:?}.")))?;
    let redirect_uri = params.redirect_uri.as_deref().unwrap_or_default();
    if !client
        .redirect_uris
        .iter()
        .any(|registered| redirect_matches(registered, redirect_uri))
    {
        return Err(Refusal::Page(format!(
            "The redirect URI {redirect_uri:?} is not registered for this client."
        )));
    }
    let to_client = |error| Refusal::Redirect {
        redirect_uri: redirect_uri.to_owned(),
        state: params.state.clone(),
        error,
    };
    if params.response_type.as_deref() != Some("code") {
        return Err(to_client(OAuthError::new(
            "unsupported_response_type",
            "response_type must be code",
        )));
    }
    let code_challenge = params.code_challenge.as_deref().unwrap_or_default();
    if params.code_challenge_method.as_deref() != Some("S256") {
        return Err(to_client(OAuthError::new(
            "invalid_request",
            "PKCE with code_challenge_method S256 is required",
        )));
    }
    if code_challenge.len() != 43
        || !code_challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(to_client(OAuthError::new(
            "invalid_request",
            "code_challenge must be a base64url SHA-256",
        )));
    }
    let (resource, scopes) =
        requested(state, params.resource.as_deref(), params.scope.as_deref()).map_err(to_client)?;
    Ok(Checked {
        client_label: client.label(),
        client_id: client.id,
        redirect_uri: redirect_uri.to_owned(),
        state: params.state.clone(),
        code_challenge: code_challenge.to_owned(),
        resource,
        scopes,
    })
}

/// Whether `given` is the registered redirect URI: the same text, or for a loopback IP literal
/// (`http://127.0.0.1` or `http://[::1]`) the same URI on any port, since a native client
/// listens on a port the system picks (RFC 8252, section 7.3).
fn redirect_matches(registered: &str, given: &str) -> bool {
    registered == given
        || matches!(
            (loopback_without_port(registered), loopback_without_port(given)),
            (Some(a), Some(b)) if a == b
        )
}

/// A loopback `http` URI as (host, path and query), leaving out its port.
fn loopback_without_port(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("http://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = match authority.strip_prefix("[::1]") {
        Some(port) => ("[::1]", port),
        None => authority.split_at(authority.find(':').unwrap_or(authority.len())),
    };
    let (host, port) = host;
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (["127.0.0.1", "[::1]"].contains(&host) && port_ok).then_some((host, path))
}

fn consent_page(params: &AuthorizeParams, checked: &Checked) -> Response {
    let fields = serde_urlencoded::to_string(params).expect("parameters encode");
    let hidden: String = serde_urlencoded::from_str::<Vec<(String, String)>>(&fields)
        .expect("encoded parameters decode")
        .iter()
        .map(|(name, value)| html::hidden(name, value))
        .collect();
    let csrf = html::csrf_token();
    let body = format!(
        "<p>Client <strong>{client}</strong> asks for <code>{scopes}</code> on <code>{resource}</code>.</p>\n\
         <form method=\"post\">{hidden}{csrf_field}\n\
         <label>Act as account <input name=\"account\" required maxlength=\"128\"></label>\n\
         <button name=\"decision\" value=\"approve\">Approve</button>\n\
         <button name=\"decision\" value=\"deny\">Deny</button></form>",
        client = html::escape(&checked.client_label),
        scopes = html::escape(&checked.scopes),
        resource = html::escape(&checked.resource),
        csrf_field = html::csrf_field(&csrf),
    );
    html::with_csrf_cookie(html::render(StatusCode::OK, "Authorize", &body), &csrf)
}

fn refuse(refusal: Refusal, issuer: &str) -> Response {
    match refusal {
        Refusal::Page(message) => html::render(
            StatusCode::BAD_REQUEST,
            "Bad authorization request",
            &format!("<p>{}</p>", html::escape(&message)),
        ),
        Refusal::Failed(error) => error.into_response(),
        Refusal::Redirect {
            redirect_uri,
            state,
            error,
        } => {
            let query = [
                ("error", Some(error.error)),
                ("error_description", Some(error.description.as_str())),
                ("state", state.as_deref()),
                ("iss", Some(issuer)),
            ];
            redirect(&redirect_uri, &query)
        }
    }
}

/// 303 to `uri` with `query` appended (absent values left out).
fn redirect(uri: &str, query: &[(&str, Option<&str>)]) -> Response {
    let present: Vec<(&str, &str)> = query
        .iter()
        .filter_map(|(k, v)| Some((*k, (*v)?)))
        .collect();
    let encoded = serde_urlencoded::to_string(present).expect("query parameters encode");
    let separator = if uri.contains('?') { '&' } else { '?' };
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("{uri}{separator}{encoded}"))],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_redirects_match_on_any_port_and_others_exactly() {
        let registered = "http://127.0.0.1:9/callback";
        assert!(redirect_matches(registered, "http://127.0.0.1:9/callback"));
        assert!(redirect_matches(
            registered,
            "http://127.0.0.1:51234/callback"
        ));
        assert!(redirect_matches(registered, "http://127.0.0.1/callback"));
        assert!(!redirect_matches(
            registered,
            "http://127.0.0.1:51234/callback/x"
        ));
        assert!(!redirect_matches(
            registered,
            "http://127.0.0.1:51234/callback?x=1"
        ));
        assert!(!redirect_matches(registered, "http://127.0.0.1:x/callback"));
        assert!(!redirect_matches(registered, "http://[::1]:9/callback"));
        assert!(redirect_matches("http://[::1]:1/cb", "http://[::1]:2/cb"));
        assert!(!redirect_matches(
            "http://localhost:1/cb",
            "http://localhost:2/cb"
        ));
        assert!(!redirect_matches(
            "https://app.example/cb",
            "https://app.example:8443/cb"
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1.evil/cb",
            "http://127.0.0.1.evil:2/cb"
        ));
    }
}
