//! The digest of a Build envelope (part 2.1), computed alike by the server that seals a Build
//! and by the clients that check it.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// `sha256:` and the hex SHA-256 of the RFC 8785 canonical JSON of `build` without its `digest`
/// and `attestation` members.
///
/// ```
/// let build = serde_json::json!({ "version": 2, "digest": "ignored", "attestation": "ignored" });
/// let digest = intent_models::digest::build_digest(build.as_object().unwrap());
/// assert!(digest.starts_with("sha256:") && digest.len() == 71);
/// ```
pub fn build_digest(build: &Map<String, Value>) -> String {
    let mut content = build.clone();
    content.remove("digest");
    content.remove("attestation");
    let canonical = serde_json_canonicalizer::to_vec(&Value::Object(content))
        .expect("JSON values canonicalize");
    let hex: String = Sha256::digest(&canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}
