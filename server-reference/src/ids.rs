//! The ids a request names in its path, each checked once, where the request enters, against
//! its parameter in openapi.json: a service given one knows it is well formed.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

/// Why an id is refused: the message of a 400 `invalid_parameter`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidId(&'static str);

/// Longest action id (a session id's bound is intent-models' `SessionId`'s).
const MAX_ID: usize = 160;

/// `id` when it has 1 to [`MAX_ID`] characters, else `refusal`.
fn bounded(id: String, refusal: &'static str) -> Result<String, InvalidId> {
    match !id.is_empty() && id.chars().count() <= MAX_ID {
        true => Ok(id),
        false => Err(InvalidId(refusal)),
    }
}

/// A session id: 1 to 160 characters, the type intent-models generates from openapi.json.
pub use intent_models::SessionId;

/// `id` as a [`SessionId`], refused with the message of a 400 `invalid_parameter`.
pub fn session_id(id: String) -> Result<SessionId, InvalidId> {
    SessionId::try_from(id).map_err(|_| InvalidId("sessionId must be 1 to 160 characters"))
}

/// A new session's id: `ses_` and 32 random hex digits.
pub fn new_session_id() -> SessionId {
    session_id(crate::random::id("ses")).expect("37 characters make a session id")
}

/// The account that owns what a caller reaches: a verified token's subject, never text from a
/// request's path or body. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccountId(Arc<str>);

impl AccountId {
    /// The account named by a verified token's `sub`, or by the grant that mints one.
    pub fn verified(sub: &str) -> Self {
        Self(sub.into())
    }

    /// The account a stored row names: one a verified token named when the row was written.
    pub(crate) fn stored(account: String) -> Self {
        Self(account.into())
    }
}

/// An action id: 1 to 160 characters.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct ActionId(String);

impl TryFrom<String> for ActionId {
    type Error = InvalidId;

    fn try_from(id: String) -> Result<Self, InvalidId> {
        bounded(id, "actionId must be 1 to 160 characters").map(Self)
    }
}

/// An application id: an integer of at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct ApplicationId(i64);

impl TryFrom<String> for ApplicationId {
    type Error = InvalidId;

    fn try_from(id: String) -> Result<Self, InvalidId> {
        id.parse()
            .ok()
            .filter(|id| *id >= 1)
            .map(Self)
            .ok_or(InvalidId("applicationId must be an integer of at least 1"))
    }
}

impl ApplicationId {
    /// The number.
    pub fn get(self) -> i64 {
        self.0
    }
}

/// A credential name: `^[A-Za-z_][A-Za-z0-9_]{0,127}$`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct CredentialName(String);

impl TryFrom<String> for CredentialName {
    type Error = InvalidId;

    fn try_from(name: String) -> Result<Self, InvalidId> {
        let mut bytes = name.bytes();
        let first = bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
        match first && name.len() <= 128 && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            true => Ok(Self(name)),
            false => Err(InvalidId("name must match ^[A-Za-z_][A-Za-z0-9_]{0,127}$")),
        }
    }
}

/// The text of the string ids.
macro_rules! text_id {
    ($($id:ident),+) => {$(
        impl $id {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    )+};
}

text_id!(AccountId, ActionId, CredentialName);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_hold_to_their_parameters_in_openapi_json() {
        let long = "x".repeat(161);
        assert!(session_id("ses_1".to_owned()).is_ok());
        assert!(session_id("é".repeat(160)).is_ok(), "characters, not bytes");
        assert!(session_id(String::new()).is_err());
        assert!(session_id(long.clone()).is_err());
        assert!(ActionId::try_from(long).is_err());
        assert_eq!(
            ApplicationId::try_from("7".to_owned()).map(ApplicationId::get),
            Ok(7)
        );
        for bad in ["0", "-1", "x", "1.5", ""] {
            assert!(ApplicationId::try_from(bad.to_owned()).is_err(), "{bad}");
        }
        for ok in ["API_KEY", "_x", "a1", &"a".repeat(128)] {
            assert!(CredentialName::try_from(ok.to_owned()).is_ok(), "{ok}");
        }
        for bad in ["", "1A", "A-B", "é", &"a".repeat(129)] {
            assert!(CredentialName::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }
}
