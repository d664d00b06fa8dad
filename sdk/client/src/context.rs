//! What every call of the generated client carries ([`ClientContext`]), which progenitor names
//! as the client's inner type.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::auth::Tokens;
use crate::retry::RetryPolicy;
use crate::sealed::Jwks;

/// What every call of the generated [`Client`](crate::raw::Client) carries: the token sources, the retry policy, the
/// per-request timeout and the deadline of a turn. [`Intent`](crate::Intent)'s builder sets it
/// up; the default sends calls without a token, with the default [`RetryPolicy`], no timeout
/// and a 5-minute turn deadline.
#[derive(Clone, Debug)]
pub struct ClientContext {
    pub(crate) tokens: Tokens,
    pub(crate) retry: RetryPolicy,
    pub(crate) timeout: Option<Duration>,
    pub(crate) turn_deadline: Duration,
    /// The deployment's published keys, once fetched; every clone of the client shares them.
    pub(crate) jwks: Arc<Mutex<Option<Jwks>>>,
}

/// How long a turn may take to settle unless the builder says otherwise.
pub(crate) const TURN_DEADLINE: Duration = Duration::from_secs(300);

impl Default for ClientContext {
    fn default() -> Self {
        Self {
            tokens: Tokens::default(),
            retry: RetryPolicy::default(),
            timeout: None,
            turn_deadline: TURN_DEADLINE,
            jwks: Arc::default(),
        }
    }
}
