//! Builds held by the client: check a Build's digest (RFC 8785 canonical JSON, SHA-256) and its
//! attestation (a JWS by the server's key, checked against the server's JWKS) offline, and commit
//! it as the exact JSON received, refusing locally once `expiresAt` has passed.
//!
//! A Build is handled as `serde_json::Value` here on purpose: a re-encoding through typed models
//! could drop members and change the digest.

use intent_models::PipelineChain;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;

use crate::{Client, ClientInfo, Error};

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

/// The digest of `build` (see [`intent_models::digest::build_digest`]).
pub fn digest(build: &Value) -> Result<String, BuildError> {
    let object = build
        .as_object()
        .ok_or_else(|| BuildError::Malformed("not an object".to_owned()))?;
    Ok(intent_models::digest::build_digest(object))
}

fn member<'a>(build: &'a Value, name: &str) -> Result<&'a Value, BuildError> {
    build
        .get(name)
        .ok_or_else(|| BuildError::Malformed(format!("no `{name}`")))
}

/// Checks that `build`'s `digest` matches its content.
pub fn verify_digest(build: &Value) -> Result<(), BuildError> {
    if member(build, "digest")?.as_str() != Some(digest(build)?.as_str()) {
        return Err(BuildError::DigestMismatch);
    }
    Ok(())
}

/// Checks the digest, then the attestation against `jwks` (fetched from the server's
/// `/.well-known/jwks.json`); returns what the attestation asserts.
pub fn verify(build: &Value, jwks: &JwkSet) -> Result<Attestation, BuildError> {
    verify_digest(build)?;
    let token = member(build, "attestation")?
        .as_str()
        .ok_or_else(|| BuildError::Malformed("`attestation` is not a string".to_owned()))?;
    let header =
        jsonwebtoken::decode_header(token).map_err(|e| BuildError::Attestation(e.to_string()))?;
    let jwk = match &header.kid {
        Some(kid) => jwks.find(kid),
        None => jwks.keys.first(),
    }
    .ok_or_else(|| BuildError::Attestation("no key of the JWKS matches".to_owned()))?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| BuildError::Attestation(e.to_string()))?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.validate_exp = false;
    validation.required_spec_claims.clear();
    let claims: Attestation = jsonwebtoken::decode(token, &key, &validation)
        .map_err(|e| BuildError::Attestation(e.to_string()))?
        .claims;
    let same = Some(claims.digest.as_str()) == member(build, "digest")?.as_str()
        && Some(claims.app.as_str()) == build["origin"]["app"].as_str()
        && Some(claims.exp) == member(build, "expiresAt")?.as_i64();
    if !same {
        return Err(BuildError::AttestationMismatch);
    }
    Ok(claims)
}

/// Sends a build request or stage input (JSON, as in openapi.json) to the lifecycle endpoint of
/// `chain`; returns the sealed Build as the exact JSON received.
pub async fn request(client: &Client, chain: PipelineChain, body: &Value) -> Result<Value, Error> {
    lifecycle(client, chain, body).await
}

/// Commits `build` as the exact JSON given, unless its digest does not match or `expiresAt` is
/// before `now` (Unix seconds); returns the commit result as JSON.
pub async fn commit(client: &Client, build: &Value, now: i64) -> Result<Value, Error> {
    verify_digest(build)?;
    let expires_at = build["expiresAt"].as_i64().unwrap_or(i64::MIN);
    if now > expires_at {
        return Err(BuildError::Expired(expires_at).into());
    }
    let chain = match build["actions"][0]["chain"].as_str() {
        Some("svm") => PipelineChain::Svm,
        _ => PipelineChain::Evm,
    };
    lifecycle(client, chain, build).await
}

/// The deployment's published keys (`/.well-known/jwks.json`), to [`verify`] Builds with.
pub async fn jwks(client: &Client) -> Result<JwkSet, Error> {
    let url = format!("{}/.well-known/jwks.json", client.baseurl());
    let response = client
        .client()
        .get(url)
        .send()
        .await
        .map_err(Error::Transport)?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(Error::from_response(
            status,
            response.headers(),
            Value::Null,
        ));
    }
    response.json().await.map_err(Error::Transport)
}

/// `POST`s `body` as it is to the lifecycle endpoint of `chain`.
async fn lifecycle(client: &Client, chain: PipelineChain, body: &Value) -> Result<Value, Error> {
    let path = match chain {
        PipelineChain::Evm => "evm/build",
        PipelineChain::Svm => "svm/stage",
    };
    let request = client
        .client()
        .post(format!("{}/v1/pipeline/{path}", client.baseurl()))
        .json(body)
        .build()
        .map_err(Error::Transport)?;
    let response = crate::hooks::send(client, request).await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body: Value = response.json().await.map_err(Error::Transport)?;
    if status >= 400 {
        return Err(Error::from_response(
            status,
            &headers,
            body.get("error").cloned().unwrap_or(body),
        ));
    }
    Ok(body)
}
