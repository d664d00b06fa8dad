//! The Turns service: starts, interrupts and resolves turns, and drives their runtime.

use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use intent_models::{
    ActionRequest, ActionResolution, ActionResolutionRequest, ActionResult, AgentEvent,
    AgentEventRole, ChatStartRequest, ChatStartResponse, TurnState, TurnStatus,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use super::cursor::ReadPoint;
use super::log::EventLog;
use super::recovery::{self, Input};
use super::runtime::Runtime;
use super::sessions::{DRAFT_SEQ, Entry, SessionCache, Writer};
use super::turn::{self, Recorded, RunEnd, Signal, Turn, TurnError};
use super::{Error, Refusal, Result};
use crate::clock::{now, now_ms, seconds};
use crate::ids::{self, AccountId, ActionId, SessionId};
use crate::metrics::{self, RunEnded};
use crate::pipeline::Pipeline;
use crate::random;
use crate::store::Store;
use crate::store::agent::{
    Appended, IdempotencyBegin, Resolution, Resolved, SessionRecord, TurnStarted,
};

/// Longest title given to a new session, in characters, taken from its first message.
const TITLE_CHARS: usize = 80;

/// Owns the turns running in this process and the runtime that drives them; writes every turn
/// transition through the session cache. Cheap to clone.
#[derive(Clone)]
pub struct Turns(Arc<Inner>);

struct Inner {
    sessions: SessionCache,
    log: EventLog,
    store: Arc<Store>,
    pipeline: Arc<Pipeline>,
    runtime: Arc<dyn Runtime>,
    running: Running,
    /// Seconds an idempotency key is kept.
    key_lifetime: i64,
}

/// An answer recorded under an idempotency key and replayed to a retry.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Resolved(ActionResolution),
    Refused(Refusal),
}

impl Turns {
    /// Turns written through `sessions`, whose cursors `log` issues, run by `runtime`, which
    /// calls `pipeline`; idempotency keys of resolutions are kept for `key_lifetime`.
    pub fn new(
        sessions: SessionCache,
        log: EventLog,
        store: Arc<Store>,
        pipeline: Arc<Pipeline>,
        runtime: Arc<dyn Runtime>,
        key_lifetime: Duration,
    ) -> Self {
        Self(Arc::new(Inner {
            sessions,
            log,
            store,
            pipeline,
            runtime,
            running: Running::default(),
            key_lifetime: seconds(key_lifetime),
        }))
    }

    /// Starts a turn of `account` with `request.message`, in `request.session_id` or in a new
    /// session, and runs it in the background.
    pub async fn start(
        &self,
        account: &AccountId,
        request: &ChatStartRequest,
    ) -> Result<ChatStartResponse> {
        let message: &str = &request.message;
        let session_id = match &request.session_id {
            Some(id) => ids::session_id(id.to_string())
                .map_err(|error| Error::InvalidParameter(error.to_string()))?,
            None => {
                let id = ids::new_session_id();
                self.0
                    .sessions
                    .create(SessionRecord {
                        id: id.clone(),
                        account: account.clone(),
                        title: message.chars().take(TITLE_CHARS).collect(),
                        archived: false,
                        updated_at: now(),
                    })
                    .await?;
                id
            }
        };
        let turn_id = random::id("turn");
        let at = now();
        let events = vec![
            AgentEvent::Message {
                created_at: at,
                role: AgentEventRole::User,
                seq: DRAFT_SEQ,
                text: message.to_owned(),
                turn_id: turn_id.clone(),
            },
            AgentEvent::TurnState {
                created_at: at,
                seq: DRAFT_SEQ,
                state: TurnState::Processing,
                turn_id: turn_id.clone(),
            },
        ];
        let at = match self
            .0
            .sessions
            .start_turn(account, &session_id, &turn_id, events)
            .await?
        {
            // The cursor says how far the log reached, so that a read through another instance
            // of the deployment holds this turn's first events.
            TurnStarted::Started { before_seq, bounds } => {
                ReadPoint::new(before_seq, bounds.last_seq)
            }
            TurnStarted::NoSession => return Err(Error::NoSession(session_id.to_string())),
            TurnStarted::Busy { turn_id } => return Err(Error::TurnInProgress { turn_id }),
        };
        let cursor = self.0.log.cursor(account, &session_id, at);
        self.spawn(
            (account.clone(), session_id.clone(), turn_id.clone()),
            Input::Intent(message.to_owned()),
            VecDeque::new(),
        );
        Ok(ChatStartResponse::builder()
            .cursor(cursor)
            .session_id(session_id)
            .state(TurnState::Processing)
            .turn_id(turn_id)
            .try_into()?)
    }

