//! Rate limits per account and resource: a token bucket each (GCRA, from `governor`). A
//! request counts once, when it is admitted, however long its long-poll or stream then lasts.

use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::auth::resource::Resource;
use crate::config::RateLimit;
use crate::ids::AccountId;

/// The buckets of every account and resource.
pub struct RateLimits {
    limiter: DefaultKeyedRateLimiter<(AccountId, Resource)>,
    clock: DefaultClock,
}

impl RateLimits {
    /// Buckets of `limit`.
    pub fn new(limit: RateLimit) -> Self {
        let quota = Quota::per_second(limit.per_second).allow_burst(limit.burst);
        Self {
            limiter: DefaultKeyedRateLimiter::keyed(quota),
            clock: DefaultClock::default(),
        }
    }

    /// Admits one request of `account` on `resource`, or says how long to wait before the
    /// next one would be admitted.
    pub fn admit(&self, account: &AccountId, resource: Resource) -> Result<(), Duration> {
        self.limiter
            .check_key(&(account.clone(), resource))
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    #[test]
    fn a_burst_is_admitted_then_the_next_request_waits_and_buckets_are_separate() {
        let limits = RateLimits::new(RateLimit {
            per_second: NonZeroU32::new(1).unwrap(),
            burst: NonZeroU32::new(2).unwrap(),
        });
        assert!(
            limits
                .admit(&AccountId::verified("alice"), Resource::Agent)
                .is_ok()
        );
        assert!(
            limits
                .admit(&AccountId::verified("alice"), Resource::Agent)
                .is_ok()
        );
        let wait = limits
            .admit(&AccountId::verified("alice"), Resource::Agent)
            .unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert!(
            limits
                .admit(&AccountId::verified("alice"), Resource::Pipeline)
                .is_ok(),
            "another resource"
        );
        assert!(
            limits
                .admit(&AccountId::verified("bob"), Resource::Agent)
                .is_ok(),
            "another account"
        );
    }
}
