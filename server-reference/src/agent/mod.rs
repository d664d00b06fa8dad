//! The Agent area (parts 3, 4.2 and 6): sessions, turns, the durable event log of each session
//! read by long-poll pages and by SSE, and action resolution. Every handler is scoped to the
//! caller's account: another account's session answers 404.

mod actions;
mod chat;
pub mod cursor;
mod events;
mod hub;
pub mod runtime;
mod sessions;
pub mod turn;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::routing::{get, post};
use intent_models::ErrorCode;

use crate::config::Config;
use crate::error::ApiError;
use crate::{AppState, now, now_ms};

pub use actions::{KEY_LIFETIME, resolution_hash};
pub use runtime::{ReferenceRuntime, Runtime};

/// Longest session id (part 8).
const MAX_SESSION_ID: usize = 160;

/// What the Agent handlers share.
pub struct Agent {
    cursors: cursor::CursorKey,
    hub: hub::Hub,
    running: turn::Running,
    runtime: Arc<dyn Runtime>,
    event_retention: Duration,
    cursor_ttl: Duration,
    sse_keep_alive: Duration,
}

impl Agent {
    /// The Agent of `config`, with cursor key `cursors`, running turns with `runtime`.
    pub fn new(config: &Config, cursors: cursor::CursorKey, runtime: Arc<dyn Runtime>) -> Self {
        Self {
            cursors,
            hub: hub::Hub::default(),
            running: turn::Running::default(),
            runtime,
            event_retention: config.event_retention,
            cursor_ttl: config.cursor_ttl,
            sse_keep_alive: config.sse_keep_alive,
        }
    }

    /// Events created before this (Unix milliseconds) leave the retained log.
    fn prune_before_ms(&self) -> i64 {
        now_ms().saturating_sub(i64::try_from(self.event_retention.as_millis()).unwrap_or(i64::MAX))
    }

    /// A fresh cursor at `seq` of `session` for `account`.
    fn cursor(&self, account: &str, session: &str, seq: i64) -> String {
        let ttl = i64::try_from(self.cursor_ttl.as_secs()).unwrap_or(i64::MAX);
        self.cursors
            .issue(account, session, seq, now().saturating_add(ttl))
    }
}

/// Routes under `/v1/agent`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/chat", post(chat::start))
        .route("/chat/{session_id}", get(events::page))
        .route("/chat/{session_id}/stream", get(events::stream))
        .route(
            "/sessions/{session_id}",
            get(sessions::get)
                .patch(sessions::update)
                .delete(sessions::delete),
        )
        .route("/sessions/{session_id}/interrupt", post(chat::interrupt))
        .route(
            "/sessions/{session_id}/actions/{action_id}/resolve",
            post(actions::resolve),
        )
}

/// Fails turns left `processing` by a previous run of the server: their runtime is gone.
pub async fn fail_orphaned_turns(state: &AppState) -> Result<(), crate::store::Error> {
    for (session_id, turn_id) in state.store().processing_turns().await? {
        turn::fail_orphan(state, &session_id, &turn_id).await?;
    }
    Ok(())
}

/// A session id from the path: 1 to 160 characters.
fn session_id(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(id) = path.map_err(|e| ApiError::new(ErrorCode::InvalidParameter, e.body_text()))?;
    check_session_id(&id)?;
    Ok(id)
}

fn check_session_id(id: &str) -> Result<(), ApiError> {
    if id.is_empty() || id.chars().count() > MAX_SESSION_ID {
        return Err(ApiError::new(
            ErrorCode::InvalidParameter,
            format!("sessionId must be 1 to {MAX_SESSION_ID} characters"),
        ));
    }
    Ok(())
}

fn no_session(id: &str) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no session {id}"))
}
