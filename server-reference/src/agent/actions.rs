//! Action resolution (part 4.2) with idempotency keys: the same key and body replay the first
//! answer without a second effect, another body is 422, a duplicate in flight is 409. Keys are
//! kept for [`KEY_LIFETIME`].

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use intent_models::{
    ActionRequest, ActionResolution, ActionResolutionRequest, ActionResult, AgentEvent, ErrorCode,
    TurnState,
};
use sha2::{Digest, Sha256};

use super::check_session_id;
use super::turn::{self, DRAFT_SEQ, Input, draft};
use crate::error::ApiError;
use crate::gateway::Principal;
use crate::store::agent::{IdempotencyBegin, Resolution, Resolved};
use crate::{AppState, now, now_ms};

/// How long an idempotency key and its answer are kept, in seconds (24 hours).
pub const KEY_LIFETIME: i64 = 24 * 3600;

/// Longest idempotency key.
const MAX_KEY_LEN: usize = 255;

pub(super) async fn resolve(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Result<Json<ActionResolutionRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Path((session_id, action_id)) =
        path.map_err(|e| ApiError::new(ErrorCode::InvalidParameter, e.body_text()))?;
    check_session_id(&session_id)?;
    let key = idempotency_key(&headers)?;
    let Json(request) = body?;
    let account = &principal.account;
    let request_hash = resolution_hash(&session_id, &action_id, &request);
    let at = now();
    match state
        .store()
        .begin_idempotent(account, key, &request_hash, at, at - KEY_LIFETIME)
        .await?
    {
        IdempotencyBegin::Started => {}
        IdempotencyBegin::Replay { status, body } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return Ok((
                status,
                [(header::CONTENT_TYPE, "application/json")],
                Body::from(body),
            )
                .into_response());
        }
        IdempotencyBegin::InFlight => {
            return Err(ApiError::new(
                ErrorCode::IdempotencyInFlight,
                "a request with this Idempotency-Key is still in flight; retry later",
            ));
        }
        IdempotencyBegin::Reused => {
            return Err(ApiError::new(
                ErrorCode::IdempotencyKeyReused,
                "this Idempotency-Key was used with a different request",
            ));
        }
    }
    let answer = apply(&state, account, &session_id, &action_id, request).await;
    let (status, body) = match &answer {
        Ok(resolution) => (
            StatusCode::OK,
            serde_json::to_string(resolution).expect("a resolution serializes"),
        ),
        Err(error) if error.code() == ErrorCode::Internal => {
            // A retry may succeed: the key is released, nothing was recorded.
            state.store().abandon_idempotent(account, key).await?;
            return Err(answer.expect_err("matched an error"));
        }
        Err(error) => (error.status(), error.body()),
    };
    state
        .store()
        .finish_idempotent(account, key, status.as_u16(), &body)
        .await?;
    Ok((
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response())
}

/// What an idempotency key is bound to: the hash of the session, the action and the body.
pub fn resolution_hash(
    session_id: &str,
    action_id: &str,
    body: &ActionResolutionRequest,
) -> String {
    let canonical =
        serde_json::to_string(&(session_id, action_id, body)).expect("a resolution serializes");
    hex(&Sha256::digest(canonical.as_bytes()))
}

fn idempotency_key(headers: &HeaderMap) -> Result<&str, ApiError> {
    let key = headers
        .get("idempotency-key")
        .map(|v| v.to_str().unwrap_or_default())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                "the Idempotency-Key header is required",
            )
        })?;
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(ApiError::new(
            ErrorCode::InvalidParameter,
            format!("Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
        ));
    }
    Ok(key)
}

/// Records the resolution and resumes the turn.
async fn apply(
    state: &AppState,
    account: &str,
    session_id: &str,
    action_id: &str,
    request: ActionResolutionRequest,
) -> Result<ActionResolution, ApiError> {
    let result = request.result;
    let digest = match &result {
        ActionResult::Approved { digest } | ActionResult::Rejected { digest, .. } => {
            digest.to_string()
        }
    };
    let resolution = Resolution {
        account: account.to_owned(),
        session_id: session_id.to_owned(),
        action_id: action_id.to_owned(),
        revision: i64::try_from(request.revision.get()).unwrap_or(i64::MAX),
        digest,
        at_ms: now_ms(),
    };
    let events = {
        let result = result.clone();
        let action_id = action_id.to_owned();
        move |turn_id: &str, revision: i64| {
            let at = now();
            vec![
                draft(AgentEvent::ActionResult {
                    action_id: action_id.clone(),
                    created_at: at,
                    result: result.clone(),
                    revision: u64::try_from(revision)
                        .ok()
                        .and_then(std::num::NonZeroU64::new)
                        .expect("revisions start at 1"),
                    seq: DRAFT_SEQ,
                    turn_id: turn_id.to_owned(),
                }),
                draft(AgentEvent::TurnState {
                    created_at: at,
                    seq: DRAFT_SEQ,
                    state: TurnState::Processing,
                    turn_id: turn_id.to_owned(),
                }),
            ]
        }
    };
    match state.store().resolve_action(&resolution, &events).await? {
        Resolved::Done {
            turn_id,
            revision,
            request,
            last_seq,
        } => {
            state.agent().hub.appended(session_id, last_seq);
            let request: ActionRequest = serde_json::from_value(request).map_err(|e| {
                tracing::error!(error = %e, "a stored action request does not parse");
                ApiError::internal()
            })?;
            turn::spawn(
                state.clone(),
                state.agent().runtime.clone(),
                account.to_owned(),
                session_id.to_owned(),
                turn_id,
                Input::Resolved {
                    request: Box::new(request),
                    result,
                },
            );
            Ok(ActionResolution {
                action_id: action_id.to_owned(),
                revision: u64::try_from(revision)
                    .ok()
                    .and_then(std::num::NonZeroU64::new)
                    .expect("revisions start at 1"),
            })
        }
        Resolved::NotFound => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no action {action_id} in session {session_id}"),
        )),
        Resolved::NotPending => Err(ApiError::new(
            ErrorCode::ActionNotPending,
            "the action was already resolved or its turn ended",
        )),
        Resolved::Stale { current } => Err(ApiError::new(
            ErrorCode::RevisionConflict,
            format!("the action is at revision {current}"),
        )
        .with_detail("revision", current.into())),
        Resolved::DigestMismatch { expected } => Err(ApiError::new(
            ErrorCode::ValidationFailed,
            "the result must name the digest of the reviewed Build",
        )
        .with_detail("digest", expected.into())),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
