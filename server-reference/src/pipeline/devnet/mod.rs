//! The devnets behind simulation and custody: an EVM chain executed with `revm` ([`evm`]) and
//! an SVM cluster executed with `litesvm` ([`svm`]), both in memory. Simulations run on a copy
//! of a chain's state; a commit is prepared on a copy under the chain's lock and applied once its
//! caller recorded it durably; the devnets never see the store. On start, the committed actions
//! are replayed in order, so the state survives restarts.

pub mod evm;
pub mod svm;

use intent_models::{
    PipelineAction, PipelineBuild, PipelineChain, PipelineGasEstimate, PipelineGuardResult,
    PipelineGuardResultStatus as GuardStatus, PipelineSimulation, PipelineSimulationStatus,
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{Mutex, MutexGuard};

/// Seconds before `expiresAt` under which the expiry guard warns.
const EXPIRY_WARNING_SECS: i64 = 60;

/// A chain's state, which executes actions.
trait Ledger: Clone {
    /// Executes `actions` in order, keeping each one's changes, and describes them.
    fn run(&mut self, actions: &[PipelineAction], expires_at: i64, now: i64) -> Run;
}

/// A simulation and the transaction ids of a run.
struct Run {
    simulation: PipelineSimulation,
    transactions: Vec<(u64, String)>,
}

/// The devnet states, shared by simulations and commits.
pub struct Devnet {
    evm: Mutex<evm::Db>,
    svm: Mutex<svm::Cluster>,
}

impl Devnet {
    /// The genesis states with `committed` (the actions of every committed Build, as JSON, in
    /// commit order) replayed on them.
    pub fn replay(committed: &[String]) -> Self {
        let mut evm = evm::genesis();
        let mut svm = svm::Cluster::genesis();
        for actions in committed {
            match serde_json::from_str::<Vec<PipelineAction>>(actions) {
                Ok(actions) => {
                    if actions.first().map(chain_of) == Some(PipelineChain::Svm) {
                        svm.run(&actions, i64::MAX, 0);
                    } else {
                        evm.run(&actions, i64::MAX, 0);
                    }
                }
                Err(error) => tracing::error!(%error, "a committed Build's actions do not parse"),
            }
        }
        Self {
            evm: Mutex::new(evm),
            svm: Mutex::new(svm),
        }
    }

    /// Simulates `actions` on `chain`'s current state, leaving it unchanged.
    pub async fn simulate(
        &self,
        chain: PipelineChain,
        actions: &[PipelineAction],
        expires_at: i64,
        now: i64,
    ) -> PipelineSimulation {
        match chain {
            PipelineChain::Evm => simulate_on(&self.evm, actions, expires_at, now).await,
            PipelineChain::Svm => simulate_on(&self.svm, actions, expires_at, now).await,
        }
    }

    /// Locks `chain` and re-simulates `build` on a copy of its state. The lock is held until the
    /// [`Prepared`] commit is applied or dropped, so that nothing else changes the chain while
    /// the caller records the commit.
    pub async fn prepare(
        &self,
        chain: PipelineChain,
        build: &PipelineBuild,
        now: i64,
    ) -> Prepared<'_> {
        match chain {
            PipelineChain::Evm => prepare_on(&self.evm, build, now, Pending::Evm).await,
            PipelineChain::Svm => prepare_on(&self.svm, build, now, Pending::Svm).await,
        }
    }
}

/// A commit re-simulated on a locked chain, not yet applied.
pub struct Prepared<'a> {
    /// The re-simulation that admits (or refuses) the Build.
    pub simulation: PipelineSimulation,
    /// The transaction id of each step.
    pub transactions: Vec<(u64, String)>,
    pending: Pending<'a>,
}

/// The locked state of a chain and its state after the commit.
enum Pending<'a> {
    Evm(MutexGuard<'a, evm::Db>, Box<evm::Db>),
    Svm(MutexGuard<'a, svm::Cluster>, Box<svm::Cluster>),
}

impl Prepared<'_> {
    /// Makes the re-simulated state the chain's state and releases the lock; gives back the
    /// simulation and the transaction id of each step.
    pub fn apply(self) -> (PipelineSimulation, Vec<(u64, String)>) {
        match self.pending {
            Pending::Evm(mut state, next) => *state = *next,
            Pending::Svm(mut state, next) => *state = *next,
        }
        (self.simulation, self.transactions)
    }
}

