//! Credential values at rest: sealed with AES-256-GCM under a key kept in the data dir, bound to
//! their account, application and name, so that a value is never stored in clear.

use std::io;
use std::path::Path;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};

/// File in the data dir holding the 32-byte sealing key.
const KEY_FILE: &str = "credential-key.aes256";

/// Seals credential values.
pub struct Sealer {
    cipher: Aes256Gcm,
}

impl Sealer {
    /// Loads the key of `data_dir`, creating and saving a new one the first time.
    pub fn load_or_create(data_dir: &Path) -> io::Result<Self> {
        let key = crate::keys::keyring::secret_file(&data_dir.join(KEY_FILE))?;
        let cipher = Aes256Gcm::new(&key.into());
        Ok(Self { cipher })
    }

    /// `nonce || ciphertext` of `value`, bound to `context` (account, application and name).
    pub fn seal(&self, context: &str, value: &str) -> Vec<u8> {
        let nonce = crate::random::bytes::<12>();
        let sealed = self
            .cipher
            .encrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: value.as_bytes(),
                    aad: context.as_bytes(),
                },
            )
            .expect("AES-GCM encryption of a short value does not fail");
        [nonce.as_slice(), &sealed].concat()
    }

    /// The clear value of `sealed`, or `None` when it was not sealed for `context` by this key.
    #[cfg(test)]
    pub fn open(&self, context: &str, sealed: &[u8]) -> Option<String> {
        let (nonce, ciphertext) = sealed.split_at_checked(12)?;
        let nonce: [u8; 12] = nonce.try_into().ok()?;
        let clear = self
            .cipher
            .decrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad: context.as_bytes(),
                },
            )
            .ok()?;
        String::from_utf8(clear).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_in_their_context_and_hide_the_clear_text() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = Sealer::load_or_create(dir.path()).unwrap();
        let sealed = sealer.seal("alice/1/API_KEY", "sk_live_secret");
        assert!(
            !sealed.windows(6).any(|w| w == b"sk_liv"),
            "clear text in the sealed bytes"
        );
        assert_eq!(
            sealer.open("alice/1/API_KEY", &sealed).as_deref(),
            Some("sk_live_secret")
        );
        assert_eq!(sealer.open("bob/1/API_KEY", &sealed), None);
        let reloaded = Sealer::load_or_create(dir.path()).unwrap();
        assert_eq!(
            reloaded.open("alice/1/API_KEY", &sealed).as_deref(),
            Some("sk_live_secret")
        );
    }
}
