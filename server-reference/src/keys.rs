//! The server's Ed25519 signing key, kept in the data dir, and the JWKS that publishes it.
//! Access tokens (and, later, Build attestations) are signed with it.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use jsonwebtoken::jwk::{Jwk, JwkSet, ThumbprintHash};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, TokenData, Validation};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// File in the data dir holding the 32-byte Ed25519 seed.
const KEY_FILE: &str = "signing-key.ed25519";

/// PKCS#8 prefix of an Ed25519 private key; the 32-byte seed follows it.
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// The signing key with its public JWK.
pub struct SigningKey {
    encoding: EncodingKey,
    decoding: DecodingKey,
    jwk: Jwk,
    kid: String,
}

impl SigningKey {
    /// Loads the key of `data_dir`, creating and saving a new one the first time.
    pub fn load_or_create(data_dir: &Path) -> io::Result<Self> {
        Ok(Self::from_seed(&secret_file(&data_dir.join(KEY_FILE))?))
    }

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

    /// Verifies `token`'s signature and the claims `validation` asks for.
    pub fn verify<T: DeserializeOwned>(
        &self,
        token: &str,
        validation: &Validation,
    ) -> jsonwebtoken::errors::Result<TokenData<T>> {
        jsonwebtoken::decode(token, &self.decoding, validation)
    }

    /// The JWKS publishing the public key.
    pub fn jwks(&self) -> JwkSet {
        JwkSet {
            keys: vec![self.jwk.clone()],
        }
    }
}

/// The 32 secret bytes kept in `path`, created at random and saved the first time.
pub(crate) fn secret_file(path: &Path) -> io::Result<[u8; 32]> {
    match fs::read(path) {
        Ok(bytes) => bytes.try_into().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not 32 bytes", path.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let secret = crate::random::bytes::<32>();
            write_private(path, &secret)?;
            Ok(secret)
        }
        Err(e) => Err(e),
    }
}

/// Writes a file readable by its owner only, through a temporary file and a rename.
pub(crate) fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    let temporary = path.with_extension("tmp");
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary)?;
    file.write_all(contents)?;
    file.sync_all()?;
    fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_verifies_its_own_signature_and_not_another_keys() {
        let key = SigningKey::from_seed(&[7; 32]);
        let other = SigningKey::from_seed(&[8; 32]);
        let token = key.sign(
            "test+jwt",
            &serde_json::json!({ "sub": "alice", "exp": 4_000_000_000u64 }),
        );
        let validation = Validation::new(Algorithm::EdDSA);
        let data: TokenData<serde_json::Value> = key.verify(&token, &validation).unwrap();
        assert_eq!(data.claims["sub"], "alice");
        assert_eq!(data.header.typ.as_deref(), Some("test+jwt"));
        assert!(
            other
                .verify::<serde_json::Value>(&token, &validation)
                .is_err()
        );
    }

    #[test]
    fn the_key_is_created_once_and_kept_private_in_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let first = SigningKey::load_or_create(dir.path()).unwrap();
        let again = SigningKey::load_or_create(dir.path()).unwrap();
        assert_eq!(first.kid, again.kid);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn the_jwks_names_the_key_by_its_thumbprint() {
        let key = SigningKey::from_seed(&[7; 32]);
        let jwks = serde_json::to_value(key.jwks()).unwrap();
        assert_eq!(jwks["keys"][0]["kty"], "OKP");
        assert_eq!(jwks["keys"][0]["crv"], "Ed25519");
        assert_eq!(jwks["keys"][0]["kid"], key.kid.as_str());
    }
}
