//! The devnets behind simulation and custody: an EVM chain executed with `revm` ([`evm`]) and
//! an SVM cluster executed with `litesvm` ([`svm`]), both in memory. The store keeps the one
//! ordered log of committed Builds per chain, which every process of a deployment shares; before
//! it simulates or commits, a devnet catches up by replaying the commits it has not applied. A
//! commit is prepared on a copy under the chain's lock and applied once the store recorded it
//! after the last commit the copy includes; when another process committed first, the caller
//! catches up and prepares again.

pub mod evm;
pub mod svm;

use intent_models::error::ConversionError;
use intent_models::{PipelineAction, PipelineBuild, PipelineChain, PipelineSimulation};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use crate::pipeline;
use crate::store::{self, Store};

/// A chain's state, which executes actions.
trait Ledger: Clone {
    /// The state before any commit.
    fn genesis() -> Self;
    /// Executes `actions` in order, keeping each one's changes, and describes them.
    fn run(
        &mut self,
        actions: &[PipelineAction],
        expires_at: i64,
        now: i64,
    ) -> Result<Run, ConversionError>;
}

/// A simulation and the transaction ids of a run.
struct Run {
    simulation: PipelineSimulation,
    transactions: Vec<(u64, String)>,
}

/// A chain's state and the seq of the last commit it includes.
struct Synced<L> {
    ledger: L,
    applied: i64,
}

/// The devnet states, shared by simulations and commits. Each chain's genesis is made on its
/// first use: it costs megabytes (programs, contracts, funded accounts) that a server which is
/// never asked for that chain would hold for nothing.
#[derive(Default)]
pub struct Devnet {
    evm: Mutex<Option<Synced<evm::Db>>>,
    svm: Mutex<Option<Synced<svm::Cluster>>>,
}

impl Devnet {
    /// Simulates `actions` on `chain`'s current state (caught up with `store`), leaving it
    /// unchanged.
    pub async fn simulate(
        &self,
        chain: PipelineChain,
        actions: &[PipelineAction],
        expires_at: i64,
        now: i64,
        store: &Store,
    ) -> pipeline::Result<PipelineSimulation> {
        let run = match chain {
            PipelineChain::Evm => {
                let mut copy = synced(&self.evm, chain, store).await?.ledger.clone();
                copy.run(actions, expires_at, now)
            }
            PipelineChain::Svm => {
                let mut copy = synced(&self.svm, chain, store).await?.ledger.clone();
                copy.run(actions, expires_at, now)
            }
        };
        Ok(run?.simulation)
    }

    /// Locks `chain`, catches it up with `store` and re-simulates `build` on a copy of its
    /// state. The lock is held until the [`Prepared`] commit is applied or dropped, so that
    /// nothing else in this process changes the chain while the caller records the commit.
    pub async fn prepare(
        &self,
        chain: PipelineChain,
        build: &PipelineBuild,
        now: i64,
        store: &Store,
    ) -> pipeline::Result<Prepared<'_>> {
        Ok(match chain {
            PipelineChain::Evm => prepare_on(
                synced(&self.evm, chain, store).await?,
                build,
                now,
                Pending::Evm,
            )?,
            PipelineChain::Svm => prepare_on(
                synced(&self.svm, chain, store).await?,
                build,
                now,
                Pending::Svm,
            )?,
        })
    }
}

/// Locks `state`, made at genesis when it is the first use, and replays on it the commits on
/// `chain` it has not applied.
async fn synced<'a, L: Ledger>(
    state: &'a Mutex<Option<Synced<L>>>,
    chain: PipelineChain,
    store: &Store,
) -> store::Result<Locked<'a, L>> {
    let mut state = MutexGuard::map(state.lock().await, |state| {
        state.get_or_insert_with(|| Synced {
            ledger: L::genesis(),
            applied: 0,
        })
    });
    for (seq, actions) in store
        .commits_after(&chain.to_string(), state.applied)
        .await?
    {
        match serde_json::from_str::<Vec<PipelineAction>>(&actions) {
            Ok(actions) => {
                // Only the state matters here; a run changes it before it describes itself.
                let _description = state.ledger.run(&actions, i64::MAX, 0);
            }
            Err(error) => tracing::error!(%error, seq, "a committed Build's actions do not parse"),
        }
        state.applied = seq;
    }
    Ok(state)
}

/// A commit re-simulated on a locked chain, not yet applied.
pub struct Prepared<'a> {
    /// The re-simulation that admits (or refuses) the Build.
    pub simulation: PipelineSimulation,
    /// The transaction id of each step.
    pub transactions: Vec<(u64, String)>,
    /// The seq of the last commit the re-simulated state includes.
    pub applied_through: i64,
    pending: Pending<'a>,
}

/// A chain's state, locked.
type Locked<'a, L> = MappedMutexGuard<'a, Synced<L>>;

/// The locked state of a chain and its state after the commit.
enum Pending<'a> {
    Evm(Locked<'a, evm::Db>, Box<evm::Db>),
    Svm(Locked<'a, svm::Cluster>, Box<svm::Cluster>),
}

impl Prepared<'_> {
    /// Makes the re-simulated state the chain's state, including commit `seq`, and releases the
    /// lock; gives back the simulation and the transaction id of each step.
    pub fn apply(self, seq: i64) -> (PipelineSimulation, Vec<(u64, String)>) {
        match self.pending {
            Pending::Evm(mut state, next) => {
                state.ledger = *next;
                state.applied = seq;
            }
            Pending::Svm(mut state, next) => {
                state.ledger = *next;
                state.applied = seq;
            }
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

fn prepare_on<'a, L: Ledger>(
    state: Locked<'a, L>,
    build: &PipelineBuild,
    now: i64,
    pending: fn(Locked<'a, L>, Box<L>) -> Pending<'a>,
) -> Result<Prepared<'a>, ConversionError> {
    let mut next = Box::new(state.ledger.clone());
    let run = next.run(&build.actions, build.expires_at, now)?;
    let applied_through = state.applied;
    Ok(Prepared {
        simulation: run.simulation,
        transactions: run.transactions,
        applied_through,
        pending: pending(state, next),
    })
}
