//! The server's secrets in the data dir: the Ed25519 `signing` keys and their JWKS, the
//! `keyring` of rotated secrets, and the `sealer` of credential values at rest.

pub(crate) mod keyring;
pub(crate) mod sealer;
pub(crate) mod signing;
