//! [`RetryPolicy`]: which failed calls are sent again, and after how long.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Method, StatusCode};

/// How the client sends a call again, in the manner of the AWS SDK's standard mode. It governs
/// every retry of the SDK with one backoff: the calls of the generated client (a resolution's
/// wait for a duplicate still in flight among them) and a follower's reconnections. A follower
/// sends each call once and counts its failures in a row as one call's attempts: it hands out
/// the error when a call would have given up, and reconnects for as long as it follows. With
/// [`none`](Self::none) a call is sent once and a follower ends at its first failure.
///
/// - what is retried: a request that never reached the server (a connect error), the answers
///   408, 429, 500, 502, 503 and 504, a timeout, a connection lost before the answer was whole
///   (an instance that restarts, a load balancer that cuts it), and a 409
///   `idempotency_in_flight` to a call with an `Idempotency-Key` (its duplicate still running);
/// - which requests: GET, HEAD, PUT and DELETE always; a POST only when it carries an
///   `Idempotency-Key`, or when it never reached the server;
/// - how long to wait: the answer's `Retry-After` (in seconds) when it has one, up to
///   [`max_retry_after`](Self::max_retry_after); otherwise exponential backoff with full jitter,
///   a random delay below `initial × 2^(retry − 1)`, capped at `max_backoff`.
///
/// ```
/// use std::time::Duration;
/// use intent_sdk::RetryPolicy;
///
/// let patient = RetryPolicy::default()
///     .max_attempts(6)
///     .backoff(Duration::from_millis(200), Duration::from_secs(10));
/// let never = RetryPolicy::none();
/// # let _ = (patient, never);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    max_retry_after: Duration,
    /// Whether a backoff is a random delay below its cap (always, but in this crate's tests).
    jitter: bool,
}

impl Default for RetryPolicy {
    /// Three attempts, backoff from 100 ms capped at 5 s, a `Retry-After` of up to 60 s.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// Every call is sent once.
    pub fn none() -> Self {
        Self::default().max_attempts(1)
    }

    /// Sends a call at most `attempts` times in all (at least once).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Backoff from `initial`, doubling, capped at `max`.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max.max(initial);
        self
    }

    /// The longest `Retry-After` waited out; an answer asking for longer is returned as it is.
    pub fn max_retry_after(mut self, longest: Duration) -> Self {
        self.max_retry_after = longest;
        self
    }

    /// Whether calls may be sent more than once at all.
    pub(crate) fn retries(&self) -> bool {
        self.max_attempts > 1
    }

    /// Each backoff its whole cap, for tests that count the delays.
    #[cfg(test)]
    pub(crate) fn without_jitter(mut self) -> Self {
        self.jitter = false;
        self
    }

    /// How long a follower waits for an answer's `Retry-After` of `asked`: at most
    /// [`max_retry_after`](Self::max_retry_after), past which a call is not sent again.
    pub(crate) fn retry_after(&self, asked: Duration) -> Duration {
        asked.min(self.max_retry_after)
    }

    /// Whether `failures` in a row end what one call's attempts allow, so that a follower hands
    /// out the last of them.
    pub(crate) fn spent(&self, failures: u32) -> bool {
        failures.is_multiple_of(self.max_attempts)
    }

    /// The delay before sending again a call that was sent `attempt` times and ended in
    /// `outcome`, or `None` when it is not sent again. `keyed`: the call's method is
    /// not a safe one and it carries an `Idempotency-Key`.
    pub(crate) fn delay(
        &self,
        attempt: u32,
        method: &Method,
        keyed: bool,
        outcome: Attempt<'_>,
    ) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let repeatable = keyed
            || matches!(
                *method,
                Method::GET | Method::HEAD | Method::PUT | Method::DELETE
            );
        let retry_after = match outcome {
            Attempt::NotSent => None,
            Attempt::TimedOut | Attempt::Failed if repeatable => None,
            Attempt::InFlight if keyed => None,
            Attempt::Answered(status, headers) if repeatable && retried_status(status.as_u16()) => {
                retry_after(headers)
            }
            _ => return None,
        };
        match retry_after {
            Some(wait) if wait > self.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(self.backoff_delay(attempt)),
        }
    }

    /// The backoff before retry number `retry` (from 1), with full jitter: a random delay
    /// below `initial × 2^(retry − 1)`, capped at `max_backoff`.
    pub(crate) fn backoff_delay(&self, retry: u32) -> Duration {
        let ceiling = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(retry.saturating_sub(1)))
            .min(self.max_backoff);
        if !self.jitter {
            return ceiling;
        }
        let mut bytes = [0u8; 8];
        // Without an entropy source the full delay is waited: slower, never wrong.
        if getrandom::fill(&mut bytes).is_err() {
            return ceiling;
        }
        let fraction = u64::from_le_bytes(bytes) as f64 / u64::MAX as f64;
        ceiling.mul_f64(fraction)
    }
}

