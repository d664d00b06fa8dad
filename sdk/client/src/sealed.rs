//! Builds held by the client: a [`SealedBuild`] keeps the exact JSON the deployment sent beside
//! its typed view. Its digest (RFC 8785 canonical JSON, SHA-256) and attestation (a JWS by the
//! server's key, checked against the server's published keys, [`Jwks`]) are checked offline over
//! that JSON with [`SealedBuild::verify_with`], and it is committed as that JSON, refused locally
//! once `expiresAt` has passed: a re-encoding of the typed view could drop members a deployment
//! added and change the digest.

use std::ops::Deref;

use intent_models::{PipelineAction, PipelineBuild, PipelineChain};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Why a Build failed a local check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Not a JSON object with the envelope's members.
    #[error("not a Build envelope: {0}")]
    Malformed(String),
    /// The content does not hash to `digest`.
    #[error("the digest does not match the content")]
    DigestMismatch,
    /// The attestation is not a valid signature by a key of the JWKS.
    #[error("the attestation does not verify: {0}")]
    Attestation(String),
    /// The attestation names another digest, app or expiry.
    #[error("the attestation is for another Build")]
    AttestationMismatch,
    /// `expiresAt` has passed.
    #[error("the Build expired at {0}")]
    Expired(i64),
}

/// What an attestation asserts, in the reference profile.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Attestation {
    /// The Build's digest.
    pub digest: String,
    /// The account the Build was made for.
    pub owner: String,
    /// The app scope, `origin.app`.
    pub app: String,
    /// `expiresAt`.
    pub exp: i64,
}

/// A Build as a deployment sealed it: the JSON object received, which is what is verified,
/// stored and committed, and its typed view ([`PipelineBuild`], reached through `Deref`).
///
/// It serializes as that JSON, so a stored Build reads back as the same Build.
#[derive(Debug, Clone, PartialEq)]
pub struct SealedBuild {
    json: Map<String, Value>,
    build: PipelineBuild,
}

impl SealedBuild {
    /// Reads a Build from the JSON a deployment sent; [`BuildError::Malformed`] when it is not an
    /// object with the envelope's members.
    pub fn from_json(json: Value) -> Result<Self, BuildError> {
        let build =
            PipelineBuild::deserialize(&json).map_err(|e| BuildError::Malformed(e.to_string()))?;
        // A struct also reads from an array of its members in order.
        let Value::Object(json) = json else {
            return Err(BuildError::Malformed("not an object".to_owned()));
        };
        Ok(Self { json, build })
    }

    /// The JSON object as received.
    pub fn json(&self) -> &Map<String, Value> {
        &self.json
    }

    /// The JSON object as received.
    pub fn into_json(self) -> Map<String, Value> {
        self.json
    }

    /// The chain of the Build's first action, whose lifecycle endpoint commits it.
    pub fn chain(&self) -> Option<PipelineChain> {
        self.build.actions.first().map(|action| match action {
            PipelineAction::Evm { .. } => PipelineChain::Evm,
            PipelineAction::Svm { .. } => PipelineChain::Svm,
        })
    }

    /// The chain whose lifecycle endpoint commits it, when it may be committed at `now` (Unix
    /// seconds): its digest matches its content, it has not expired, and it has an action.
    pub fn committable(&self, now: i64) -> Result<PipelineChain, BuildError> {
        self.verify_digest()?;
        if now > self.expires_at {
            return Err(BuildError::Expired(self.expires_at));
        }
        self.chain()
            .ok_or_else(|| BuildError::Malformed("no actions".to_owned()))
    }

    /// The digest of the content as received (see [`intent_models::digest::build_digest`]).
    pub fn content_digest(&self) -> String {
        intent_models::digest::build_digest(&self.json)
    }

    /// Checks that `digest` matches the content.
    pub fn verify_digest(&self) -> Result<(), BuildError> {
        if *self.build.digest != self.content_digest() {
            return Err(BuildError::DigestMismatch);
        }
        Ok(())
    }

    /// The id of the key its attestation names (the JWS header's `kid`), if any.
    pub fn key_id(&self) -> Option<String> {
        jsonwebtoken::decode_header(&self.build.attestation)
            .ok()?
            .kid
    }

    /// Checks the digest, then the attestation against `jwks`, with no network I/O; returns what
    /// the attestation asserts.
    pub fn verify_with(&self, jwks: &Jwks) -> Result<Attestation, BuildError> {
        self.verify_digest()?;
        let token = &self.build.attestation;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| BuildError::Attestation(e.to_string()))?;
        let jwk = match &header.kid {
            Some(kid) => jwks.0.find(kid),
            None => jwks.0.keys.first(),
        }
        .ok_or_else(|| BuildError::Attestation("no key of the JWKS matches".to_owned()))?;
        let key = DecodingKey::from_jwk(jwk).map_err(|e| BuildError::Attestation(e.to_string()))?;
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.validate_exp = false;
        validation.required_spec_claims.clear();
        let claims: Attestation = jsonwebtoken::decode(token, &key, &validation)
            .map_err(|e| BuildError::Attestation(e.to_string()))?
            .claims;
        let same = claims.digest == *self.build.digest
            && claims.app == *self.build.origin.app
            && claims.exp == self.build.expires_at;
        if !same {
            return Err(BuildError::AttestationMismatch);
        }
        Ok(claims)
    }
}

/// A deployment's published keys (its `/.well-known/jwks.json`), which attestations are checked
/// against offline. [`Pipeline::jwks`](crate::pipeline::Pipeline::jwks) fetches and keeps them;
/// they serialize as the JWKS, so they can be stored and read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Jwks(JwkSet);

impl Jwks {
    /// Whether a key is named `kid`.
    pub fn has_key(&self, kid: &str) -> bool {
        self.0.find(kid).is_some()
    }

    /// The ids of the keys.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.0
            .keys
            .iter()
            .filter_map(|key| key.common.key_id.as_deref())
    }
}

impl Deref for SealedBuild {
    type Target = PipelineBuild;

    fn deref(&self) -> &PipelineBuild {
        &self.build
    }
}

impl Serialize for SealedBuild {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SealedBuild {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::from_json(Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}
