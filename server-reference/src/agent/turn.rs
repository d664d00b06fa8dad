//! Turns: the one place where turn state transitions are decided, and the driver that runs a
//! [`Runtime`] for a turn and writes what it does to the session's log.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use intent_models::{
    ActionRequest, ActionRequestKind, ActionResult, AgentEvent, AgentEventRole, MessageSnapshot,
    MessageSnapshotRole, PipelineBuild, TurnState,
};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::runtime::{Runtime, Step, TurnError};
use crate::store::agent::{Append, Appended, NewAction};
use crate::{AppState, now_ms, random};

/// Whether a turn in state `from` may enter `to`, as `TurnState.x-profile-transitions` in
/// openapi.json says. Terminal states go nowhere.
pub fn can_become(from: TurnState, to: TurnState) -> bool {
    use TurnState::*;
    matches!(
        (from, to),
        (Processing, Complete | Failed | Interrupted | AwaitingAction)
            | (AwaitingAction, Processing | Interrupted)
    )
}

/// A draft of a log event: `seq` is a placeholder that the store replaces inside its write
/// transaction.
pub fn draft(event: AgentEvent) -> Map<String, Value> {
    match serde_json::to_value(event).expect("an event serializes") {
        Value::Object(map) => map,
        _ => unreachable!("an event is a JSON object"),
    }
}

/// The placeholder `seq` of a draft.
pub const DRAFT_SEQ: NonZeroU64 = NonZeroU64::MIN;

/// Cancellation signals of the turns running in this process.
#[derive(Default)]
pub struct Running {
    turns: Mutex<HashMap<String, watch::Sender<bool>>>,
}

impl Running {
    fn enter(&self, turn_id: &str) -> watch::Receiver<bool> {
        let (cancel, cancelled) = watch::channel(false);
        self.lock().insert(turn_id.to_owned(), cancel);
        cancelled
    }

    fn leave(&self, turn_id: &str) {
        self.lock().remove(turn_id);
    }

