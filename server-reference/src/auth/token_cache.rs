//! A bounded cache of verified access tokens, so that a token's signature is checked once and
//! not on every request. An entry is keyed by the token's text and holds its claims, the
//! [`Principal`] it makes, and when its signing key stops verifying; expiry, key retirement,
//! issuer and audience are checked on every use, and an entry goes once its `exp` or its key's
//! time has passed.

use foldhash::HashMap;
use std::sync::Mutex;

use crate::auth::principal::Principal;
use crate::auth::token::{self, AccessClaims, TokenError};
use crate::keys::signing::SigningKeys;

/// Tokens kept at most; past it, expired entries go first, then all of them.
const CAPACITY: usize = 10_000;

/// Verified access tokens by their text, hashed by foldhash: a token is a few hundred bytes, which
/// SipHash took half a microsecond over, and only tokens whose signature verified are kept.
#[derive(Default)]
pub struct VerifiedTokens {
    entries: Mutex<HashMap<Box<str>, Entry>>,
}

/// A token's claims, its principal, and when the key that signed it stops verifying.
struct Entry {
    issuer: Box<str>,
    audience: Box<str>,
    principal: Principal,
    key_until: i64,
}

impl VerifiedTokens {
    /// Verifies `token` as [`token::verify`] does, from the cache when its signature was checked
    /// before: expired tokens, tokens of a retired key past its time, and another issuer's or
    /// another resource's tokens are refused alike. Gives the principal the token makes.
    pub fn verify(
        &self,
        key: &SigningKeys,
        token: &str,
        issuer: &str,
        resource: &str,
        now: i64,
    ) -> Result<Principal, TokenError> {
        if let Some(cached) = self.cached(token, issuer, resource, now) {
            return cached;
        }
        let (claims, key_until) = token::verify(key, token, issuer, resource, now)?;
        let entry = Entry::new(claims, key_until);
        let mut entries = self.lock();
        if entries.len() >= CAPACITY {
            entries.retain(|_, entry| entry.principal.expires_at >= now && entry.key_until >= now);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        let principal = entry.principal.clone();
        entries.insert(token.into(), entry);
        Ok(principal)
    }

    /// What the cache knows of `token`, if it holds it; an expired entry goes.
    fn cached(
        &self,
        token: &str,
        issuer: &str,
        resource: &str,
        now: i64,
    ) -> Option<Result<Principal, TokenError>> {
        let mut entries = self.lock();
        let entry = entries.get(token)?;
        let exp = entry.principal.expires_at;
        if exp < now || entry.key_until < now {
            entries.remove(token);
            return Some(Err(if exp < now {
                TokenError::Expired
            } else {
                TokenError::Invalid
            }));
        }
        if *entry.issuer != *issuer || *entry.audience != *resource {
            return Some(Err(TokenError::WrongAudience));
        }
        Some(Ok(entry.principal.clone()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Entry>> {
        self.entries
            .lock()
            .expect("the token cache lock is not poisoned")
    }
}

impl Entry {
    fn new(claims: AccessClaims, key_until: i64) -> Self {
        Self {
            principal: Principal::of(&claims),
            issuer: claims.iss.into(),
            audience: claims.aud.into(),
            key_until,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::auth::token::Grant;

    const ISSUER: &str = "http://127.0.0.1:1";
    const AGENT: &str = "http://127.0.0.1:1/v1/agent";
    const PIPELINE: &str = "http://127.0.0.1:1/v1/pipeline";

    fn new_key() -> SigningKeys {
        SigningKeys::load_or_create(tempfile::tempdir().unwrap().path(), Duration::ZERO).unwrap()
    }

    fn mint(key: &SigningKeys, ttl: u64, now: i64) -> String {
        let grant = Grant {
            account: "alice".into(),
            scopes: vec!["agent:read".into()],
            resource: AGENT.into(),
            client_id: "c".into(),
            ttl: Duration::from_secs(ttl),
        };
        token::mint(key, ISSUER, &grant, now)
    }

    #[test]
    fn a_cached_token_still_expires_and_stays_bound_to_its_resource_and_issuer() {
        let key = new_key();
        let cache = VerifiedTokens::default();
        let now = crate::clock::now();
        let token = mint(&key, 60, now);
        let principal = cache.verify(&key, &token, ISSUER, AGENT, now).unwrap();
        assert_eq!(principal.account.as_str(), "alice");
        assert!(cache.lock().len() == 1, "the verified token is kept");
        // From the cache: the same answers a full verification gives.
        assert_eq!(
            cache.verify(&key, &token, ISSUER, AGENT, now).unwrap(),
            principal
        );
        assert!(matches!(
            cache.verify(&key, &token, ISSUER, PIPELINE, now),
            Err(TokenError::WrongAudience)
        ));
        assert!(matches!(
            cache.verify(&key, &token, "http://other", AGENT, now),
            Err(TokenError::WrongAudience)
        ));
        assert!(matches!(
            cache.verify(&key, &token, ISSUER, AGENT, now + 61),
            Err(TokenError::Expired)
        ));
        assert!(cache.lock().is_empty(), "an expired token leaves the cache");
    }

    #[test]
    fn a_forged_token_is_never_cached() {
        let key = new_key();
        let cache = VerifiedTokens::default();
        let token = mint(&new_key(), 60, crate::clock::now());
        let now = crate::clock::now();
        assert!(cache.verify(&key, &token, ISSUER, AGENT, now).is_err());
        assert!(cache.lock().is_empty());
    }

    #[test]
    fn a_cached_token_goes_when_its_retired_key_stops_verifying() {
        let dir = tempfile::tempdir().unwrap();
        let keep = Duration::from_secs(60);
        let now = crate::clock::now();
        let before = SigningKeys::load_or_create(dir.path(), keep).unwrap();
        let token = mint(&before, 3_600, now);
        crate::keys::signing::rotate(dir.path(), now).unwrap();
        let after = SigningKeys::load_or_create(dir.path(), keep).unwrap();
        let cache = VerifiedTokens::default();
        assert!(
            cache
                .verify(&after, &token, ISSUER, AGENT, now + 60)
                .is_ok()
        );
        assert!(matches!(
            cache.verify(&after, &token, ISSUER, AGENT, now + 61),
            Err(TokenError::Invalid)
        ));
        assert!(
            cache.lock().is_empty(),
            "the retired key's token leaves the cache"
        );
    }
}
