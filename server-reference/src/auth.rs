//! Who is calling: the principal the gateway derives from a verified bearer token. Services take
//! it (or its account) and never see a token.

/// The authenticated caller.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The account: the only ownership key.
    pub account: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
}
