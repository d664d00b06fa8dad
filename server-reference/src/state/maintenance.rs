//! What runs beside the server while it lives: the clean-up of what expired, and the leases of
//! the turns this process runs.

use std::sync::Weak;
use std::time::Duration;

use super::Inner;
use crate::clock;

/// Every `interval` while the server lives: removes expired authorization codes and device
/// grants, idempotency keys past their lifetime, refresh-token families past expiry, and the
/// wake-up channels of sessions nobody follows.
pub(super) async fn clean_up(state: Weak<Inner>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(state) = state.upgrade() else {
            return;
        };
        let now = clock::now();
        let before = |age: Duration| now - clock::seconds(age);
        let config = &state.config;
        match state
            .store
            .purge(
                before(config.expired_kept),
                before(config.idempotency_key_ttl),
            )
            .await
        {
            Ok(purged) => tracing::debug!(?purged, "cleaned up"),
            Err(error) => {
                tracing::error!(error = &error as &dyn std::error::Error, "cleaning up")
            }
        }
        state.log.forget_idle_readers();
    }
}

/// While the server lives: renews the leases of the turns this process runs three times per
/// `lease`, and carries on the processing turns whose runner is gone (a process that died, or
/// one that handed them over).
pub(super) async fn keep_turns(state: Weak<Inner>, lease: Duration) {
    let mut ticks = tokio::time::interval(lease / 3);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(state) = state.upgrade() else {
            return;
        };
        if let Err(error) = state.store.renew_leases(clock::now_ms()).await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "renewing turn leases"
            );
        }
        if let Err(error) = state.turns.resume_orphans().await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "carrying on orphaned turns"
            );
        }
    }
}
