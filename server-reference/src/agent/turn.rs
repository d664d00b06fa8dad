//! A turn as its runtime sees it: the handle through which a runtime writes its turn's log and
//! calls the Pipeline, and how a runtime step ends.

use std::collections::VecDeque;
use std::future::Future;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use intent_models::error::ConversionError;
use intent_models::{
    ActionRequest, ActionRequestKind, AgentEvent, AgentEventRole, MessageSnapshot,
    MessageSnapshotRole, PipelineBuild, PipelineBuildRequest, PipelineChain, PipelineCommitResult,
    TurnState,
};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::sessions::{DRAFT_SEQ, Entry, SessionCache, Writer};
use crate::clock::{now, now_ms};
use crate::ids::{AccountId, SessionId};
use crate::pipeline::{self, Pipeline};
use crate::random;
use crate::store::agent::{Appended, NewAction};

/// How a runtime's run of a turn ended: the turn is complete or waits for its action.
pub enum RunEnd {
    /// The turn is complete.
    Complete,
    /// The client must approve or reject `build`.
    AwaitAction {
        /// What the user is asked to approve.
        title: String,
        /// The simulated Build.
        build: Box<PipelineBuild>,
    },
}

/// Why a runtime step stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnError {
    /// The turn was interrupted or deleted, or another process took it over; nothing more is
    /// written.
    Interrupted,
    /// This process is shutting down: the turn stops here, at a durable point, and another
    /// process (or this one's restart) carries it on.
    HandedOver,
    /// The turn fails with an error event.
    Failed {
        /// A machine-readable code.
        code: String,
        /// What went wrong, for people.
        message: String,
    },
    /// A turn carried on after a restart cannot go on: its log does not hold what the runtime
    /// does again. The turn ends `interrupted`, after an error event with the reason.
    Unresumable(String),
}

/// A model the turn writes was left without a required member (a bug of this server).
impl From<ConversionError> for TurnError {
    fn from(error: ConversionError) -> Self {
        tracing::error!(%error, "a turn's model is incomplete");
        Self::Failed {
            code: "internal".to_owned(),
            message: "internal error".to_owned(),
        }
    }
}

/// What a process running a turn is told to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Signal {
    /// Go on.
    Run,
    /// Stop: the turn was interrupted.
    Interrupt,
    /// Stop at the next durable point: the process is shutting down.
    HandOver,
}

/// An event the turn's log already holds from an earlier run of the same step, with the Unix
/// milliseconds it was appended at.
#[derive(Debug, Clone)]
pub(super) struct Recorded {
    pub event: AgentEvent,
    pub at_ms: i64,
}

/// What a tool step returned: its output, and whether that is an error.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The output, as the log records it.
    pub output: Value,
    /// Whether the tool failed.
    pub is_error: bool,
}

/// A tool step being run: when its call was first recorded, so that a step run again after a
/// restart (a timer) can go on from where the first run was.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Unix milliseconds at which the step's call entered the log.
    pub called_at_ms: i64,
}

/// What the runtime sees of its turn: who asked, the ways to write to its log, and the Pipeline
/// acting for the turn's account. Nothing else of the server.
///
/// A turn carried on after a restart runs its runtime again from the same input, with the
/// events this part of the turn already wrote queued: each [`Turn::say`] and [`Turn::tool`] that
/// the log holds returns what it recorded instead of writing (or running) it again.
pub struct Turn {
    sessions: SessionCache,
    pipeline: Arc<Pipeline>,
    /// The account that started the turn.
    pub account: AccountId,
    /// The session.
    pub session_id: SessionId,
    /// The turn.
    pub turn_id: String,
    signal: watch::Receiver<Signal>,
    replay: Mutex<VecDeque<Recorded>>,
}

/// Time between two snapshots of a message being written.
const SNAPSHOT_INTERVAL: Duration = Duration::from_millis(5);

impl Turn {
    /// The handle of `account`'s turn `turn_id` of `session_id`, told to stop by `signal`, with
    /// the events of an earlier run of this part of the turn to replay.
    pub(super) fn new(
        sessions: SessionCache,
        pipeline: Arc<Pipeline>,
        (account, session_id, turn_id): (AccountId, SessionId, String),
        signal: watch::Receiver<Signal>,
        replay: VecDeque<Recorded>,
    ) -> Self {
        Self {
            sessions,
            pipeline,
            account,
            session_id,
            turn_id,
            signal,
            replay: Mutex::new(replay),
        }
    }

