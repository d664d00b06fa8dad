//! What a check finds when it does not pass, and the helpers that say so.

/// Why a check did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The deployment broke the requirement.
    Fail(String),
    /// The suite could not do its part.
    Error(String),
    /// The check cannot run against this deployment or with these settings.
    Skip(String),
}

/// What a check's run concludes: `Ok` is a pass.
pub type Verdict = Result<(), Finding>;

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Verdict {
    if condition {
        Ok(())
    } else {
        Err(Finding::Fail(message()))
    }
}

/// A skip with `reason`.
pub fn skip<T>(reason: impl Into<String>) -> Result<T, Finding> {
    Err(Finding::Skip(reason.into()))
}

/// A failure with `message`.
pub fn fail<T>(message: impl Into<String>) -> Result<T, Finding> {
    Err(Finding::Fail(message.into()))
}
