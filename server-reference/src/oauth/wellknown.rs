//! Public metadata: the JWKS, the authorization-server metadata (RFC 8414), and the
//! protected-resource metadata (RFC 9728) of the five resources.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};

use crate::auth::resource::Resource;
use crate::json::Json;
use crate::oauth;
use crate::state::AppState;

/// Where the JWKS is served.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// Where the authorization-server metadata is (RFC 8414).
pub const AUTHORIZATION_SERVER_PATH: &str = "/.well-known/oauth-authorization-server";

/// Routes of the metadata documents.
pub fn router() -> Router<AppState> {
    let router = Router::new()
        .route(JWKS_PATH, get(jwks))
        .route(AUTHORIZATION_SERVER_PATH, get(authorization_server));
    Resource::ALL.into_iter().fold(router, |router, resource| {
        router.route(
            &resource.metadata_path(),
            get(move |state: State<AppState>| resource_metadata(state, resource)),
        )
    })
}

async fn jwks(State(state): State<AppState>) -> Json<Value> {
    Json(serde_json::to_value(state.signing_key().jwks(crate::now())).expect("a JWKS serializes"))
}

async fn authorization_server(State(state): State<AppState>) -> Json<Value> {
    let issuer = state.issuer();
    let scopes: Vec<&str> = Resource::ALL
        .iter()
        .flat_map(|r| r.scopes().iter().copied())
        .collect();
    let mut metadata = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}{}", oauth::AUTHORIZE_PATH),
        "token_endpoint": format!("{issuer}{}", oauth::TOKEN_PATH),
        "device_authorization_endpoint": format!("{issuer}{}", oauth::DEVICE_CODE_PATH),
        "jwks_uri": format!("{issuer}{JWKS_PATH}"),
        "scopes_supported": scopes,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": true,
    });
    if state.config().client_metadata_documents {
        metadata["client_id_metadata_document_supported"] = true.into();
    }
    if state.config().client_registration {
        metadata["registration_endpoint"] = format!("{issuer}{}", oauth::REGISTER_PATH).into();
    }
    Json(metadata)
}

async fn resource_metadata(State(state): State<AppState>, resource: Resource) -> Json<Value> {
    Json(json!({
        "resource": resource.identifier(state.issuer()),
        "authorization_servers": [state.issuer()],
        "scopes_supported": resource.grantable(),
        "bearer_methods_supported": ["header"],
    }))
}
