//! The wall clock, in the units the interface uses: the system's, moved by an offset that a test
//! sets once per process (`intent-server --clock-offset`) to read data made on another day.

use std::sync::atomic::{AtomicI64, Ordering};

/// Milliseconds added to the system's wall clock; 0 unless [`set_offset`] moved it.
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// Moves this process's wall clock by `seconds` (negative: into the past). Only the wall clock
/// moves: timers and timeouts keep real time.
pub fn set_offset(seconds: i64) {
    OFFSET_MS.store(seconds.saturating_mul(1000), Ordering::Relaxed);
}

/// Unix seconds now.
pub fn now() -> i64 {
    now_ms() / 1000
}

/// `duration` in whole seconds, as the interface's timestamps count them; a duration too long
/// for them saturates at half the range, so that adding it to a timestamp cannot overflow.
pub fn seconds(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX / 2)
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970");
    let system =
        i64::try_from(since_epoch.as_millis()).expect("milliseconds since 1970 fit in i64");
    system.saturating_add(OFFSET_MS.load(Ordering::Relaxed))
}
