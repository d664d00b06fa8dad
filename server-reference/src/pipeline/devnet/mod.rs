//! The devnets behind simulation and custody: an EVM chain executed with `revm` ([`evm`]) and
//! an SVM cluster executed with `litesvm` ([`svm`]), both in memory. Simulations run on a copy
//! of a chain's state; a commit is prepared on a copy under the chain's lock and applied once its
//! caller recorded it durably; the devnets never see the store. On start, the committed actions
//! are replayed in order, so the state survives restarts.

pub mod evm;
pub mod svm;

use intent_models::{PipelineAction, PipelineBuild, PipelineChain, PipelineSimulation};
use serde_json::{Value, json};
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
    /// Makes the re-simulated state the chain's state and releases the lock.
    pub fn apply(self) {
        match self.pending {
            Pending::Evm(mut state, next) => *state = *next,
            Pending::Svm(mut state, next) => *state = *next,
        }
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

/// A guard result: passed, or `status` (failed or warning) with the reason.
fn guard(name: &str, failure: Option<String>, status: &str) -> Value {
    match failure {
        Some(message) => json!({ "name": name, "status": status, "message": message }),
        None => json!({ "name": name, "status": "passed" }),
    }
}

/// The lifetime left before `expires_at`: failed once passed, a warning when short.
fn expiry_guard(expires_at: i64, now: i64) -> Value {
    let left = expires_at.saturating_sub(now);
    json!({
        "name": "expiry_window",
        "status": if left <= 0 { "failed" } else if left < EXPIRY_WARNING_SECS { "warning" } else { "passed" },
        "message": format!("{} seconds left before expiresAt", left.max(0)),
    })
}

/// `passed` when no guard failed.
fn status(guards: &[Value]) -> &'static str {
    if guards.iter().all(|g| g["status"] != "failed") {
        "passed"
    } else {
        "failed"
    }
}
