//! Opaque event-log cursors: a position and an expiry, signed with HMAC-SHA256 under a key kept
//! in the data dir and bound to the session and the account, so that a cursor cannot be forged,
//! altered, or used on another session. They stay valid across restarts, and across a key
//! rotation until they expire.

use std::io;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// File in the data dir holding the current 32-byte cursor key.
pub(crate) const KEY_FILE: &str = "cursor-key.hmac256";

/// Format version, the first byte of every cursor.
const VERSION: u8 = 1;

/// Version, position and expiry, then the MAC.
const PAYLOAD_LEN: usize = 1 + 8 + 8;
const MAC_LEN: usize = 32;

/// Why a cursor was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorError {
    /// Malformed, altered, or issued for another session or account.
    Invalid,
    /// Its lifetime is over.
    Expired,
}

/// Issues cursors with the current key and opens them with any key still honoured.
pub struct CursorKey {
    /// The current key first, then retired ones, each with the time (Unix seconds) it stops
    /// opening cursors.
    keys: Vec<([u8; 32], i64)>,
}

impl CursorKey {
    /// Loads the keys of `data_dir`, creating the first one when there is none. A retired key
    /// opens cursors for `keep` after its retirement: the lifetime of a cursor.
    pub fn load_or_create(data_dir: &Path, keep: Duration) -> io::Result<Self> {
        let ring = crate::keyring::Ring::load_or_create(data_dir, KEY_FILE)?;
        Ok(Self {
            keys: ring.honoured(keep),
        })
    }

    /// A cursor at `seq` (the last event delivered) of `session`, for `account`, valid until
    /// `expires_at` (Unix seconds).
    pub fn issue(&self, account: &str, session: &str, seq: i64, expires_at: i64) -> String {
        let mut bytes = Vec::with_capacity(PAYLOAD_LEN + MAC_LEN);
        bytes.push(VERSION);
        bytes.extend_from_slice(&seq.to_be_bytes());
        bytes.extend_from_slice(&expires_at.to_be_bytes());
        let tag = mac(&self.keys[0].0, account, session, &bytes)
            .finalize()
            .into_bytes();
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The position of `cursor` if it is genuine, for this session and account, and not
    /// expired at `now` (Unix seconds).
    pub fn open(
        &self,
        account: &str,
        session: &str,
        cursor: &str,
        now: i64,
    ) -> Result<i64, CursorError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor)
            .map_err(|_| CursorError::Invalid)?;
        if bytes.len() != PAYLOAD_LEN + MAC_LEN || bytes[0] != VERSION {
            return Err(CursorError::Invalid);
        }
        let (payload, tag) = bytes.split_at(PAYLOAD_LEN);
        let genuine = self.keys.iter().any(|(key, until)| {
            now <= *until
                && mac(key, account, session, payload)
                    .verify_slice(tag)
                    .is_ok()
        });
        if !genuine {
            return Err(CursorError::Invalid);
        }
        let seq = i64::from_be_bytes(payload[1..9].try_into().expect("8 bytes"));
        let expires_at = i64::from_be_bytes(payload[9..17].try_into().expect("8 bytes"));
        if seq < 0 {
            return Err(CursorError::Invalid);
        }
        if now > expires_at {
            return Err(CursorError::Expired);
        }
        Ok(seq)
    }
}

/// The MAC of `payload` for `account` and `session` under `key`.
fn mac(key: &[u8; 32], account: &str, session: &str, payload: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key size");
    // Lengths first, so that no two (account, session) pairs feed the same bytes.
    for part in [account.as_bytes(), session.as_bytes()] {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac.update(payload);
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CursorKey {
        CursorKey {
            keys: vec![([3; 32], i64::MAX)],
        }
    }

    #[test]
    fn a_cursor_opens_to_its_position_until_it_expires() {
        let cursor = key().issue("acct", "ses", 42, 1_000);
        assert_eq!(key().open("acct", "ses", &cursor, 1_000), Ok(42));
        assert_eq!(
            key().open("acct", "ses", &cursor, 1_001),
            Err(CursorError::Expired)
        );
    }

    #[test]
    fn another_session_account_or_key_refuses_the_cursor() {
        let cursor = key().issue("acct", "ses", 42, 1_000);
        assert_eq!(
            key().open("acct", "ses2", &cursor, 0),
            Err(CursorError::Invalid)
        );
        assert_eq!(
            key().open("other", "ses", &cursor, 0),
            Err(CursorError::Invalid)
        );
        let other_key = CursorKey {
            keys: vec![([4; 32], i64::MAX)],
        };
        assert_eq!(
            other_key.open("acct", "ses", &cursor, 0),
            Err(CursorError::Invalid)
        );
    }

    #[test]
    fn every_altered_character_is_refused() {
        let cursor = key().issue("acct", "ses", 42, 1_000);
        for i in 0..cursor.len() {
            let mut altered = cursor.clone().into_bytes();
            altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(altered).unwrap();
            assert_eq!(
                key().open("acct", "ses", &altered, 0),
                Err(CursorError::Invalid),
                "position {i}"
            );
        }
        for garbage in ["", "x", "not a cursor", &cursor[..cursor.len() - 1]] {
            assert_eq!(
                key().open("acct", "ses", garbage, 0),
                Err(CursorError::Invalid)
            );
        }
    }

    #[test]
    fn a_retired_key_opens_its_cursors_until_its_lifetime_is_over() {
        let dir = tempfile::tempdir().unwrap();
        let keep = Duration::from_secs(100);
        let before = CursorKey::load_or_create(dir.path(), keep).unwrap();
        let old = before.issue("acct", "ses", 7, 5_000);
        crate::keyring::rotate(dir.path(), KEY_FILE, 1_000).unwrap();
        let after = CursorKey::load_or_create(dir.path(), keep).unwrap();
        assert_ne!(after.issue("acct", "ses", 7, 5_000), old);
        assert_eq!(after.open("acct", "ses", &old, 1_100), Ok(7));
        assert_eq!(
            after.open("acct", "ses", &old, 1_101),
            Err(CursorError::Invalid)
        );
        let new = after.issue("acct", "ses", 8, 5_000);
        assert_eq!(after.open("acct", "ses", &new, 1_101), Ok(8));
    }
}
