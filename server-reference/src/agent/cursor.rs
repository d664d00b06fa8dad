//! Opaque event-log cursors: a position, how far the log was seen to reach, and an expiry, with a
//! MAC under a key kept in the data dir and bound to the session and the account, so that a
//! cursor cannot be forged, altered, or used on another session. They stay valid across
//! restarts, and across a key rotation until they expire.
//!
//! The MAC is BLAKE3's keyed hash, under a key derived from the data dir's. Cursors of formats 1
//! and 2, issued before, carry an HMAC-SHA256 under the data dir's key itself and still open:
//! without SHA extensions in the CPU, HMAC-SHA256 was a quarter of a page GET.

use std::io;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::ids::AccountId;

/// File in the data dir holding the current 32-byte cursor key. Format 3's BLAKE3 key is derived
/// from it; the name, from when it keyed HMAC-SHA256 only, stays for the data dirs that hold it.
const KEY_FILE: &str = "cursor-key.hmac256";

/// Retires the current cursor key of `data_dir` at `now` (Unix seconds) and makes a new one
/// current. A server takes the new key when it starts.
pub fn rotate(data_dir: &Path, now: i64) -> io::Result<()> {
    crate::keys::keyring::rotate(data_dir, KEY_FILE, now)
}

/// Format version, the first byte of every cursor: 3 is MAC'd with BLAKE3; 2 and 1, issued
/// before, with HMAC-SHA256, and 1 does not carry `seen`.
const VERSION: u8 = 3;
const VERSION_2: u8 = 2;
const VERSION_1: u8 = 1;

/// Version, position, `seen` (from version 2) and expiry, then the MAC.
const PAYLOAD_LEN: usize = 1 + 8 + 8 + 8;
const PAYLOAD_LEN_1: usize = 1 + 8 + 8;
const MAC_LEN: usize = 32;

/// The context BLAKE3 derives the MAC key of format 3 from the data dir's key with.
const KEY_CONTEXT: &str = "intent-server 2026-11-27 event-log cursor MAC, format 3";

/// Where a cursor stands in its session's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadPoint {
    /// The last event delivered; reading resumes after it.
    pub after: i64,
    /// The last seq the log was known to hold when the cursor was issued, so that a reader
    /// never answers from a view of the log older than one its client has seen.
    pub seen: i64,
}

impl ReadPoint {
    /// After `after`, in a log seen to reach `seen`.
    pub fn new(after: i64, seen: i64) -> Self {
        Self {
            after,
            seen: seen.max(after),
        }
    }
}

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
    keys: Vec<Keyed>,
}

/// One key of the data dir, ready to MAC in either format.
struct Keyed {
    /// The key BLAKE3 is keyed with for format 3, derived from the data dir's.
    blake3: [u8; 32],
    /// HMAC-SHA256 under the key itself, for formats 1 and 2: keyed once and cloned for every
    /// MAC, so that the key's two blocks are hashed once and not per cursor.
    hmac: Hmac<Sha256>,
    /// When it stops opening cursors (Unix seconds).
    until: i64,
}

impl CursorKey {
    /// Loads the keys of `data_dir`, creating the first one when there is none. A retired key
    /// opens cursors for `keep` after its retirement: the lifetime of a cursor.
    pub fn load_or_create(data_dir: &Path, keep: Duration) -> io::Result<Self> {
        let ring = crate::keys::keyring::Ring::load_or_create(data_dir, KEY_FILE)?;
        Ok(Self::new(ring.honoured(keep)))
    }

    /// Cursors under `keys`: the current key first, then retired ones with their ends.
    fn new(keys: Vec<([u8; 32], i64)>) -> Self {
        let keyed = |(key, until): ([u8; 32], i64)| Keyed {
            blake3: blake3::derive_key(KEY_CONTEXT, &key),
            hmac: hmac_keyed(&key),
            until,
        };
        Self {
            keys: keys.into_iter().map(keyed).collect(),
        }
    }

