//! Dynamic client registration (RFC 7591), so that a host never configured here (an MCP client
//! among them) can sign in: it registers as a public client, proving possession with PKCE, and
//! gets a client id. Of its metadata the server keeps what it uses, the redirect URIs and the
//! name; the answer says what was registered.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::OAuthError;
use super::grant::DEVICE_CODE_GRANT;
use crate::clock::now;
use crate::json::Json;
use crate::state::AppState;
use crate::store::RegisteredClient;

/// The most redirect URIs one client registers.
const MAX_REDIRECT_URIS: usize = 10;
/// The longest redirect URI, in bytes.
const MAX_URI_LEN: usize = 2000;
/// The longest client name, in characters.
const MAX_NAME_CHARS: usize = 200;

/// The grant types a registered client may use.
const GRANT_TYPES: [&str; 3] = ["authorization_code", "refresh_token", DEVICE_CODE_GRANT];

/// The client metadata this server reads (RFC 7591, 2); other members are ignored.
#[derive(Debug, Deserialize)]
pub(super) struct Metadata {
    #[serde(default)]
    pub(super) redirect_uris: Vec<String>,
    grant_types: Option<Vec<String>>,
    response_types: Option<Vec<String>>,
    token_endpoint_auth_method: Option<String>,
    pub(super) client_name: Option<String>,
}

pub async fn register(State(state): State<AppState>, body: Bytes) -> Result<Response, OAuthError> {
    if !state.config().client_registration {
        return Err(OAuthError {
            status: StatusCode::FORBIDDEN,
            error: "access_denied",
            description: "this server registers no clients; ask its operator for a client id"
                .into(),
        });
    }
    let metadata: Metadata = serde_json::from_slice(&body)
        .map_err(|error| metadata_error(format!("the body is not client metadata: {error}")))?;
    let grant_types = checked(&metadata)?;
    let client = RegisteredClient {
        client_id: crate::random::id("cl"),
        client_name: metadata.client_name.filter(|name| !name.is_empty()),
        redirect_uris: metadata.redirect_uris,
        registered_at: now(),
    };
    state.store().register_client(&client).await?;
    let mut answer = json!({
        "client_id": client.client_id,
        "client_id_issued_at": client.registered_at,
        "redirect_uris": client.redirect_uris,
        "grant_types": grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if let Some(name) = client.client_name {
        answer["client_name"] = name.into();
    }
    Ok((
        StatusCode::CREATED,
        [(header::CACHE_CONTROL, "no-store")],
        Json(answer),
    )
        .into_response())
}

/// The metadata's grant types (`authorization_code` and `refresh_token` when it names none),
/// once every member this server reads holds.
pub(super) fn checked(metadata: &Metadata) -> Result<Vec<String>, OAuthError> {
    if let Some(method) = metadata
        .token_endpoint_auth_method
        .as_deref()
        .filter(|m| *m != "none")
    {
        return Err(metadata_error(format!(
            "token_endpoint_auth_method {method} is not supported: clients here are public \
             (none) and prove possession with PKCE"
        )));
    }
    let grant_types = metadata
        .grant_types
        .clone()
        .unwrap_or_else(|| GRANT_TYPES[..2].iter().map(|g| g.to_string()).collect());
    if let Some(other) = grant_types
        .iter()
        .find(|g| !GRANT_TYPES.contains(&g.as_str()))
    {
        return Err(metadata_error(format!(
            "grant type {other} is not supported; use {}",
            GRANT_TYPES.join(", ")
        )));
    }
    if let Some(other) = metadata
        .response_types
        .iter()
        .flatten()
        .find(|r| *r != "code")
    {
        return Err(metadata_error(format!(
            "response type {other} is not supported; use code"
        )));
    }
    if let Some(name) = &metadata.client_name
        && (name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control))
    {
        return Err(metadata_error(format!(
            "client_name must be at most {MAX_NAME_CHARS} characters, none of them a control"
        )));
    }
    let uris = &metadata.redirect_uris;
    if uris.is_empty() && grant_types.iter().any(|g| g == "authorization_code") {
        return Err(redirect_error(
            "redirect_uris is required for the authorization_code grant".into(),
        ));
    }
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(redirect_error(format!(
            "at most {MAX_REDIRECT_URIS} redirect URIs may be registered"
        )));
    }
    if let Some((uri, why)) = uris
        .iter()
        .find_map(|uri| redirect_refusal(uri).map(|why| (uri, why)))
    {
        return Err(redirect_error(format!("redirect URI {uri:?} {why}")));
    }
    Ok(grant_types)
}

/// Why `uri` cannot be a redirect URI, if it cannot: it must be an absolute URI without a
/// fragment, and `https`, `http` on a loopback host (RFC 8252, 7.3), or a private-use scheme
/// named as a reversed domain (RFC 8252, 7.1).
fn redirect_refusal(uri: &str) -> Option<&'static str> {
    if uri.len() > MAX_URI_LEN {
        return Some("is too long");
    }
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("holds whitespace");
    }
    let Ok(parsed) = url::Url::parse(uri) else {
        return Some("is not an absolute URI");
    };
    if parsed.fragment().is_some() {
        return Some("has a fragment");
    }
    let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "[::1]" | "localhost"));
    match parsed.scheme() {
        "https" if parsed.host_str().is_some() => None,
        "http" if loopback => None,
        scheme if scheme.contains('.') => None,
        _ => Some(
            "must be https, http on a loopback host, or a private-use scheme named as a \
             reversed domain",
        ),
    }
}

/// 400 `invalid_client_metadata`.
fn metadata_error(description: String) -> OAuthError {
    OAuthError::new("invalid_client_metadata", description)
}

/// 400 `invalid_redirect_uri`.
fn redirect_error(description: String) -> OAuthError {
    OAuthError::new("invalid_redirect_uri", description)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_loopback_http_or_a_reversed_domain_scheme() {
        for good in [
            "https://host.example/callback",
            "http://127.0.0.1:33418/callback",
            "http://[::1]/cb",
            "http://localhost:8080/cb",
            "com.example.app:/oauth",
        ] {
            assert_eq!(redirect_refusal(good), None, "{good}");
        }
        for bad in [
            "http://host.example/callback",
            "https://host.example/cb#part",
            "javascript:alert(1)",
            "/relative",
            "https://host.example/a b",
        ] {
            assert!(redirect_refusal(bad).is_some(), "{bad}");
        }
        assert!(redirect_refusal(&format!("https://h.example/{}", "a".repeat(2000))).is_some());
    }
}