/// The chain an action runs on.
pub fn chain_of(action: &PipelineAction) -> PipelineChain {
    match action {
        PipelineAction::Evm { .. } => PipelineChain::Evm,
        PipelineAction::Svm { .. } => PipelineChain::Svm,
    }
}

async fn simulate_on<L: Ledger>(
    state: &Mutex<L>,
    actions: &[PipelineAction],
    expires_at: i64,
    now: i64,
) -> PipelineSimulation {
    let mut copy = state.lock().await.clone();
    copy.run(actions, expires_at, now).simulation
}

async fn prepare_on<'a, L: Ledger>(
    state: &'a Mutex<L>,
    build: &PipelineBuild,
    now: i64,
    pending: fn(MutexGuard<'a, L>, Box<L>) -> Pending<'a>,
) -> Prepared<'a> {
    let state = state.lock().await;
    let mut next = Box::new(state.clone());
    let run = next.run(&build.actions, build.expires_at, now);
    Prepared {
        simulation: run.simulation,
        transactions: run.transactions,
        pending: pending(state, next),
    }
}

/// What a run observed, before its guards judge it.
struct Observed {
    balance_changes: Vec<Value>,
    approvals: Vec<Value>,
    fees: Vec<Value>,
    logs: Vec<Value>,
    warnings: Vec<String>,
    gas: Option<PipelineGasEstimate>,
}

/// The simulation of `observed`: passed unless one of `guards` failed.
fn simulation(observed: Observed, guards: Vec<PipelineGuardResult>) -> PipelineSimulation {
    let failed = guards.iter().any(|g| g.status == GuardStatus::Failed);
    PipelineSimulation {
        status: if failed {
            PipelineSimulationStatus::Failed
        } else {
            PipelineSimulationStatus::Passed
        },
        balance_changes: entries(observed.balance_changes),
        approvals: entries(observed.approvals),
        fees: entries(observed.fees),
        logs: entries(observed.logs),
        warnings: observed.warnings,
        guards,
        gas: observed.gas,
    }
}

/// Decoded entries as their models; the decoders write only what the models allow.
fn entries<T: DeserializeOwned>(values: Vec<Value>) -> Vec<T> {
    values
        .into_iter()
        .map(|value| serde_json::from_value(value).expect("a decoded entry matches its model"))
        .collect()
}

/// The first failure each guard of a run saw.
#[derive(Default)]
struct Guards {
    known_chain: Option<String>,
    zero_address: Option<String>,
    sufficient_balance: Option<String>,
    succeeded: Option<String>,
}

impl Guards {
    /// Every guard's result, in the order they are reported: these four, then whether an
    /// unlimited approval was given (a warning), then the lifetime left before `expires_at`.
    fn results(
        self,
        unlimited_approval: Option<String>,
        expires_at: i64,
        now: i64,
    ) -> Vec<PipelineGuardResult> {
        vec![
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
    }
}

/// A guard result: passed, or `status` (failed or warning) with the reason.
fn guard(name: &str, failure: Option<String>, status: GuardStatus) -> PipelineGuardResult {
    PipelineGuardResult {
        name: name.to_owned(),
        status: if failure.is_some() {
            status
        } else {
            GuardStatus::Passed
        },
        message: failure,
    }
}

/// The lifetime left before `expires_at`: failed once passed, a warning when short.
fn expiry_guard(expires_at: i64, now: i64) -> PipelineGuardResult {
    let left = expires_at.saturating_sub(now);
    PipelineGuardResult {
        name: "expiry_window".to_owned(),
        status: if left <= 0 {
            GuardStatus::Failed
        } else if left < EXPIRY_WARNING_SECS {
            GuardStatus::Warning
        } else {
            GuardStatus::Passed
        },
        message: Some(format!("{} seconds left before expiresAt", left.max(0))),
    }
}
