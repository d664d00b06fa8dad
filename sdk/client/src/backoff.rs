//! Delays between retries: doubling from a first delay up to a ceiling, reset by a success.

use std::time::Duration;

/// Exponential backoff without jitter: `first`, `2 * first`, ... up to `max`.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// The SDK's retry delays: 100 ms doubling up to 5 s.
    pub(crate) fn new() -> Self {
        Self::between(Duration::from_millis(100), Duration::from_secs(5))
    }

    fn between(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The delay before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// After a success: the next failure waits the first delay again.
    pub(crate) fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_ceiling_and_a_reset_starts_over() {
        let mut backoff = Backoff::new();
        let delays: Vec<u128> = (0..8).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_millis(100));
    }
}