    /// Streams `text` as transient snapshots, a word at a time, then appends it as one durable
    /// assistant message.
    pub async fn say(&self, text: &str) -> Result<(), TurnError> {
        let said = |event: &AgentEvent| matches!(event, AgentEvent::Message { role: AgentEventRole::Assistant, text: t, .. } if t == text);
        if self.replayed("says a message", said)?.is_some() {
            return Ok(());
        }
        let mut so_far = String::new();
        for word in text.split_inclusive(' ') {
            so_far.push_str(word);
            let snapshot = MessageSnapshot::builder()
                .role(MessageSnapshotRole::Assistant)
                .text(so_far.clone())
                .turn_id(self.turn_id.clone())
                .try_into()?;
            self.sessions.snapshot(&self.session_id, snapshot);
            self.pause(SNAPSHOT_INTERVAL).await?;
        }
        self.append(
            vec![AgentEvent::Message {
                created_at: now(),
                role: AgentEventRole::Assistant,
                seq: DRAFT_SEQ,
                text: text.to_owned(),
                turn_id: self.turn_id.clone(),
            }],
            None,
            None,
        )
        .await
    }

    /// Runs tool `name` on `input` as one durable step: records the call, runs `run`, records
    /// what it returned. When the turn is carried on after a restart, a step whose result the
    /// log holds returns it without running, and one whose call alone it holds runs again: `run`
    /// must be safe to repeat (read-only, or idempotent as a commit of one Build is).
    pub async fn tool<F, Fut>(
        &self,
        name: &str,
        input: Map<String, Value>,
        run: F,
    ) -> Result<ToolOutput, TurnError>
    where
        F: FnOnce(Step) -> Fut,
        Fut: Future<Output = Result<ToolOutput, TurnError>>,
    {
        let called = |event: &AgentEvent| {
            matches!(event, AgentEvent::ToolCall { name: n, input: i, .. }
                if n == name && **i == input)
        };
        let (id, called_at_ms) = match self.replayed(&format!("calls {name}"), called)? {
            Some(Recorded {
                event: AgentEvent::ToolCall { tool_call_id, .. },
                at_ms,
            }) => (tool_call_id, at_ms),
            _ => {
                let id = random::id("call");
                let at_ms = now_ms();
                self.append(
                    vec![AgentEvent::ToolCall {
                        created_at: at_ms / 1000,
                        input: input.into(),
                        name: name.to_owned(),
                        seq: DRAFT_SEQ,
                        tool_call_id: id.clone(),
                        turn_id: self.turn_id.clone(),
                    }],
                    None,
                    None,
                )
                .await?;
                (id, at_ms)
            }
        };
        let returned = |event: &AgentEvent| matches!(event, AgentEvent::ToolResult { tool_call_id, .. } if *tool_call_id == id);
        if let Some(Recorded {
            event: AgentEvent::ToolResult {
                output, is_error, ..
            },
            ..
        }) = self.replayed(&format!("waits for {name}"), returned)?
        {
            return Ok(ToolOutput { output, is_error });
        }
        let outcome = run(Step { called_at_ms }).await?;
        self.append(
            vec![AgentEvent::ToolResult {
                created_at: now(),
                is_error: outcome.is_error,
                name: name.to_owned(),
                output: outcome.output.clone(),
                seq: DRAFT_SEQ,
                tool_call_id: id,
                turn_id: self.turn_id.clone(),
            }],
            None,
            None,
        )
        .await?;
        Ok(outcome)
    }

    /// Waits `duration`, or stops as soon as the turn is interrupted or handed over.
    pub async fn pause(&self, duration: Duration) -> Result<(), TurnError> {
        let mut signal = self.signal.clone();
        tokio::select! {
            () = tokio::time::sleep(duration) => Ok(()),
            stop = signal.wait_for(|s| *s != Signal::Run) => Err(stopped(stop.map(|s| *s).ok())),
        }
    }

    /// Waits until Unix milliseconds `at_ms` (at once when it has passed), as [`Turn::pause`].
    pub async fn pause_until(&self, at_ms: i64) -> Result<(), TurnError> {
        let left = u64::try_from(at_ms - now_ms()).unwrap_or(0);
        self.pause(Duration::from_millis(left)).await
    }

    /// Builds (and simulates) a Build for the turn's account.
    pub async fn build(&self, request: &PipelineBuildRequest) -> pipeline::Result<PipelineBuild> {
        self.pipeline.build(&self.account, request).await
    }

    /// Commits `build` on `chain` for the turn's account.
    pub async fn commit(
        &self,
        chain: PipelineChain,
        build: &PipelineBuild,
    ) -> pipeline::Result<PipelineCommitResult> {
        let Value::Object(build) = serde_json::to_value(build).expect("a Build serializes") else {
            unreachable!("a Build is a JSON object")
        };
        self.pipeline.commit(&self.account, chain, &build).await
    }

