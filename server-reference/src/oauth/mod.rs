//! The OAuth 2.1 authorization server (part 5): authorization code with PKCE (S256 only), the
//! device authorization grant (RFC 8628), refresh tokens that rotate on use, tokens bound to
//! exactly one resource (RFC 8707), and public clients that register themselves (RFC 7591) or
//! are described by a metadata document at their `https` client id ([`document`]). Its errors
//! are OAuth's (`{"error", "error_description"}`), not the API envelope.
//!
//! There is no real login: the consent and verification pages ask which account to act as, and
//! that account becomes the token's subject. This is a development server's stand-in for a login.

mod authorize;
mod device;
mod document;
mod grant;
mod html;
mod register;
pub(crate) mod wellknown;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::auth::resource::Resource;
use crate::json::Json;
use crate::state::AppState;

/// Where the authorization endpoint is.
pub const AUTHORIZE_PATH: &str = "/api/auth/oauth2/authorize";
/// Where the token endpoint is.
pub const TOKEN_PATH: &str = "/api/auth/oauth2/token";
/// Where device authorization starts.
pub const DEVICE_CODE_PATH: &str = "/api/auth/device/code";
/// Where a user approves or denies a device code.
pub const DEVICE_VERIFY_PATH: &str = "/api/auth/device";
/// Where a client registers itself (RFC 7591).
pub const REGISTER_PATH: &str = "/api/auth/oauth2/register";

/// Routes of the authorization server.
pub fn router() -> axum::Router<AppState> {
    axum::Router::new()
        .route(AUTHORIZE_PATH, get(authorize::show).post(authorize::decide))
        .route(TOKEN_PATH, post(grant::token))
        .route(DEVICE_CODE_PATH, post(device::start))
        .route(DEVICE_VERIFY_PATH, get(device::show).post(device::decide))
        .route(REGISTER_PATH, post(register::register))
}

/// A client the authorization server knows.
struct Client {
    id: String,
    redirect_uris: Vec<String>,
    source: Source,
}

/// Where the authorization server learnt of a client.
enum Source {
    /// The operator configured it.
    Configured,
    /// It registered itself, under the name it gave (empty when none).
    Registered(String),
    /// The metadata document at its id, served by `host`, describes it under the name it gives
    /// (empty when none).
    Document { name: String, host: String },
}

impl Client {
    /// How the consent page names the client: one that described itself by the name it
    /// claims, said to be its own claim, and one with a document by the host serving it.
    fn label(&self) -> String {
        match &self.source {
            Source::Configured => self.id.clone(),
            Source::Registered(name) if name.is_empty() => {
                format!("{} (registered by itself)", self.id)
            }
            Source::Registered(name) => format!("{name} ({}, registered by itself)", self.id),
            Source::Document { name, host } => {
                let name = if name.is_empty() { host } else { name };
                format!("{name} (described by {host} at {})", self.id)
            }
        }
    }
}

/// The client `id`: configured, registered or described by its metadata document; `None`
/// when none of them. A document that describes no client is `invalid_client`, saying why.
async fn client(state: &AppState, id: &str) -> Result<Option<Client>, OAuthError> {
    if let Some(configured) = state.oauth_client(id) {
        return Ok(Some(Client {
            id: configured.id.clone(),
            redirect_uris: configured.redirect_uris.clone(),
            source: Source::Configured,
        }));
    }
    if let Some(fetcher) = state.client_metadata_fetcher()
        && document::names_a_document(id)
    {
        let described = document::describe(fetcher, id)
            .await
            .map_err(|why| OAuthError {
                status: StatusCode::UNAUTHORIZED,
                error: "invalid_client",
                description: format!("the client metadata document at {id} {why}"),
            })?;
        return Ok(Some(Client {
            id: id.to_owned(),
            redirect_uris: described.redirect_uris,
            source: Source::Document {
                name: described.client_name,
                host: described.host,
            },
        }));
    }
    let registered = state.store().registered_client(id).await?;
    Ok(registered.map(|client| Client {
        source: Source::Registered(client.client_name.unwrap_or_default()),
        id: client.client_id,
        redirect_uris: client.redirect_uris,
    }))
}

/// An OAuth error response (RFC 6749, 5.2).
#[derive(Debug)]
pub struct OAuthError {
    status: StatusCode,
    error: &'static str,
    description: String,
}

impl OAuthError {
    /// A 400 with `error` and a description for people.
    fn new(error: &'static str, description: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            error,
            description: description.into(),
        }
    }

    /// 401 `invalid_client`.
    fn invalid_client(client_id: &str) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            error: "invalid_client",
            description: format!("unknown client {client_id:?}"),
        }
    }
}

impl From<axum::extract::rejection::FormRejection> for OAuthError {
    fn from(rejection: axum::extract::rejection::FormRejection) -> Self {
        Self::new("invalid_request", rejection.body_text())
    }
}

impl From<crate::store::Error> for OAuthError {
    fn from(error: crate::store::Error) -> Self {
        tracing::error!(error = &error as &dyn std::error::Error, "store failed");
        if error.unavailable() {
            // RFC 6749's code for a server that cannot answer for now.
            Self {
                status: StatusCode::SERVICE_UNAVAILABLE,
                error: "temporarily_unavailable",
                description: "the database is unavailable; retry later".into(),
            }
        } else {
            Self {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                error: "server_error",
                description: "internal error".into(),
            }
        }
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.error, "error_description": self.description });
        let mut response = (
            self.status,
            [(header::CACHE_CONTROL, "no-store")],
            Json(body),
        )
            .into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                crate::error::UNAVAILABLE_RETRY_AFTER.into(),
            );
        }
        response
    }
}

/// The resource and scopes a request asks for, checked: the resource must be one of the five
/// identifiers of this issuer (`invalid_target`), and every scope must belong to it
/// (`invalid_scope`). No scope asks for all of the resource's scopes.
fn requested(
    state: &AppState,
    resource: Option<&str>,
    scope: Option<&str>,
) -> Result<(String, String), OAuthError> {
    let resource = resource.filter(|r| !r.is_empty()).ok_or_else(|| {
        OAuthError::new(
            "invalid_target",
            "a resource parameter naming one resource identifier is required",
        )
    })?;
    let target = Resource::ALL
        .into_iter()
        .find(|r| r.identifier(state.issuer()) == resource)
        .ok_or_else(|| {
            OAuthError::new(
                "invalid_target",
                format!("{resource} is not a resource of this server"),
            )
        })?;
    let scopes: Vec<&str> = scope.unwrap_or_default().split_whitespace().collect();
    if let Some(foreign) = scopes.iter().find(|s| !target.grantable().contains(s)) {
        return Err(OAuthError::new(
            "invalid_scope",
            format!("scope {foreign} is not a scope of {resource}"),
        ));
    }
    let scopes = if scopes.is_empty() {
        target.scopes().to_vec()
    } else {
        scopes
    };
    Ok((resource.to_owned(), scopes.join(" ")))
}

/// The hex SHA-256 of a secret: codes and tokens are stored this way, never in clear.
fn hash(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An account name a page may act as: 1 to 128 of `A-Z a-z 0-9 _ . @ -`.
fn valid_account(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'@' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_are_short_plain_names() {
        assert!(valid_account("alice") && valid_account("dev.user@example-1"));
        assert!(!valid_account("") && !valid_account("a b") && !valid_account(&"a".repeat(129)));
    }

    #[test]
    fn secrets_hash_to_64_hex_digits() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
