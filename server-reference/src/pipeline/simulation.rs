//! What a simulation reports: the changes a run of a Build's actions observed on a devnet, judged
//! by the guards (known chain, zero address, sufficient balance, success, unlimited approval,
//! expiry window) into a [`PipelineSimulation`] that passes unless a guard failed.

use intent_models::error::ConversionError;
use intent_models::{
    PipelineApprovalChange, PipelineBalanceChange, PipelineFeeEstimate, PipelineGasEstimate,
    PipelineGuardResult, PipelineGuardResultStatus as GuardStatus, PipelineLog, PipelineSimulation,
    PipelineSimulationStatus,
};

/// Seconds before `expiresAt` under which the expiry guard warns.
const EXPIRY_WARNING_SECS: i64 = 60;

/// What a run observed, before its guards judge it.
pub(super) struct Observed {
    pub(super) balance_changes: Vec<PipelineBalanceChange>,
    pub(super) approvals: Vec<PipelineApprovalChange>,
    pub(super) fees: Vec<PipelineFeeEstimate>,
    pub(super) logs: Vec<PipelineLog>,
    pub(super) warnings: Vec<String>,
    pub(super) gas: Option<PipelineGasEstimate>,
}

/// The simulation of `observed`: passed unless one of `guards` failed.
pub(super) fn simulation(
    observed: Observed,
    guards: Vec<PipelineGuardResult>,
) -> Result<PipelineSimulation, ConversionError> {
    let failed = guards.iter().any(|g| g.status == GuardStatus::Failed);
    PipelineSimulation::builder()
        .status(if failed {
            PipelineSimulationStatus::Failed
        } else {
            PipelineSimulationStatus::Passed
        })
        .balance_changes(observed.balance_changes)
        .approvals(observed.approvals)
        .fees(observed.fees)
        .logs(observed.logs)
        .warnings(observed.warnings)
        .guards(guards)
        .gas(observed.gas)
        .try_into()
}

/// The first failure each guard of a run saw.
#[derive(Default)]
pub(super) struct Guards {
    pub(super) known_chain: Option<String>,
    pub(super) zero_address: Option<String>,
    pub(super) sufficient_balance: Option<String>,
    pub(super) succeeded: Option<String>,
}

impl Guards {
    /// Every guard's result, in the order they are reported: these four, then whether an
    /// unlimited approval was given (a warning), then the lifetime left before `expires_at`.
    pub(super) fn results(
        self,
        unlimited_approval: Option<String>,
        expires_at: i64,
        now: i64,
    ) -> Result<Vec<PipelineGuardResult>, ConversionError> {
        [
            guard("known_chain", self.known_chain, GuardStatus::Failed),
            guard("zero_address", self.zero_address, GuardStatus::Failed),
            guard(
                "sufficient_balance",
                self.sufficient_balance,
                GuardStatus::Failed,
            ),
            guard("simulation_succeeded", self.succeeded, GuardStatus::Failed),
            guard(
                "unlimited_approval",
                unlimited_approval,
                GuardStatus::Warning,
            ),
            expiry_guard(expires_at, now),
        ]
        .into_iter()
        .collect()
    }
}

/// A guard result: passed, or `status` (failed or warning) with the reason.
fn guard(
    name: &str,
    failure: Option<String>,
    status: GuardStatus,
) -> Result<PipelineGuardResult, ConversionError> {
    PipelineGuardResult::builder()
        .name(name)
        .status(if failure.is_some() {
            status
        } else {
            GuardStatus::Passed
        })
        .message(failure)
        .try_into()
}

/// The lifetime left before `expires_at`: failed once passed (as a commit is refused only
/// after `expires_at`, not in its second), a warning when short.
fn expiry_guard(expires_at: i64, now: i64) -> Result<PipelineGuardResult, ConversionError> {
    let left = expires_at.saturating_sub(now);
    PipelineGuardResult::builder()
        .name("expiry_window")
        .status(if left < 0 {
            GuardStatus::Failed
        } else if left < EXPIRY_WARNING_SECS {
            GuardStatus::Warning
        } else {
            GuardStatus::Passed
        })
        .message(format!("{} seconds left before expiresAt", left.max(0)))
        .try_into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expiry_guard_fails_only_after_the_second_of_expires_at_as_a_commit_is_refused() {
        let status = |now| expiry_guard(100, now).expect("a guard").status;
        assert_eq!(status(100 - EXPIRY_WARNING_SECS), GuardStatus::Passed);
        assert_eq!(status(99), GuardStatus::Warning);
        assert_eq!(status(100), GuardStatus::Warning);
        assert_eq!(status(101), GuardStatus::Failed);
    }
}