/// How one attempt of a call ended, as far as retrying goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Attempt<'a> {
    /// The request never reached the server (a connect error).
    NotSent,
    /// No answer in time.
    TimedOut,
    /// An answer, with its headers.
    Answered(StatusCode, &'a HeaderMap),
    /// Any other failure, such as the connection lost before the answer was whole.
    Failed,
    /// A 409 `idempotency_in_flight`: the call's duplicate is still being processed.
    InFlight,
}

impl<'a> Attempt<'a> {
    /// The outcome of `sent`.
    pub(crate) fn of(sent: &'a Result<reqwest::Response, reqwest::Error>) -> Self {
        match sent {
            Ok(response) => Self::Answered(response.status(), response.headers()),
            Err(error) if error.is_connect() => Self::NotSent,
            Err(error) if error.is_timeout() => Self::TimedOut,
            Err(_) => Self::Failed,
        }
    }
}

/// Whether the policy retries an answer of `status`.
pub(crate) fn retried_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// A `Retry-After` in whole seconds (an HTTP date is not read).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotent_calls_are_retried_on_the_statuses_and_a_post_only_with_a_key_or_unsent() {
        let policy = RetryPolicy::default();
        let none = HeaderMap::new();
        let unavailable = Attempt::Answered(StatusCode::SERVICE_UNAVAILABLE, &none);
        let delay = |method: Method, keyed: bool, outcome: Attempt<'_>| {
            policy.delay(1, &method, keyed, outcome)
        };
        assert!(delay(Method::GET, false, unavailable).is_some());
        assert!(delay(Method::DELETE, false, unavailable).is_some());
        assert!(delay(Method::POST, false, unavailable).is_none());
        assert!(delay(Method::POST, true, unavailable).is_some());
        assert!(delay(Method::POST, false, Attempt::NotSent).is_some());
        assert!(delay(Method::POST, false, Attempt::TimedOut).is_none());
        assert!(
            delay(Method::GET, false, Attempt::Failed).is_some(),
            "a lost connection"
        );
        assert!(delay(Method::POST, true, Attempt::Failed).is_some());
        assert!(delay(Method::POST, false, Attempt::Failed).is_none());
        let internal = Attempt::Answered(StatusCode::INTERNAL_SERVER_ERROR, &none);
        assert!(delay(Method::GET, false, internal).is_some());
        let unimplemented = Attempt::Answered(StatusCode::NOT_IMPLEMENTED, &none);
        assert!(delay(Method::GET, false, unimplemented).is_none());
        assert!(delay(Method::POST, true, Attempt::InFlight).is_some());
        assert!(delay(Method::POST, false, Attempt::InFlight).is_none());
        assert!(
            policy.delay(3, &Method::GET, false, unavailable).is_none(),
            "3 attempts"
        );
        let spent: Vec<u32> = (1..=7).filter(|failures| policy.spent(*failures)).collect();
        assert_eq!(
            spent,
            [3, 6],
            "every third failure in a row spends a call's attempts"
        );
        let never = RetryPolicy::none();
        assert!(!never.retries());
        assert!(never.spent(1));
        assert!(
            never
                .delay(1, &Method::GET, false, Attempt::NotSent)
                .is_none()
        );
    }

    #[test]
    fn retry_after_is_honoured_up_to_its_limit_and_backoff_is_jittered_below_its_cap() {
        let policy =
            RetryPolicy::default().backoff(Duration::from_millis(100), Duration::from_millis(300));
        let mut asked = HeaderMap::new();
        asked.insert(RETRY_AFTER, "2".parse().unwrap());
        let limited = Attempt::Answered(StatusCode::TOO_MANY_REQUESTS, &asked);
        assert_eq!(
            policy.delay(1, &Method::GET, false, limited),
            Some(Duration::from_secs(2))
        );
        let short = policy.clone().max_retry_after(Duration::from_secs(1));
        assert_eq!(short.delay(1, &Method::GET, false, limited), None);
        let delays: Vec<Duration> = (0..200).map(|_| policy.backoff_delay(5)).collect();
        assert!(
            delays
                .iter()
                .all(|delay| *delay <= Duration::from_millis(300))
        );
        assert!(
            delays.iter().any(|delay| *delay != delays[0]),
            "the delays are random"
        );
        assert!(policy.backoff_delay(1) <= Duration::from_millis(100));
    }
}