    /// Interrupts the active turn of `account`'s `session`.
    pub async fn interrupt(&self, account: &AccountId, session: &SessionId) -> Result<TurnStatus> {
        if self.0.sessions.session(account, session).await?.is_none() {
            return Err(Error::NoSession(session.to_string()));
        }
        let (turn_id, _) = self
            .0
            .store
            .active_turn(session)
            .await?
            .ok_or(Error::TurnNotActive)?;
        let entry = Entry {
            turn_id: turn_id.clone(),
            events: vec![AgentEvent::TurnState {
                created_at: now(),
                seq: DRAFT_SEQ,
                state: TurnState::Interrupted,
                turn_id: turn_id.clone(),
            }],
            next_state: Some(TurnState::Interrupted),
            action: None,
        };
        match self
            .0
            .sessions
            .append(session, entry, Writer::Client)
            .await?
        {
            Appended::Done(_) => {
                self.0.running.cancel(&turn_id);
                Ok(TurnStatus::builder()
                    .session_id(session.to_string())
                    .state(TurnState::Interrupted)
                    .turn_id(turn_id)
                    .try_into()?)
            }
            // The turn ended between the two reads.
            Appended::Refused(_) | Appended::NoTurn => Err(Error::TurnNotActive),
        }
    }

    /// Resolves `action` of `account`'s `session` once per idempotency `key`: the same key and
    /// request replay the first answer without a second effect, another request is refused, and
    /// a duplicate in flight is told so.
    pub async fn resolve(
        &self,
        account: &AccountId,
        session: &SessionId,
        action: &ActionId,
        key: &str,
        request: ActionResolutionRequest,
    ) -> Result<ActionResolution> {
        let store = &self.0.store;
        let request_hash = resolution_hash(session, action.as_str(), &request);
        let at = now();
        match store
            .begin_idempotent(account, key, &request_hash, at, at - self.0.key_lifetime)
            .await?
        {
            IdempotencyBegin::Started => {}
            IdempotencyBegin::Replay { answer } => {
                return match serde_json::from_str(&answer) {
                    Ok(Answer::Resolved(resolution)) => Ok(resolution),
                    Ok(Answer::Refused(refusal)) => Err(refusal.into()),
                    Err(error) => {
                        tracing::error!(%error, "a recorded resolution does not parse");
                        Err(Error::Internal)
                    }
                };
            }
            IdempotencyBegin::InFlight => return Err(Error::IdempotencyInFlight),
            IdempotencyBegin::Reused => return Err(Error::IdempotencyKeyReused),
        }
        let answer = match self.apply(account, session, action, request).await {
            Ok(resolution) => Answer::Resolved(resolution),
            Err(Error::Refused(refusal)) => Answer::Refused(refusal),
            Err(error) => {
                // A retry may succeed: the key is released, nothing was recorded.
                store.abandon_idempotent(account, key).await?;
                return Err(error);
            }
        };
        let recorded = serde_json::to_string(&answer).expect("an answer serializes");
        store.finish_idempotent(account, key, &recorded).await?;
        match answer {
            Answer::Resolved(resolution) => Ok(resolution),
            Answer::Refused(refusal) => Err(refusal.into()),
        }
    }

    /// Stops the active turn of `session`, if it runs here.
    pub async fn stop(&self, session: &SessionId) -> Result<()> {
        if let Some((turn_id, _)) = self.0.store.active_turn(session).await? {
            self.0.running.cancel(&turn_id);
        }
        Ok(())
    }

    /// Carries on the processing turns whose runner is gone (its lease ran out, or it handed
    /// them over), after claiming them: each from its last durable step, or, when it cannot go
    /// on, ended `interrupted` with the reason. A draining process claims none.
    pub async fn resume_orphans(&self) -> Result<(), crate::store::Error> {
        if !self.0.running.takes_turns() {
            return Ok(());
        }
        for (session, turn_id) in self.0.store.claim_orphans(now_ms()).await? {
            let Some((account, log)) = self.0.store.session_log(&session).await? else {
                continue;
            };
            let ids = (account, session, turn_id);
            match recovery::plan(&ids.2, &log) {
                Ok((input, replay)) => {
                    tracing::info!(session = ids.1.as_str(), turn = %ids.2, replayed = replay.len(), "carrying on an orphaned turn");
                    metrics::turn_resumed();
                    self.spawn(ids, input, replay);
                }
                Err(reason) => {
                    tracing::warn!(session = ids.1.as_str(), turn = %ids.2, reason, "an orphaned turn cannot go on");
                    let entry = turn::ending(
                        &ids.2,
                        TurnState::Interrupted,
                        recovery::UNRESUMABLE,
                        &reason,
                    );
                    self.0
                        .sessions
                        .append(&ids.1, entry, Writer::Runtime)
                        .await?;
                    metrics::turn_run(RunEnded::Interrupted);
                }
            }
        }
        Ok(())
    }