    /// Appends `events`, entering `next_state`, while the turn is processing; a turn that left
    /// `processing` (interrupted, deleted) stops its runtime with [`TurnError::Interrupted`].
    async fn append(
        &self,
        events: Vec<AgentEvent>,
        next_state: Option<TurnState>,
        action: Option<NewAction>,
    ) -> Result<(), TurnError> {
        if *self.signal.borrow() == Signal::HandOver {
            return Err(TurnError::HandedOver);
        }
        let entry = Entry {
            turn_id: self.turn_id.clone(),
            events,
            next_state,
            action,
        };
        match self
            .sessions
            .append(&self.session_id, entry, Writer::Runtime)
            .await
        {
            Ok(Appended::Done(_)) => Ok(()),
            Ok(Appended::Refused(_) | Appended::NoTurn) => Err(TurnError::Interrupted),
            Err(error) => {
                tracing::error!(
                    error = &error as &dyn std::error::Error,
                    "appending to a turn"
                );
                Err(TurnError::Interrupted)
            }
        }
    }

    /// The next event to replay, if `matches` takes it; an error naming what the runtime does
    /// (`doing`) when the log holds another event there.
    fn replayed(
        &self,
        doing: &str,
        matches: impl Fn(&AgentEvent) -> bool,
    ) -> Result<Option<Recorded>, TurnError> {
        let mut replay = self.replay.lock().expect("a turn's replay is not poisoned");
        match replay.front() {
            None => Ok(None),
            Some(next) if matches(&next.event) => Ok(replay.pop_front()),
            Some(next) => Err(TurnError::Unresumable(format!(
                "the turn's log holds {} where the runtime now {doing}",
                kind(&next.event)
            ))),
        }
    }

    /// Ends the turn as `outcome` says.
    pub(super) async fn finish(&self, outcome: RunEnd) -> Result<(), TurnError> {
        if let Some(next) = self
            .replay
            .lock()
            .expect("a turn's replay is not poisoned")
            .front()
        {
            return Err(TurnError::Unresumable(format!(
                "the turn's log holds {} after the runtime's last step",
                kind(&next.event)
            )));
        }
        let at = now();
        let turn_state = |state| AgentEvent::TurnState {
            created_at: at,
            seq: DRAFT_SEQ,
            state,
            turn_id: self.turn_id.clone(),
        };
        match outcome {
            RunEnd::Complete => {
                self.append(
                    vec![turn_state(TurnState::Complete)],
                    Some(TurnState::Complete),
                    None,
                )
                .await
            }
            RunEnd::AwaitAction { title, build } => {
                let action = action_request(title, *build)?;
                let new_action = NewAction {
                    id: action.action_id.to_string(),
                    revision: 1,
                    digest: action.build.digest.to_string(),
                    request: serde_json::to_value(&action).expect("an action serializes"),
                };
                let event = AgentEvent::Action {
                    action,
                    created_at: at,
                    seq: DRAFT_SEQ,
                    turn_id: self.turn_id.clone(),
                };
                self.append(
                    vec![event, turn_state(TurnState::AwaitingAction)],
                    Some(TurnState::AwaitingAction),
                    Some(new_action),
                )
                .await
            }
        }
    }

    /// Ends the turn in `state` (`failed` or `interrupted`) after an error event.
    pub(super) async fn end(&self, state: TurnState, code: &str, message: &str) {
        // A turn interrupted meanwhile stays interrupted.
        let Entry { events, .. } = ending(&self.turn_id, state, code, message);
        let _ = self.append(events, Some(state), None).await;
    }
}

/// Why a pause stopped, from the signal that stopped it (none: the turn's driver is gone).
fn stopped(signal: Option<Signal>) -> TurnError {
    match signal {
        Some(Signal::HandOver) => TurnError::HandedOver,
        _ => TurnError::Interrupted,
    }
}

/// What kind of event `event` is, for a message.
fn kind(event: &AgentEvent) -> &'static str {
    match event {
        AgentEvent::Message { .. } => "a message",
        AgentEvent::ToolCall { .. } => "a tool call",
        AgentEvent::ToolResult { .. } => "a tool result",
        AgentEvent::Action { .. } => "an action",
        AgentEvent::ActionResult { .. } => "an action result",
        AgentEvent::Error { .. } => "an error",
        AgentEvent::TurnState { .. } => "a turn state",
        _ => "an event",
    }
}

/// What ends turn `turn_id` in `state` with an error: the error event and the state's.
pub(super) fn ending(turn_id: &str, state: TurnState, code: &str, message: &str) -> Entry {
    let at = now();
    Entry {
        turn_id: turn_id.to_owned(),
        events: vec![
            AgentEvent::Error {
                code: code.to_owned(),
                created_at: at,
                message: message.to_owned(),
                seq: DRAFT_SEQ,
                turn_id: turn_id.to_owned(),
            },
            AgentEvent::TurnState {
                created_at: at,
                seq: DRAFT_SEQ,
                state,
                turn_id: turn_id.to_owned(),
            },
        ],
        next_state: Some(state),
        action: None,
    }
}

fn action_request(title: String, build: PipelineBuild) -> Result<ActionRequest, ConversionError> {
    ActionRequest::builder()
        .action_id(random::id("act"))
        .build(build)
        .kind(ActionRequestKind::ApproveBuild)
        .revision(NonZeroU64::MIN)
        .title(title)
        .try_into()
}