    /// A cursor at `position` of `session`, for `account`, valid until `expires_at` (Unix
    /// seconds).
    pub fn issue(
        &self,
        account: &AccountId,
        session: &str,
        position: ReadPoint,
        expires_at: i64,
    ) -> String {
        let mut bytes = [0; PAYLOAD_LEN + MAC_LEN];
        bytes[0] = VERSION;
        for (at, number) in [(1, position.after), (9, position.seen), (17, expires_at)] {
            bytes[at..at + 8].copy_from_slice(&number.to_be_bytes());
        }
        let input = blake3_input(account, session, &bytes[..PAYLOAD_LEN]);
        let tag = blake3::keyed_hash(&self.keys[0].blake3, &input);
        bytes[PAYLOAD_LEN..].copy_from_slice(tag.as_bytes());
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The position of `cursor` if it is genuine, for this session and account, and not
    /// expired at `now` (Unix seconds).
    pub fn open(
        &self,
        account: &AccountId,
        session: &str,
        cursor: &str,
        now: i64,
    ) -> Result<ReadPoint, CursorError> {
        // Room for the longest format, and for base64's estimate of it; a longer cursor is none.
        let mut decoded = [0; PAYLOAD_LEN + MAC_LEN + 3];
        let len = URL_SAFE_NO_PAD
            .decode_slice(cursor, &mut decoded)
            .map_err(|_| CursorError::Invalid)?;
        let bytes = &decoded[..len];
        let version = bytes.first().copied();
        let payload_len = match version {
            Some(VERSION | VERSION_2) => PAYLOAD_LEN,
            Some(VERSION_1) => PAYLOAD_LEN_1,
            _ => return Err(CursorError::Invalid),
        };
        if bytes.len() != payload_len + MAC_LEN {
            return Err(CursorError::Invalid);
        }
        let (payload, tag) = bytes.split_at(payload_len);
        let input = (version == Some(VERSION)).then(|| blake3_input(account, session, payload));
        let genuine = self.keys.iter().any(|key| {
            now <= key.until
                && match &input {
                    // BLAKE3's `Hash` compares in constant time.
                    Some(input) => {
                        let tag = <[u8; MAC_LEN]>::try_from(tag).expect("MAC_LEN bytes");
                        blake3::keyed_hash(&key.blake3, input) == tag
                    }
                    None => fed(key.hmac.clone(), account, session, payload)
                        .verify_slice(tag)
                        .is_ok(),
                }
        });
        if !genuine {
            return Err(CursorError::Invalid);
        }
        let number =
            |at: usize| i64::from_be_bytes(payload[at..at + 8].try_into().expect("8 bytes"));
        let after = number(1);
        let (seen, expires_at) = match payload_len {
            PAYLOAD_LEN => (number(9), number(17)),
            _ => (after, number(9)),
        };
        if after < 0 || seen < after {
            return Err(CursorError::Invalid);
        }
        if now > expires_at {
            return Err(CursorError::Expired);
        }
        Ok(ReadPoint { after, seen })
    }
}

/// An HMAC-SHA256 under `key`.
fn hmac_keyed(key: &[u8; 32]) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key size")
}

/// What BLAKE3 MACs for `payload` of `account` and `session`, gathered in one buffer: hashed in
/// one call, it costs a third less than fed to BLAKE3 in its five parts.
fn blake3_input(account: &AccountId, session: &str, payload: &[u8]) -> Vec<u8> {
    let input = Vec::with_capacity(16 + account.as_str().len() + session.len() + payload.len());
    fed(input, account, session, payload)
}

/// What a cursor's MAC input is fed to: HMAC-SHA256 already keyed, or a buffer for BLAKE3.
trait Feed {
    fn feed(&mut self, bytes: &[u8]);
}