    /// Drains this process's turns: it starts none from now on (a turn started or resumed here
    /// is handed over at once), lets the running ones end within `grace`, then hands over the
    /// rest at their next durable point. Returns how many were running, and how many of them
    /// were handed over.
    pub async fn drain(&self, grace: Duration) -> Drained {
        let running = &self.0.running;
        let before = running.stop_taking();
        let mut count = running.count.subscribe();
        let ended = tokio::time::timeout(grace, count.wait_for(|n| *n == 0))
            .await
            .is_ok();
        let mut handed_over = 0;
        if !ended {
            handed_over = running.hand_over();
            let _ = count.wait_for(|n| *n == 0).await;
        }
        Drained {
            running: before,
            handed_over,
        }
    }

    /// Records the resolution and resumes the turn.
    async fn apply(
        &self,
        account: &AccountId,
        session: &SessionId,
        action: &ActionId,
        request: ActionResolutionRequest,
    ) -> Result<ActionResolution> {
        let result = request.result;
        let digest = match &result {
            ActionResult::Approved { digest } | ActionResult::Rejected { digest, .. } => {
                digest.to_string()
            }
        };
        let resolution = Resolution {
            account: account.clone(),
            session_id: session.clone(),
            action_id: action.clone(),
            revision: i64::try_from(request.revision.get()).unwrap_or(i64::MAX),
            digest,
            at_ms: now_ms(),
        };
        let events = |turn_id: &str, revision: i64| {
            let at = now();
            vec![
                AgentEvent::ActionResult {
                    action_id: action.to_string(),
                    created_at: at,
                    result: result.clone(),
                    revision: revision_number(revision),
                    seq: DRAFT_SEQ,
                    turn_id: turn_id.to_owned(),
                },
                AgentEvent::TurnState {
                    created_at: at,
                    seq: DRAFT_SEQ,
                    state: TurnState::Processing,
                    turn_id: turn_id.to_owned(),
                },
            ]
        };
        let refused = |refusal: Refusal| Err(Error::Refused(refusal));
        match self.0.sessions.resolve(&resolution, events).await? {
            Resolved::Done {
                turn_id,
                revision,
                request,
                ..
            } => {
                let request: ActionRequest = serde_json::from_value(request).map_err(|e| {
                    tracing::error!(error = %e, "a stored action request does not parse");
                    Error::Internal
                })?;
                let input = Input::Resolved {
                    request: Box::new(request),
                    result,
                };
                let ids = (account.clone(), session.clone(), turn_id);
                self.spawn(ids, input, VecDeque::new());
                Ok(ActionResolution::builder()
                    .action_id(action.to_string())
                    .revision(revision_number(revision))
                    .try_into()?)
            }
            Resolved::NotFound => refused(Refusal::NoAction {
                session_id: session.to_string(),
                action_id: action.to_string(),
            }),
            Resolved::NotPending => refused(Refusal::NotPending),
            Resolved::Stale { current } => refused(Refusal::Stale { current }),
            Resolved::DigestMismatch { expected } => refused(Refusal::DigestMismatch { expected }),
        }
    }

