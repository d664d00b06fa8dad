//! Reading, updating and deleting sessions (part 4.2).

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use intent_models::{ErrorCode, Session, SessionUpdate};

use super::{no_session, session_id};
use crate::error::ApiError;
use crate::gateway::Principal;
use crate::store::agent::SessionRecord;
use crate::{AppState, now};

pub(super) fn view(record: SessionRecord) -> Session {
    Session {
        archived: record.archived,
        id: record
            .id
            .parse()
            .expect("stored session ids are at most 160 characters"),
        title: record.title,
        updated_at: record.updated_at,
    }
}

pub(super) async fn get(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Session>, ApiError> {
    let id = session_id(path)?;
    let record = state
        .store()
        .session(&principal.account, &id)
        .await?
        .ok_or_else(|| no_session(&id))?;
    Ok(Json(view(record)))
}

pub(super) async fn update(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<SessionUpdate>, JsonRejection>,
) -> Result<Json<Session>, ApiError> {
    let id = session_id(path)?;
    let Json(update) = body?;
    if update.title.is_none() && update.archived.is_none() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "give title, archived or both",
        ));
    }
    let record = state
        .store()
        .update_session(
            &principal.account,
            &id,
            update.title.as_deref().map(String::as_str),
            update.archived,
            now(),
        )
        .await?
        .ok_or_else(|| no_session(&id))?;
    Ok(Json(view(record)))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<String>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let id = session_id(path)?;
    if state
        .store()
        .session(&principal.account, &id)
        .await?
        .is_none()
    {
        return Err(no_session(&id));
    }
    if let Some((turn_id, _)) = state.store().active_turn(&id).await? {
        state.agent().running.cancel(&turn_id);
    }
    if !state
        .store()
        .delete_session(&principal.account, &id)
        .await?
    {
        return Err(no_session(&id));
    }
    state.agent().hub.close(&id);
    Ok(StatusCode::NO_CONTENT)
}
