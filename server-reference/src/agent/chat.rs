//! Starting and interrupting turns.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use intent_models::{
    AgentEvent, AgentEventRole, ChatStartRequest, ChatStartResponse, ErrorCode, TurnState,
    TurnStatus,
};

use super::turn::{self, DRAFT_SEQ, Input, can_become, draft};
use super::{no_session, session_id};
use crate::error::ApiError;
use crate::gateway::Principal;
use crate::store::Meter;
use crate::store::agent::{Append, Appended, SessionRecord, TurnStarted};
use crate::{AppState, now, now_ms, random};

/// Longest title given to a new session, in characters, taken from its first message.
const TITLE_CHARS: usize = 80;

pub(super) async fn start(
    State(state): State<AppState>,
    principal: Principal,
    body: Result<Json<ChatStartRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<ChatStartResponse>), ApiError> {
    let Json(request) = body?;
    let message: &str = &request.message;
    let session_id = match &request.session_id {
        Some(id) => id.to_string(),
        None => {
            let id = random::id("ses");
            state
                .store()
                .create_session(&SessionRecord {
                    id: id.clone(),
                    account: principal.account.clone(),
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
    let events = [
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
    let append = Append {
        session_id: session_id.clone(),
        turn_id: turn_id.clone(),
        events: events.into_iter().map(draft).collect(),
        next_state: None,
        action: None,
        at_ms: now_ms(),
        prune_before_ms: state.agent().prune_before_ms(),
    };
    let before_seq = match state
        .store()
        .start_turn(&principal.account, &append)
        .await?
    {
        TurnStarted::Started { before_seq } => before_seq,
        TurnStarted::NoSession => return Err(no_session(&session_id)),
        TurnStarted::Busy { turn_id } => {
            return Err(ApiError::new(
                ErrorCode::TurnInProgress,
                "a turn of this session is still active: wait for it, resolve its action, or interrupt it",
            )
            .with_detail("turnId", turn_id.into()));
        }
    };
    state
        .agent()
        .hub
        .appended(&session_id, before_seq + append.events.len() as i64);
    state
        .store()
        .record_usage(&principal.account, Meter::Turn, at)
        .await?;
    let cursor = state
        .agent()
        .cursor(&principal.account, &session_id, before_seq);
    turn::spawn(
        state.clone(),
        state.agent().runtime.clone(),
        principal.account,
        session_id.clone(),
        turn_id.clone(),
        Input::Intent(message.to_owned()),
    );
    Ok((
        StatusCode::ACCEPTED,
        Json(ChatStartResponse {
            cursor,
            session_id,
            state: TurnState::Processing,
            turn_id,
        }),
    ))
}

pub(super) async fn interrupt(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<TurnStatus>, ApiError> {
    let session_id = session_id(path)?;
    if state
        .store()
        .session(&principal.account, &session_id)
        .await?
        .is_none()
    {
        return Err(no_session(&session_id));
    }
    let not_active = || {
        ApiError::new(
            ErrorCode::TurnNotActive,
            "no turn of this session is active",
        )
    };
    let (turn_id, _) = state
        .store()
        .active_turn(&session_id)
        .await?
        .ok_or_else(not_active)?;
    let append = Append {
        session_id: session_id.clone(),
        turn_id: turn_id.clone(),
        events: vec![draft(AgentEvent::TurnState {
            created_at: now(),
            seq: DRAFT_SEQ,
            state: TurnState::Interrupted,
            turn_id: turn_id.clone(),
        })],
        next_state: Some(TurnState::Interrupted),
        action: None,
        at_ms: now_ms(),
        prune_before_ms: state.agent().prune_before_ms(),
    };
    let accept = |current| can_become(current, TurnState::Interrupted);
    match state.store().append(&append, &accept).await? {
        Appended::Done { last_seq } => {
            state.agent().running.cancel(&turn_id);
            state.agent().hub.appended(&session_id, last_seq);
            Ok(Json(TurnStatus {
                session_id,
                state: TurnState::Interrupted,
                turn_id,
            }))
        }
        // The turn ended between the two reads.
        Appended::Refused(_) | Appended::NoTurn => Err(not_active()),
    }
}