    /// Runs the runtime for a turn in the background until it ends or awaits an action, with
    /// the events of an earlier run of this part of the turn to replay. A runtime that fails or
    /// panics ends the turn `failed`; one handed over gives up the turn's lease.
    fn spawn(
        &self,
        (account, session, turn_id): (AccountId, SessionId, String),
        input: Input,
        replay: VecDeque<Recorded>,
    ) {
        let inner = self.0.clone();
        let signal = inner.running.enter(&turn_id);
        let turn = Arc::new(Turn::new(
            inner.sessions.clone(),
            inner.pipeline.clone(),
            (account, session, turn_id),
            signal,
            replay,
        ));
        let runtime = inner.runtime.clone();
        tokio::spawn(async move {
            let _running = metrics::turn_running();
            let worker = {
                let turn = turn.clone();
                tokio::spawn(async move {
                    let outcome = match input {
                        Input::Intent(intent) => runtime.start(&turn, &intent).await,
                        Input::Resolved { request, result } => {
                            runtime.resume(&turn, &request, &result).await
                        }
                    }?;
                    let ended = match outcome {
                        RunEnd::Complete => RunEnded::Complete,
                        RunEnd::AwaitAction { .. } => RunEnded::AwaitingAction,
                    };
                    turn.finish(outcome).await.map(|()| ended)
                })
            };
            let ended = match worker.await {
                Ok(Ok(ended)) => ended,
                Ok(Err(TurnError::Interrupted)) => RunEnded::Interrupted,
                Ok(Err(TurnError::HandedOver)) => {
                    if let Err(error) = inner.store.release_turn(&turn.turn_id).await {
                        // Its lease runs out instead.
                        tracing::warn!(error = &error as &dyn std::error::Error, turn = %turn.turn_id, "handing over a turn");
                    }
                    RunEnded::HandedOver
                }
                Ok(Err(TurnError::Failed { code, message })) => {
                    turn.end(TurnState::Failed, &code, &message).await;
                    RunEnded::Failed
                }
                Ok(Err(TurnError::Unresumable(reason))) => {
                    tracing::warn!(turn = %turn.turn_id, reason, "a turn carried on cannot go on");
                    turn.end(TurnState::Interrupted, recovery::UNRESUMABLE, &reason)
                        .await;
                    RunEnded::Interrupted
                }
                Err(panic) => {
                    tracing::error!(error = %panic, turn = %turn.turn_id, "the runtime panicked");
                    turn.end(
                        TurnState::Failed,
                        "internal",
                        "the runtime stopped unexpectedly",
                    )
                    .await;
                    RunEnded::Failed
                }
            };
            metrics::turn_run(ended);
            inner.running.leave(&turn.turn_id);
        });
    }
}

/// What draining did to the turns running in a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Turns running when the drain began.
    pub running: usize,
    /// Turns still running at the end of the grace, handed over.
    pub handed_over: usize,
}

fn revision_number(revision: i64) -> NonZeroU64 {
    u64::try_from(revision)
        .ok()
        .and_then(NonZeroU64::new)
        .expect("revisions start at 1")
}

/// What an idempotency key is bound to: the hash of the session, the action and the body.
pub fn resolution_hash(
    session_id: &str,
    action_id: &str,
    body: &ActionResolutionRequest,
) -> String {
    let canonical =
        serde_json::to_string(&(session_id, action_id, body)).expect("a resolution serializes");
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The signals of the turns running in this process, and whether it takes new ones.
struct Running {
    turns: Mutex<RunningTurns>,
    /// How many turns run here.
    count: watch::Sender<usize>,
}

struct RunningTurns {
    signals: HashMap<String, watch::Sender<Signal>>,
    /// False once the process drains: a turn entering then is handed over at once.
    taking: bool,
}

impl Default for Running {
    fn default() -> Self {
        Self {
            turns: Mutex::new(RunningTurns {
                signals: HashMap::new(),
                taking: true,
            }),
            count: watch::Sender::new(0),
        }
    }
}

impl Running {
    fn enter(&self, turn_id: &str) -> watch::Receiver<Signal> {
        let mut turns = self.lock();
        let first = if turns.taking {
            Signal::Run
        } else {
            Signal::HandOver
        };
        let (signal, signalled) = watch::channel(first);
        turns.signals.insert(turn_id.to_owned(), signal);
        self.count.send_replace(turns.signals.len());
        signalled
    }

    fn leave(&self, turn_id: &str) {
        let mut turns = self.lock();
        turns.signals.remove(turn_id);
        self.count.send_replace(turns.signals.len());
    }

    /// Tells the runtime of `turn_id`, if it runs here, to stop.
    fn cancel(&self, turn_id: &str) {
        if let Some(signal) = self.lock().signals.get(turn_id) {
            signal.send_replace(Signal::Interrupt);
        }
    }

    fn takes_turns(&self) -> bool {
        self.lock().taking
    }

    /// Takes no new turn from now on; how many run.
    fn stop_taking(&self) -> usize {
        let mut turns = self.lock();
        turns.taking = false;
        turns.signals.len()
    }

    /// Tells every running turn to stop at its next durable point; how many there are.
    fn hand_over(&self) -> usize {
        let turns = self.lock();
        for signal in turns.signals.values() {
            signal.send_if_modified(|s| {
                let running = *s == Signal::Run;
                if running {
                    *s = Signal::HandOver;
                }
                running
            });
        }
        turns.signals.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RunningTurns> {
        self.turns
            .lock()
            .expect("the running-turns lock is not poisoned")
    }
}
