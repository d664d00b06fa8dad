//! The wall clock, in the units the interface uses.

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
    i64::try_from(since_epoch.as_millis()).expect("milliseconds since 1970 fit in i64")
}
