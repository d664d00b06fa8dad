//! The devnets behind simulation and custody: an EVM chain executed with `revm` ([`evm`]) and
//! an SVM cluster executed with `litesvm` ([`svm`]), both in memory. Simulations run on a copy
//! of a chain's state; a commit applies the copy only once its simulation passed and the commit
//! is recorded durably. On start, the committed actions are replayed in order, so the state
//! survives restarts.

pub mod evm;
pub mod svm;

use intent_models::{ErrorCode, PipelineAction, PipelineBuild, PipelineChain, PipelineSimulation};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::error::ApiError;
use crate::store::{self, Store};

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

/// What a commit did.
pub struct Committed {
    /// The re-simulation that admitted (or refused) the Build.
    pub simulation: PipelineSimulation,
    /// The transaction id of each step, when it was committed.
    pub transactions: Vec<(u64, String)>,
}

impl Devnet {
    /// The genesis states with every commit recorded in `store` replayed on them.
    pub async fn replay(store: &dyn Store) -> Result<Self, store::Error> {
        let mut evm = evm::genesis();
        let mut svm = svm::Cluster::genesis();
        for actions in store.committed_actions().await? {
            match serde_json::from_str::<Vec<PipelineAction>>(&actions) {
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
        Ok(Self {
            evm: Mutex::new(evm),
            svm: Mutex::new(svm),
        })
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

    /// Re-simulates `build` on `chain` and, when it passes, records the commit in `store` and
    /// applies it.
    pub async fn commit(
        &self,
        chain: PipelineChain,
        store: &dyn Store,
        build: &PipelineBuild,
        owner: &str,
        now: i64,
    ) -> Result<Committed, ApiError> {
        match chain {
            PipelineChain::Evm => commit_on(&self.evm, store, build, owner, now).await,
            PipelineChain::Svm => commit_on(&self.svm, store, build, owner, now).await,
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

async fn commit_on<L: Ledger>(
    state: &Mutex<L>,
    store: &dyn Store,
    build: &PipelineBuild,
    owner: &str,
    now: i64,
) -> Result<Committed, ApiError> {
    let mut state = state.lock().await;
    let mut copy = state.clone();
    let run = copy.run(&build.actions, build.expires_at, now);
    if run.simulation.status != intent_models::PipelineSimulationStatus::Passed {
        return Ok(Committed {
            simulation: run.simulation,
            transactions: Vec::new(),
        });
    }
    let actions = serde_json::to_string(&build.actions).expect("actions serialize");
    if !store
        .record_commit(&build.digest, owner, &actions, now)
        .await?
    {
        return Err(ApiError::new(
            ErrorCode::BuildInvalid,
            "this Build was committed already",
        ));
    }
    *state = copy;
    Ok(Committed {
        simulation: run.simulation,
        transactions: run.transactions,
    })
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