impl Feed for Vec<u8> {
    fn feed(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl Feed for Hmac<Sha256> {
    fn feed(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// `to` fed the MAC input of `payload` for `account` and `session`.
fn fed<M: Feed>(mut to: M, account: &AccountId, session: &str, payload: &[u8]) -> M {
    // Lengths first, so that no two (account, session) pairs feed the same bytes.
    for part in [account.as_str().as_bytes(), session.as_bytes()] {
        to.feed(&(part.len() as u64).to_be_bytes());
        to.feed(part);
    }
    to.feed(payload);
    to
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acct() -> AccountId {
        AccountId::verified("acct")
    }

    fn key() -> CursorKey {
        CursorKey::new(vec![([3; 32], i64::MAX)])
    }

    fn at(after: i64) -> ReadPoint {
        ReadPoint::new(after, after)
    }

    #[test]
    fn the_format_written_is_the_one_stored_formats_json_names() {
        // A new format needs a new upgrade fixture (`cargo xtask fixture`), which records it.
        let formats: serde_json::Value =
            serde_json::from_str(include_str!("../../stored-formats.json")).unwrap();
        assert_eq!(formats["cursor"], VERSION);
    }

    #[test]
    fn a_cursor_opens_to_its_position_until_it_expires() {
        let position = ReadPoint::new(42, 45);
        let cursor = key().issue(&acct(), "ses", position, 1_000);
        assert_eq!(key().open(&acct(), "ses", &cursor, 1_000), Ok(position));
        assert_eq!(
            key().open(&acct(), "ses", &cursor, 1_001),
            Err(CursorError::Expired)
        );
    }

    /// A cursor of format 1 or 2: `numbers` after the version, then their HMAC-SHA256.
    fn hmac_cursor(version: u8, numbers: &[i64]) -> String {
        let mut payload = vec![version];
        for number in numbers {
            payload.extend_from_slice(&number.to_be_bytes());
        }
        let tag = fed(hmac_keyed(&[3; 32]), &acct(), "ses", &payload)
            .finalize()
            .into_bytes();
        payload.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(payload)
    }

    #[test]
    fn cursors_of_the_earlier_versions_still_open() {
        let first = hmac_cursor(VERSION_1, &[42, 1_000]);
        assert_eq!(key().open(&acct(), "ses", &first, 1_000), Ok(at(42)));
        assert_eq!(
            key().open(&acct(), "ses", &first, 1_001),
            Err(CursorError::Expired)
        );
        let second = hmac_cursor(VERSION_2, &[42, 45, 1_000]);
        assert_eq!(
            key().open(&acct(), "ses", &second, 1_000),
            Ok(ReadPoint::new(42, 45))
        );
        assert_eq!(
            key().open(&AccountId::verified("ses"), "acct", &second, 1_000),
            Err(CursorError::Invalid)
        );
    }

    #[test]
    fn a_cursor_is_macd_by_its_version_only() {
        // The payload of a format-3 cursor under version 2's byte, and the reverse, are refused:
        // a MAC of one format never opens a cursor of the other.
        let third = key().issue(&acct(), "ses", at(42), 1_000);
        let mut relabelled = URL_SAFE_NO_PAD.decode(&third).unwrap();
        relabelled[0] = VERSION_2;
        let relabelled = URL_SAFE_NO_PAD.encode(relabelled);
        assert_eq!(
            key().open(&acct(), "ses", &relabelled, 0),
            Err(CursorError::Invalid)
        );
        let mut second = URL_SAFE_NO_PAD
            .decode(hmac_cursor(VERSION_2, &[42, 42, 1_000]))
            .unwrap();
        second[0] = VERSION;
        let second = URL_SAFE_NO_PAD.encode(second);
        assert_eq!(
            key().open(&acct(), "ses", &second, 0),
            Err(CursorError::Invalid)
        );
    }

    #[test]
    fn another_session_account_or_key_refuses_the_cursor() {
        let cursor = key().issue(&acct(), "ses", at(42), 1_000);
        assert_eq!(
            key().open(&acct(), "ses2", &cursor, 0),
            Err(CursorError::Invalid)
        );
        assert_eq!(
            key().open(&AccountId::verified("other"), "ses", &cursor, 0),
            Err(CursorError::Invalid)
        );
        let other_key = CursorKey::new(vec![([4; 32], i64::MAX)]);
        assert_eq!(
            other_key.open(&acct(), "ses", &cursor, 0),
            Err(CursorError::Invalid)
        );
    }

    #[test]
    fn every_altered_character_is_refused() {
        let cursor = key().issue(&acct(), "ses", at(42), 1_000);
        for i in 0..cursor.len() {
            let mut altered = cursor.clone().into_bytes();
            altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(altered).unwrap();
            assert_eq!(
                key().open(&acct(), "ses", &altered, 0),
                Err(CursorError::Invalid),
                "position {i}"
            );
        }
        for garbage in ["", "x", "not a cursor", &cursor[..cursor.len() - 1]] {
            assert_eq!(
                key().open(&acct(), "ses", garbage, 0),
                Err(CursorError::Invalid)
            );
        }
    }

    #[test]
    fn a_retired_key_opens_its_cursors_until_its_lifetime_is_over() {
        let dir = tempfile::tempdir().unwrap();
        let keep = Duration::from_secs(100);
        let before = CursorKey::load_or_create(dir.path(), keep).unwrap();
        let old = before.issue(&acct(), "ses", at(7), 5_000);
        crate::keys::keyring::rotate(dir.path(), KEY_FILE, 1_000).unwrap();
        let after = CursorKey::load_or_create(dir.path(), keep).unwrap();
        assert_ne!(after.issue(&acct(), "ses", at(7), 5_000), old);
        assert_eq!(after.open(&acct(), "ses", &old, 1_100), Ok(at(7)));
        assert_eq!(
            after.open(&acct(), "ses", &old, 1_101),
            Err(CursorError::Invalid)
        );
        let new = after.issue(&acct(), "ses", at(8), 5_000);
        assert_eq!(after.open(&acct(), "ses", &new, 1_101), Ok(at(8)));
    }
}
