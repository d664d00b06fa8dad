//! A turn as its runtime sees it: the handle through which a runtime writes its turn's log and
//! calls the Pipeline, and how a runtime step ends.

use std::num::NonZeroU64;
use std::sync::Arc;
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
use crate::clock::now;
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
    /// The turn was interrupted or deleted; nothing more is written.
    Interrupted,
    /// The turn fails with an error event.
    Failed {
        /// A machine-readable code.
        code: String,
        /// What went wrong, for people.
        message: String,
    },
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

/// What the runtime sees of its turn: who asked, the ways to write to its log, and the Pipeline
/// acting for the turn's account. Nothing else of the server.
pub struct Turn {
    sessions: SessionCache,
    pipeline: Arc<Pipeline>,
    /// The account that started the turn.
    pub account: AccountId,
    /// The session.
    pub session_id: SessionId,
    /// The turn.
    pub turn_id: String,
    cancelled: watch::Receiver<bool>,
}

/// Time between two snapshots of a message being written.
const SNAPSHOT_INTERVAL: Duration = Duration::from_millis(5);

impl Turn {
    /// The handle of `account`'s turn `turn_id` of `session_id`, stopped by `cancelled`.
    pub(super) fn new(
        sessions: SessionCache,
        pipeline: Arc<Pipeline>,
        account: AccountId,
        session_id: SessionId,
        turn_id: String,
        cancelled: watch::Receiver<bool>,
    ) -> Self {
        Self {
            sessions,
            pipeline,
            account,
            session_id,
            turn_id,
            cancelled,
        }
    }

    /// Streams `text` as transient snapshots, a word at a time, then appends it as one durable
    /// assistant message.
    pub async fn say(&self, text: &str) -> Result<(), TurnError> {
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

    /// Records a tool call; returns its id for [`Turn::tool_result`].
    pub async fn tool_call(
        &self,
        name: &str,
        input: Map<String, Value>,
    ) -> Result<String, TurnError> {
        let id = random::id("call");
        self.append(
            vec![AgentEvent::ToolCall {
                created_at: now(),
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
                created_at: now(),
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

    /// Ends the turn as `outcome` says.
    pub(super) async fn finish(&self, outcome: RunEnd) -> Result<(), TurnError> {
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

    /// Ends the turn as `failed` with an error event.
    pub(super) async fn fail(&self, code: &str, message: &str) {
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
pub(super) fn failure(turn_id: &str, code: &str, message: &str) -> Vec<AgentEvent> {
    let at = now();
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

fn action_request(title: String, build: PipelineBuild) -> Result<ActionRequest, ConversionError> {
    ActionRequest::builder()
        .action_id(random::id("act"))
        .build(build)
        .kind(ActionRequestKind::ApproveBuild)
        .revision(NonZeroU64::MIN)
        .title(title)
        .try_into()
}
