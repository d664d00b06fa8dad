//! The Agent's HTTP layer: routes under `/v1/agent`, each a few lines that parse, call a service
//! and answer JSON, and the SSE framing of a streamed log.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRef, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::{get, post};
use futures_util::{Stream, StreamExt};
use intent_models::{
    ActionResolution, ActionResolutionRequest, ChatStartRequest, ChatStartResponse, EventPage,
    Resync, Session, SessionUpdate, TurnStatus,
};
use serde::Deserialize;

use super::{EventLog, PageRequest, Sessions, StreamItem, Turns};
use crate::auth::principal::Principal;
use crate::error::ApiError;
use crate::ids::ActionId;
use crate::json::Encoded;
use crate::json::Json;
use crate::web::{ApiJson, ApiPath, ApiQuery, IdempotencyKey, SessionPath};

/// How often an SSE stream with nothing to send comments that it is alive.
#[derive(Debug, Clone, Copy)]
pub struct SseKeepAlive(pub Duration);

/// Routes under `/v1/agent`, over any state that holds the Agent's services.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Turns: FromRef<S>,
    Sessions: FromRef<S>,
    EventLog: FromRef<S>,
    SseKeepAlive: FromRef<S>,
{
    Router::new()
        .route("/v1/agent/chat", post(start))
        .route("/v1/agent/chat/{session_id}", get(page))
        .route("/v1/agent/chat/{session_id}/stream", get(stream))
        .route(
            "/v1/agent/sessions/{session_id}",
            get(get_session)
                .patch(update_session)
                .delete(delete_session),
        )
        .route("/v1/agent/sessions/{session_id}/interrupt", post(interrupt))
        .route(
            "/v1/agent/sessions/{session_id}/actions/{action_id}/resolve",
            post(resolve),
        )
}

async fn start(
    State(turns): State<Turns>,
    principal: Principal,
    ApiJson(request): ApiJson<ChatStartRequest>,
) -> Result<(StatusCode, Json<ChatStartResponse>), ApiError> {
    let started = turns.start(&principal.account, &request).await?;
    Ok((StatusCode::ACCEPTED, Json(started)))
}

async fn interrupt(
    State(turns): State<Turns>,
    principal: Principal,
    SessionPath(session): SessionPath,
) -> Result<Json<TurnStatus>, ApiError> {
    Ok(Json(turns.interrupt(&principal.account, &session).await?))
}

#[derive(Deserialize)]
struct ActionPath {
    action_id: ActionId,
}

async fn resolve(
    State(turns): State<Turns>,
    principal: Principal,
    SessionPath(session): SessionPath,
    ApiPath(ActionPath { action_id }): ApiPath<ActionPath>,
    IdempotencyKey(key): IdempotencyKey,
    ApiJson(request): ApiJson<ActionResolutionRequest>,
) -> Result<Json<ActionResolution>, ApiError> {
    let resolution = turns
        .resolve(&principal.account, &session, &action_id, &key, request)
        .await?;
    Ok(Json(resolution))
}

async fn page(
    State(log): State<EventLog>,
    principal: Principal,
    SessionPath(session): SessionPath,
    PageQuery(request): PageQuery,
) -> Result<Encoded<EventPage>, ApiError> {
    let page = log.page(&principal.account, &session, &request).await?;
    Ok(page.json().clone())
}

/// A page GET's query: read by [`PageRequest::from_plain_query`] when it can, else by
/// [`ApiQuery`], which reads the same or says what is wrong.
struct PageQuery(PageRequest);

impl<S: Send + Sync> FromRequestParts<S> for PageQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        if let Some(request) = PageRequest::from_plain_query(query) {
            return Ok(Self(request));
        }
        let ApiQuery(request) = ApiQuery::from_request_parts(parts, state).await?;
        Ok(Self(request))
    }
}

#[derive(Deserialize)]
struct StreamQuery {
    cursor: Option<String>,
}

async fn stream(
    State(log): State<EventLog>,
    State(SseKeepAlive(keep_alive)): State<SseKeepAlive>,
    principal: Principal,
    SessionPath(session): SessionPath,
    ApiQuery(query): ApiQuery<StreamQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let last_event_id = headers
        .get("last-event-id")
        .map(|id| id.to_str().unwrap_or_default());
    let followed = log
        .stream(
            &principal.account,
            &session,
            query.cursor.as_deref(),
            last_event_id,
        )
        .await?;
    // The stream ends when its token expires; the client resumes from its last page id with
    // a fresh token.
    let events = followed
        .filter_map(|item| async move { frame(item).map(Ok) })
        .take_until(tokio::time::sleep(principal.remaining()));
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(keep_alive)))
}

/// The SSE frame of a streamed item: a `page` with its cursor as id, a `message` without one,
/// or a `resync`.
fn frame(item: StreamItem) -> Option<Event> {
    match item {
        StreamItem::Page(page) => Some(
            Event::default()
                .event("page")
                .id(page.cursor())
                .data(page.json().text()),
        ),
        StreamItem::Snapshot(snapshot) => {
            Event::default().event("message").json_data(&snapshot).ok()
        }
        StreamItem::Closing => Some(
            Event::default().comment("the server is draining; resume from the id of the last page"),
        ),
        StreamItem::Resync(reason) => Resync::builder()
            .reason(reason)
            .try_into()
            .ok()
            .and_then(|resync: Resync| Event::default().event("resync").json_data(resync).ok()),
    }
}

async fn get_session(
    State(sessions): State<Sessions>,
    principal: Principal,
    SessionPath(id): SessionPath,
) -> Result<Encoded<Session>, ApiError> {
    Ok(sessions.get(&principal.account, &id).await?)
}

async fn update_session(
    State(sessions): State<Sessions>,
    principal: Principal,
    SessionPath(id): SessionPath,
    ApiJson(update): ApiJson<SessionUpdate>,
) -> Result<Json<Session>, ApiError> {
    Ok(Json(
        sessions.update(&principal.account, &id, &update).await?,
    ))
}

async fn delete_session(
    State(sessions): State<Sessions>,
    principal: Principal,
    SessionPath(id): SessionPath,
) -> Result<StatusCode, ApiError> {
    sessions.delete(&principal.account, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
