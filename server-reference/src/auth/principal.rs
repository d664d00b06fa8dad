//! Who is calling: the principal the gateway derives from a verified bearer token. Services take
//! it (or its account) and never see a token.

use std::sync::Arc;
use std::time::Duration;

use crate::auth::token::AccessClaims;
use crate::ids::AccountId;

/// The authenticated caller. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The account: the only ownership key.
    pub account: AccountId,
    /// Granted scopes.
    pub scopes: Arc<[String]>,
    /// The token's `exp` (Unix seconds): it is refused from the next second on.
    pub expires_at: i64,
}

impl Principal {
    /// The caller a verified token's claims name.
    pub fn of(claims: &AccessClaims) -> Self {
        Self {
            account: AccountId::verified(&claims.sub),
            scopes: claims.scope.split(' ').map(str::to_owned).collect(),
            expires_at: claims.exp,
        }
    }

    /// Whether `scope` is granted.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|granted| granted == scope)
    }

    /// How long the token stays valid from now: what a response that lasts (an SSE stream)
    /// may outlive of it.
    pub fn remaining(&self) -> Duration {
        let end_ms = self.expires_at.saturating_add(1).saturating_mul(1000);
        let left = end_ms.saturating_sub(crate::clock::now_ms());
        Duration::from_millis(u64::try_from(left).unwrap_or(0))
    }
}
