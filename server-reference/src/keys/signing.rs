//! The server's Ed25519 signing keys, kept in the data dir, and the JWKS that publishes them.
//! Access tokens and Build attestations are signed with the current key and name it by `kid`;
//! a key retired by `intent-server keys rotate` keeps verifying, and stays in the JWKS, until
//! everything it signed has expired.

use std::io;
use std::path::Path;
use std::time::Duration;

use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::jwk::{Jwk, JwkSet, ThumbprintHash};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, TokenData, Validation};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::keys::keyring::Ring;

/// File in the data dir holding the current 32-byte Ed25519 seed.
pub(crate) const KEY_FILE: &str = "signing-key.ed25519";

/// PKCS#8 prefix of an Ed25519 private key; the 32-byte seed follows it.
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// The current signing key and the retired keys still honoured.
pub struct SigningKeys {
    /// The current key first, then retired ones, each with the time (Unix seconds) it stops
    /// verifying.
    keys: Vec<(SigningKey, i64)>,
}

impl SigningKeys {
    /// Loads the keys of `data_dir`, creating the first one when there is none. A retired key
    /// verifies for `keep` after its retirement: the longest lifetime of what it signed.
    pub fn load_or_create(data_dir: &Path, keep: Duration) -> io::Result<Self> {
        let ring = Ring::load_or_create(data_dir, KEY_FILE)?;
        let keys = ring.honoured(keep);
        let keys = keys
            .into_iter()
            .map(|(seed, until)| (SigningKey::from_seed(&seed), until))
            .collect();
        Ok(Self { keys })
    }

    /// Signs `claims` with the current key as a compact JWS with header `typ`.
    pub fn sign(&self, typ: &str, claims: &impl Serialize) -> String {
        self.keys[0].0.sign(typ, claims)
    }

    /// Verifies `token` with the key its `kid` names, if that key still verifies at `now`, and
    /// the claims `validation` asks for. Returns the token and when its key stops verifying.
    pub fn verify<T: DeserializeOwned>(
        &self,
        token: &str,
        validation: &Validation,
        now: i64,
    ) -> jsonwebtoken::errors::Result<(TokenData<T>, i64)> {
        let kid = jsonwebtoken::decode_header(token)?.kid;
        let (key, until) = self
            .keys
            .iter()
            .find(|(key, until)| Some(&key.kid) == kid.as_ref() && now <= *until)
            .ok_or_else(|| Error::from(ErrorKind::InvalidSignature))?;
        Ok((
            jsonwebtoken::decode(token, &key.decoding, validation)?,
            *until,
        ))
    }

    /// The JWKS of the keys that verify at `now`, the current one first.
    pub fn jwks(&self, now: i64) -> JwkSet {
        let keys = self.keys.iter().filter(|(_, until)| now <= *until);
        JwkSet {
            keys: keys.map(|(key, _)| key.jwk.clone()).collect(),
        }
    }

    /// The `kid` of the current key.
    pub fn current_kid(&self) -> &str {
        &self.keys[0].0.kid
    }
}

/// Retires the current signing key of `data_dir` at `now` (Unix seconds) and makes a new one
/// current; returns its `kid`. A server takes the new key when it starts.
pub fn rotate(data_dir: &Path, now: i64) -> io::Result<String> {
    crate::keys::keyring::rotate(data_dir, KEY_FILE, now)?;
    Ok(SigningKeys::load_or_create(data_dir, Duration::ZERO)?
        .current_kid()
        .to_owned())
}

/// One signing key with its public JWK.
struct SigningKey {
    encoding: EncodingKey,
    decoding: DecodingKey,
    jwk: Jwk,
    kid: String,
}

impl SigningKey {
    fn from_seed(seed: &[u8; 32]) -> Self {
        let der = [PKCS8_ED25519_PREFIX.as_slice(), seed].concat();
        let encoding = EncodingKey::from_ed_der(&der);
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::EdDSA)
            .expect("an Ed25519 seed is a valid key");
        let kid = jwk
            .thumbprint(ThumbprintHash::SHA256)
            .expect("a public JWK has a thumbprint");
        jwk.common.key_id = Some(kid.clone());
        jwk.common.public_key_use = Some(jsonwebtoken::jwk::PublicKeyUse::Signature);
        let decoding = DecodingKey::from_jwk(&jwk).expect("the public JWK is a valid decoding key");
        Self {
            encoding,
            decoding,
            jwk,
            kid,
        }
    }

    /// Signs `claims` as a compact JWS with header `typ`.
    pub fn sign(&self, typ: &str, claims: &impl Serialize) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.typ = Some(typ.to_owned());
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("claims serialize to JSON")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn claims() -> serde_json::Value {
        serde_json::json!({ "sub": "alice", "exp": 4_000_000_000u64 })
    }

    /// When the key of `token` stops verifying, if it verifies at `now`.
    fn decode(keys: &SigningKeys, token: &str, now: i64) -> Option<i64> {
        let validation = Validation::new(Algorithm::EdDSA);
        let (data, until) = keys
            .verify::<serde_json::Value>(token, &validation, now)
            .ok()?;
        assert_eq!(data.claims["sub"], "alice");
        Some(until)
    }

    #[test]
    fn keys_verify_their_own_signatures_and_not_another_data_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let keys = SigningKeys::load_or_create(dir.path(), HOUR).unwrap();
        let token = keys.sign("test+jwt", &claims());
        assert_eq!(decode(&keys, &token, 0), Some(i64::MAX));
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.typ.as_deref(), Some("test+jwt"));
        assert_eq!(header.kid.as_deref(), Some(keys.current_kid()));
        let other = SigningKeys::load_or_create(tempfile::tempdir().unwrap().path(), HOUR).unwrap();
        assert!(decode(&other, &token, 0).is_none());
    }

    #[test]
    fn a_retired_key_verifies_and_is_published_until_its_lifetime_is_over() {
        let dir = tempfile::tempdir().unwrap();
        let before = SigningKeys::load_or_create(dir.path(), HOUR).unwrap();
        let old_token = before.sign("test+jwt", &claims());
        crate::keys::keyring::rotate(dir.path(), KEY_FILE, 1_000).unwrap();
        let after = SigningKeys::load_or_create(dir.path(), HOUR).unwrap();
        assert_ne!(after.current_kid(), before.current_kid());
        assert_eq!(decode(&after, &old_token, 4_600), Some(4_600));
        assert_eq!(after.jwks(4_600).keys.len(), 2);
        assert!(decode(&after, &old_token, 4_601).is_none());
        let jwks = after.jwks(4_601);
        assert_eq!(jwks.keys.len(), 1);
        assert_eq!(
            jwks.keys[0].common.key_id.as_deref(),
            Some(after.current_kid())
        );
        let new_token = after.sign("test+jwt", &claims());
        assert_eq!(decode(&after, &new_token, 4_601), Some(i64::MAX));
    }

    #[test]
    fn the_jwks_names_the_key_by_its_thumbprint() {
        let key = SigningKey::from_seed(&[7; 32]);
        let keys = SigningKeys {
            keys: vec![(key, i64::MAX)],
        };
        let jwks = serde_json::to_value(keys.jwks(0)).unwrap();
        assert_eq!(jwks["keys"][0]["kty"], "OKP");
        assert_eq!(jwks["keys"][0]["crv"], "Ed25519");
        assert_eq!(jwks["keys"][0]["kid"], keys.current_kid());
    }
}