    /// Tells the runtime of `turn_id`, if it runs here, to stop.
    pub fn cancel(&self, turn_id: &str) {
        if let Some(cancel) = self.lock().get(turn_id) {
            cancel.send_replace(true);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<bool>>> {
        self.turns
            .lock()
            .expect("the running-turns lock is not poisoned")
    }
}

/// What the runtime sees of its turn: who asked, and the ways to write to the log.
pub struct Turn {
    state: AppState,
    /// The account that started the turn.
    pub account: String,
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    cancelled: watch::Receiver<bool>,
}

impl Turn {
    /// The server state, for the Pipeline and the devnet.
    pub fn server(&self) -> &AppState {
        &self.state
    }

    /// Streams `text` as transient snapshots, a word at a time, then appends it as one durable
    /// assistant message.
    pub async fn say(&self, text: &str) -> Result<(), TurnError> {
        let mut so_far = String::new();
        for word in text.split_inclusive(' ') {
            so_far.push_str(word);
            self.state.agent().hub.snapshot(
                &self.session_id,
                MessageSnapshot {
                    role: MessageSnapshotRole::Assistant,
                    text: so_far.clone(),
                    turn_id: self.turn_id.clone(),
                },
            );
            self.pause(SNAPSHOT_INTERVAL).await?;
        }
        self.append(
            vec![AgentEvent::Message {
                created_at: crate::now(),
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

    /// Records a tool call; returns its id for [`Turn::tool_result`].
    pub async fn tool_call(
        &self,
        name: &str,
        input: Map<String, Value>,
    ) -> Result<String, TurnError> {
        let id = random::id("call");
        self.append(
            vec![AgentEvent::ToolCall {
                created_at: crate::now(),
                input,
                name: name.to_owned(),
                seq: DRAFT_SEQ,
                tool_call_id: id.clone(),
                turn_id: self.turn_id.clone(),
            }],
            None,
            None,
        )
        .await?;
        Ok(id)
    }

    /// Records what tool call `id` returned.
    pub async fn tool_result(
        &self,
        id: &str,
        name: &str,
        output: Value,
        is_error: bool,
    ) -> Result<(), TurnError> {
        self.append(
            vec![AgentEvent::ToolResult {
                created_at: crate::now(),
                is_error,
                name: name.to_owned(),
                output,
                seq: DRAFT_SEQ,
                tool_call_id: id.to_owned(),
                turn_id: self.turn_id.clone(),
            }],
            None,
            None,
        )
        .await
    }

    /// Waits `duration`, or fails with [`TurnError::Interrupted`] as soon as the turn is
    /// interrupted.
    pub async fn pause(&self, duration: Duration) -> Result<(), TurnError> {
        let mut cancelled = self.cancelled.clone();
        tokio::select! {
            () = tokio::time::sleep(duration) => Ok(()),
            _ = cancelled.wait_for(|c| *c) => Err(TurnError::Interrupted),
        }
    }

    /// Appends `events`, entering `next_state`, while the turn is processing; a turn that left
    /// `processing` (interrupted, deleted) stops its runtime with [`TurnError::Interrupted`].
    async fn append(
        &self,
        events: Vec<AgentEvent>,
        next_state: Option<TurnState>,
        action: Option<NewAction>,
    ) -> Result<(), TurnError> {
        let append = Append {
            session_id: self.session_id.clone(),
            turn_id: self.turn_id.clone(),
            events: events.into_iter().map(draft).collect(),
            next_state,
            action,
            at_ms: now_ms(),
            prune_before_ms: self.state.agent().prune_before_ms(),
        };
        let accept = move |current: TurnState| {
            current == TurnState::Processing
                && next_state.is_none_or(|next| can_become(current, next))
        };
        match self.state.store().append(&append, &accept).await {
            Ok(Appended::Done { last_seq }) => {
                self.state.agent().hub.appended(&self.session_id, last_seq);
                Ok(())
            }
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

    /// Ends the turn as `step` says.
    async fn finish(&self, step: Step) -> Result<(), TurnError> {
        let at = crate::now();
        let turn_state = |state| AgentEvent::TurnState {
            created_at: at,
            seq: DRAFT_SEQ,
            state,
            turn_id: self.turn_id.clone(),
        };
        match step {
            Step::Complete => {
                self.append(
                    vec![turn_state(TurnState::Complete)],
                    Some(TurnState::Complete),
                    None,
                )
                .await
            }
            Step::AwaitAction { title, build } => {
                let action = action_request(title, *build);
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

    /// Ends the turn as `failed` with an error event.
    async fn fail(&self, code: &str, message: &str) {
        // A turn interrupted meanwhile stays interrupted.
        let _ = self
            .append(
                failure(&self.turn_id, code, message),
                Some(TurnState::Failed),
                None,
            )
            .await;
    }
}

/// The events that end a turn as `failed`.
fn failure(turn_id: &str, code: &str, message: &str) -> Vec<AgentEvent> {
    let at = crate::now();
    vec![
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
            state: TurnState::Failed,
            turn_id: turn_id.to_owned(),
        },
    ]
}

/// Fails a turn that a previous run of the server left `processing`.
pub async fn fail_orphan(
    state: &AppState,
    session_id: &str,
    turn_id: &str,
) -> Result<(), crate::store::Error> {
    let append = Append {
        session_id: session_id.to_owned(),
        turn_id: turn_id.to_owned(),
        events: failure(
            turn_id,
            "interrupted_by_restart",
            "the server restarted during the turn",
        )
        .into_iter()
        .map(draft)
        .collect(),
        next_state: Some(TurnState::Failed),
        action: None,
        at_ms: now_ms(),
        prune_before_ms: state.agent().prune_before_ms(),
    };
    state
        .store()
        .append(&append, &|current| current == TurnState::Processing)
        .await?;
    Ok(())
}

/// Time between two snapshots of a message being written.
const SNAPSHOT_INTERVAL: Duration = Duration::from_millis(5);

fn action_request(title: String, build: PipelineBuild) -> ActionRequest {
    ActionRequest {
        action_id: random::id("act")
            .parse()
            .expect("a random id is a valid action id"),
        build,
        kind: ActionRequestKind::ApproveBuild,
        revision: NonZeroU64::MIN,
        title,
    }
}

/// What starts or resumes a turn's runtime.
pub enum Input {
    /// The user's intent.
    Intent(String),
    /// The client resolved the turn's action.
    Resolved {
        /// The resolved request.
        request: Box<ActionRequest>,
        /// The client's answer.
        result: ActionResult,
    },
}

/// Runs `runtime` for a turn in the background until it ends or awaits an action. A runtime
/// that fails or panics ends the turn `failed`.
pub fn spawn(
    state: AppState,
    runtime: Arc<dyn Runtime>,
    account: String,
    session_id: String,
    turn_id: String,
    input: Input,
) {
    let cancelled = state.agent().running.enter(&turn_id);
    let turn = Arc::new(Turn {
        state: state.clone(),
        account,
        session_id,
        turn_id: turn_id.clone(),
        cancelled,
    });
    tokio::spawn(async move {
        let worker = {
            let turn = turn.clone();
            tokio::spawn(async move {
                let step = match input {
                    Input::Intent(intent) => runtime.start(&turn, &intent).await,
                    Input::Resolved { request, result } => {
                        runtime.resume(&turn, &request, &result).await
                    }
                };
                match step {
                    Ok(step) => turn.finish(step).await,
                    Err(error) => Err(error),
                }
            })
        };
        match worker.await {
            Ok(Ok(()) | Err(TurnError::Interrupted)) => {}
            Ok(Err(TurnError::Failed { code, message })) => turn.fail(&code, &message).await,
            Err(panic) => {
                tracing::error!(error = %panic, turn = %turn.turn_id, "the runtime panicked");
                turn.fail("internal", "the runtime stopped unexpectedly")
                    .await;
            }
        }
        state.agent().running.leave(&turn_id);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_follow_the_profile_in_openapi_json() {
        let document: Value = serde_json::from_str(crate::OPENAPI).unwrap();
        let table = &document["components"]["schemas"]["TurnState"]["x-profile-transitions"];
        let states = [
            TurnState::Processing,
            TurnState::Complete,
            TurnState::Failed,
            TurnState::Interrupted,
            TurnState::AwaitingAction,
        ];
        for from in states {
            for to in states {
                let listed = table[from.to_string()]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from(to.to_string()));
                assert_eq!(can_become(from, to), listed, "{from} -> {to}");
            }
        }
    }
}
