//! The portable Build envelope (part 2.1): its digest (`sha256:` and the hex SHA-256 of the RFC
//! 8785 canonical JSON of the envelope without `digest` and `attestation`) and its attestation
//! (a compact JWS by the server's key over the digest, the owner, the app and the expiry), so
//! that anyone holding the JWKS can verify a Build offline.

use intent_models::digest::build_digest;
use intent_models::error::ConversionError;
use intent_models::{
    Open, PipelineAction, PipelineBuild, PipelineBuildStatus, PipelineOrigin, PipelineSimulation,
    PipelineSummary,
};
use jsonwebtoken::{Algorithm, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Error, Result};
use crate::keys::signing::SigningKeys;

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

/// A Build's content: everything but `digest` and `attestation`.
pub struct Content {
    /// `staged` or `simulated`.
    pub status: PipelineBuildStatus,
    /// The chain actions.
    pub actions: Vec<PipelineAction>,
    /// What assembled the actions.
    pub origin: PipelineOrigin,
    /// The simulation, when one ran.
    pub simulation: Option<PipelineSimulation>,
    /// What the Build does, for people.
    pub summary: PipelineSummary,
    /// Unix seconds after which commit is refused.
    pub expires_at: i64,
}

/// Seals `content` for `owner`: the digest of the content and an attestation over it.
pub fn seal(
    key: &SigningKeys,
    content: Content,
    owner: &str,
) -> Result<PipelineBuild, ConversionError> {
    let mut build: PipelineBuild = PipelineBuild::builder()
        .actions(content.actions)
        .attestation(String::new())
        .digest(UNSEALED)
        .expires_at(content.expires_at)
        .origin(content.origin)
        .simulation(content.simulation)
        .status(content.status)
        .summary(Open::Profile(content.summary))
        .version(VERSION)
        .try_into()?;
    let Value::Object(mut fields) = serde_json::to_value(&build).expect("a Build serializes")
    else {
        unreachable!("a Build is a JSON object")
    };
    fields.remove("digest");
    fields.remove("attestation");
    let digest = build_digest(&fields);
    let attestation = Attestation {
        digest: digest.clone(),
        owner: owner.to_owned(),
        app: build.origin.app.to_string(),
        exp: build.expires_at,
    };
    build.digest = digest.parse().expect("build_digest gives a digest");
    build.attestation = key.sign(ATTESTATION_TYP, &attestation);
    Ok(build)
}

/// The envelope version of every Build.
const VERSION: i64 = 2;

/// The digest a Build carries until it is sealed.
const UNSEALED: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// Checks a Build presented by `caller` at `now`, in this order: shape, digest, attestation,
/// owner, app scope, expiry. Returns the typed Build.
pub fn verify(
    key: &SigningKeys,
    build: &Map<String, Value>,
    caller: &str,
    now: i64,
) -> Result<PipelineBuild> {
    let invalid = |message: &str| Error::BuildInvalid(message.to_owned());
    let typed: PipelineBuild = serde_json::from_value(Value::Object(build.clone()))
        .map_err(|e| invalid(&format!("not a Build envelope: {e}")))?;
    if build_digest(build) != *typed.digest {
        return Err(invalid("the digest does not match the Build's content"));
    }
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.validate_exp = false;
    validation.required_spec_claims.clear();
    let (attested, _) = key
        .verify::<Attestation>(&typed.attestation, &validation, now)
        .map_err(|_| invalid("the attestation is not this server's signature"))?;
    let claims = attested.claims;
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
        return Err(Error::BuildExpired(typed.expires_at));
    }
    Ok(typed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_envelope_version_is_the_one_stored_formats_json_names() {
        // Builds are kept in actions' events: a new version needs a new upgrade fixture
        // (`cargo xtask fixture`), which records it.
        let formats: serde_json::Value =
            serde_json::from_str(include_str!("../../stored-formats.json")).unwrap();
        assert_eq!(formats["buildEnvelope"], super::VERSION);
    }
}
