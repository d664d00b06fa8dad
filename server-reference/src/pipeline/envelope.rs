//! The portable Build envelope (part 2.1): its digest (`sha256:` and the hex SHA-256 of the RFC
//! 8785 canonical JSON of the envelope without `digest` and `attestation`) and its attestation
//! (a compact JWS by the server's key over the digest, the owner, the app and the expiry), so
//! that anyone holding the JWKS can verify a Build offline.

use intent_models::digest::build_digest;
use intent_models::{ErrorCode, PipelineBuild};
use jsonwebtoken::{Algorithm, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::keys::SigningKey;

/// JWS `typ` of an attestation.
pub const ATTESTATION_TYP: &str = "build+jws";

/// What an attestation asserts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attestation {
    /// The Build's digest.
    pub digest: String,
    /// The account the Build was made for.
    pub owner: String,
    /// The app scope: `origin.app`.
    pub app: String,
    /// `expiresAt`.
    pub exp: i64,
}

/// Completes `build` (everything but `digest` and `attestation`) for `owner`.
pub fn seal(key: &SigningKey, mut build: Map<String, Value>, owner: &str) -> Value {
    let digest = build_digest(&build);
    let attestation = Attestation {
        digest: digest.clone(),
        owner: owner.to_owned(),
        app: build["origin"]["app"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        exp: build["expiresAt"].as_i64().unwrap_or_default(),
    };
    build.insert("digest".to_owned(), Value::from(digest));
    build.insert(
        "attestation".to_owned(),
        Value::from(key.sign(ATTESTATION_TYP, &attestation)),
    );
    Value::Object(build)
}

/// Checks a Build presented by `caller` at `now`, in this order: shape, digest, attestation,
/// owner, app scope, expiry. Returns the typed Build.
pub fn verify(
    key: &SigningKey,
    build: &Value,
    caller: &str,
    now: i64,
) -> Result<PipelineBuild, ApiError> {
    let invalid = |message: &str| ApiError::new(ErrorCode::BuildInvalid, message);
    let typed: PipelineBuild = serde_json::from_value(build.clone())
        .map_err(|e| invalid(&format!("not a Build envelope: {e}")))?;
    let object = build.as_object().expect("a typed Build is an object");
    if build_digest(object) != *typed.digest {
        return Err(invalid("the digest does not match the Build's content"));
    }
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.validate_exp = false;
    validation.required_spec_claims.clear();
    let claims: Attestation = key
        .verify(&typed.attestation, &validation)
        .map_err(|_| invalid("the attestation is not this server's signature"))?
        .claims;
    if claims.digest != *typed.digest {
        return Err(invalid("the attestation is for another Build"));
    }
    if claims.owner != caller {
        return Err(invalid("the Build was made for another account"));
    }
    if claims.app != *typed.origin.app || claims.exp != typed.expires_at {
        return Err(invalid(
            "the Build's app scope or expiry differs from its attestation",
        ));
    }
    if now > typed.expires_at {
        return Err(ApiError::new(
            ErrorCode::BuildExpired,
            format!("the Build expired at {}", typed.expires_at),
        ));
    }
    Ok(typed)
}
