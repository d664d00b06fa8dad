//! Access tokens: RFC 9068 JWTs signed with the server's key and bound to one resource.

use std::time::Duration;

use jsonwebtoken::{Algorithm, Validation};
use serde::{Deserialize, Serialize};

use crate::auth::resource::Resource;
use crate::clock::seconds;
use crate::keys::signing::SigningKeys;

/// The `typ` header of an access token (RFC 9068).
pub const ACCESS_TOKEN_TYPE: &str = "at+jwt";

/// The claims of an access token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AccessClaims {
    /// The issuer: the server's base address.
    pub iss: String,
    /// The account.
    pub sub: String,
    /// The one resource identifier the token is for.
    pub aud: String,
    /// Granted scopes, space-separated.
    pub scope: String,
    /// The OAuth client the token was issued to.
    pub client_id: String,
    /// Expiry, Unix seconds.
    pub exp: i64,
    /// Issue time, Unix seconds.
    pub iat: i64,
    /// Unique token id.
    pub jti: String,
}

/// What an access token is minted for.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The account.
    pub account: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// The resource identifier.
    pub resource: String,
    /// The OAuth client.
    pub client_id: String,
    /// Lifetime.
    pub ttl: Duration,
}

/// Why a bearer token was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT, a bad signature, or a header that is not an access token's.
    #[error("the token is malformed or its signature does not verify")]
    Invalid,
    /// Past `exp`.
    #[error("the token has expired")]
    Expired,
    /// Issued for another resource or by another issuer.
    #[error("the token is not for this resource")]
    WrongAudience,
}

/// Why an access token could not be minted from a data dir.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// The resource is not one of the five identifiers (RFC 8707 `invalid_target`).
    #[error("invalid_target: {resource} is not one of the five resource identifiers")]
    InvalidTarget {
        /// The resource asked for.
        resource: String,
    },
    /// A scope that part 5 does not list.
    #[error("unknown scope {scope}")]
    UnknownScope {
        /// The scope asked for.
        scope: String,
    },
    /// The data dir's key could not be read or created.
    #[error("reading the signing key in {path}")]
    Key {
        /// The data dir.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Mints an access token with the key of `data_dir`, as the server of that data dir would.
/// The issuer is what precedes the resource path in `grant.resource`.
pub fn mint_with_data_dir(
    data_dir: &std::path::Path,
    grant: &Grant,
    now: i64,
) -> Result<String, MintError> {
    let (issuer, _) =
        Resource::parse_identifier(&grant.resource).ok_or_else(|| MintError::InvalidTarget {
            resource: grant.resource.clone(),
        })?;
    if let Some(scope) = grant.scopes.iter().find(|s| {
        !Resource::ALL
            .iter()
            .any(|r| r.scopes().contains(&s.as_str()))
    }) {
        return Err(MintError::UnknownScope {
            scope: scope.clone(),
        });
    }
    let key_error = |source| MintError::Key {
        path: data_dir.to_owned(),
        source,
    };
    crate::store::data_dir::prepare(data_dir, None).map_err(key_error)?;
    let key = SigningKeys::load_or_create(data_dir, Duration::ZERO).map_err(key_error)?;
    Ok(mint(&key, issuer, grant, now))
}

/// Mints an access token of `issuer` for `grant`, issued at `now` (Unix seconds).
pub fn mint(key: &SigningKeys, issuer: &str, grant: &Grant, now: i64) -> String {
    let claims = AccessClaims {
        iss: issuer.to_owned(),
        sub: grant.account.clone(),
        aud: grant.resource.clone(),
        scope: grant.scopes.join(" "),
        client_id: grant.client_id.clone(),
        exp: now + seconds(grant.ttl),
        iat: now,
        jti: crate::random::id("at"),
    };
    key.sign(ACCESS_TOKEN_TYPE, &claims)
}

/// Verifies `token` at `now`: signature by a key still honoured, `typ`, expiry, issuer, and an
/// audience equal to `resource`. Returns its claims and when its key stops verifying.
pub fn verify(
    key: &SigningKeys,
    token: &str,
    issuer: &str,
    resource: &str,
    now: i64,
) -> Result<(AccessClaims, i64), TokenError> {
    let mut validation = Validation::new(Algorithm::EdDSA);
    // jsonwebtoken would compare `exp` with the system's clock; it is compared with `now` below.
    validation.validate_exp = false;
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.set_issuer(&[issuer]);
    validation.set_audience(&[resource]);
    let (data, key_until) = key
        .verify::<AccessClaims>(token, &validation, now)
        .map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            match e.kind() {
                ErrorKind::ExpiredSignature => TokenError::Expired,
                ErrorKind::InvalidAudience | ErrorKind::InvalidIssuer => TokenError::WrongAudience,
                _ => TokenError::Invalid,
            }
        })?;
    if data.header.typ.as_deref() != Some(ACCESS_TOKEN_TYPE) {
        return Err(TokenError::Invalid);
    }
    if data.claims.exp < now {
        return Err(TokenError::Expired);
    }
    Ok((data.claims, key_until))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::now;

    const ISSUER: &str = "http://127.0.0.1:1";
    const AGENT: &str = "http://127.0.0.1:1/v1/agent";

    fn key() -> SigningKeys {
        SigningKeys::load_or_create(tempfile::tempdir().unwrap().path(), Duration::ZERO).unwrap()
    }

    fn grant(ttl: u64) -> Grant {
        Grant {
            account: "alice".into(),
            scopes: vec!["agent:read".into(), "agent:write".into()],
            resource: AGENT.into(),
            client_id: "test".into(),
            ttl: Duration::from_secs(ttl),
        }
    }

    #[test]
    fn a_minted_token_verifies_for_its_resource_only() {
        let key = key();
        let token = mint(&key, ISSUER, &grant(60), now());
        let (claims, _) = verify(&key, &token, ISSUER, AGENT, now()).unwrap();
        assert_eq!(claims.sub, "alice");
        let principal = crate::auth::principal::Principal::of(&claims);
        assert!(principal.has_scope("agent:write") && !principal.has_scope("agent"));
        let pipeline = "http://127.0.0.1:1/v1/pipeline";
        assert!(matches!(
            verify(&key, &token, ISSUER, pipeline, now()),
            Err(TokenError::WrongAudience)
        ));
        assert!(matches!(
            verify(&key, &token, "http://other", AGENT, now()),
            Err(TokenError::WrongAudience)
        ));
    }

    #[test]
    fn expired_and_garbage_tokens_are_refused() {
        let key = key();
        let expired = mint(&key, ISSUER, &grant(10), now() - 100);
        assert!(matches!(
            verify(&key, &expired, ISSUER, AGENT, now()),
            Err(TokenError::Expired)
        ));
        assert!(matches!(
            verify(&key, "not.a.token", ISSUER, AGENT, now()),
            Err(TokenError::Invalid)
        ));
    }

    #[test]
    fn a_signed_jwt_that_is_not_an_access_token_is_refused() {
        let key = key();
        let claims = serde_json::json!({ "iss": ISSUER, "sub": "alice", "aud": AGENT, "scope": "agent:read",
            "client_id": "x", "exp": now() + 60, "iat": now(), "jti": "j" });
        let other_type = key.sign("build+jws", &claims);
        assert!(matches!(
            verify(&key, &other_type, ISSUER, AGENT, now()),
            Err(TokenError::Invalid)
        ));
    }
}
