//! Public metadata: the JWKS and the protected-resource metadata (RFC 9728) of the five
//! resources.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::AppState;
use crate::resource::Resource;

/// Where the JWKS is served.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// Prefix of the protected-resource metadata; the resource's path follows it (RFC 9728, 3.1).
pub const RESOURCE_METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// Routes of the metadata documents.
pub fn router() -> Router<AppState> {
    let router = Router::new().route(JWKS_PATH, get(jwks));
    Resource::ALL.into_iter().fold(router, |router, resource| {
        let path = format!("{RESOURCE_METADATA_PREFIX}{}", resource.path());
        router.route(
            &path,
            get(move |state: State<AppState>| resource_metadata(state, resource)),
        )
    })
}

async fn jwks(State(state): State<AppState>) -> Json<Value> {
    Json(serde_json::to_value(state.signing_key().jwks()).expect("a JWKS serializes"))
}

async fn resource_metadata(State(state): State<AppState>, resource: Resource) -> Json<Value> {
    Json(json!({
        "resource": resource.identifier(state.issuer()),
        "authorization_servers": [state.issuer()],
        "jwks_uri": format!("{}{JWKS_PATH}", state.issuer()),
        "scopes_supported": resource.scopes(),
        "bearer_methods_supported": ["header"],
        "resource_signing_alg_values_supported": ["EdDSA"],
    }))
}
