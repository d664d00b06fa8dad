//! Reading a session's log: long-poll pages (part 4.2) and the SSE projection (part 6). Both
//! read the same store and the same cursors.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use intent_models::{AgentEvent, ErrorCode, EventPage, Resync, ResyncReason};
use serde::Deserialize;
use tokio::time::Instant;

use super::cursor::CursorError;
use super::hub::Subscription;
use super::{no_session, session_id};
use crate::error::ApiError;
use crate::gateway::Principal;
use crate::store::agent::LogRead;
use crate::{AppState, now};

/// Longest long-poll (part 8).
const MAX_WAIT_MS: i64 = 30_000;
/// Events per page unless `limit` says otherwise, and the most it may say.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 500;

#[derive(Deserialize)]
pub(super) struct PageQuery {
    cursor: Option<String>,
    wait: Option<i64>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
pub(super) struct StreamQuery {
    cursor: Option<String>,
}

/// A page of `read`, for `account`, after `after`, at most `limit` events.
fn make_page(
    state: &AppState,
    account: &str,
    session: &str,
    after: i64,
    read: &LogRead,
    limit: i64,
) -> EventPage {
    let count = read
        .events
        .len()
        .min(usize::try_from(limit).unwrap_or(usize::MAX));
    let events: Vec<AgentEvent> = read.events[..count]
        .iter()
        .map(|body| serde_json::from_str(body).expect("stored events are valid AgentEvents"))
        .collect();
    let last = events.last().map_or(after, seq_of);
    EventPage {
        cursor: state.agent().cursor(account, session, last),
        events,
        has_more: read.events.len() > count || last < read.last_seq,
        session_id: session.to_owned(),
    }
}

fn seq_of(event: &AgentEvent) -> i64 {
    i64::try_from(event.seq()).expect("sequence numbers fit in i64")
}

/// Opens `cursor` for `account` on `session`: its position, unless it is invalid (400) or
/// expired or older than the retained log (410).
async fn open_cursor(
    state: &AppState,
    account: &str,
    session: &str,
    cursor: &str,
) -> Result<Result<i64, CursorError>, ApiError> {
    let after = match state.agent().cursors.open(account, session, cursor, now()) {
        Ok(after) => after,
        Err(error) => return Ok(Err(error)),
    };
    let read = state.store().read_log(session, after, 0).await?;
    Ok(if after < read.pruned_through {
        Err(CursorError::Expired)
    } else if after > read.last_seq {
        Err(CursorError::Invalid)
    } else {
        Ok(after)
    })
}

fn cursor_error(error: CursorError) -> ApiError {
    match error {
        CursorError::Invalid => ApiError::new(
            ErrorCode::InvalidCursor,
            "the cursor is malformed or belongs to another session; request the page without a cursor",
        ),
        CursorError::Expired => ApiError::new(
            ErrorCode::CursorExpired,
            "the cursor expired or its events left the retained log; request the page without a cursor",
        ),
    }
}

/// The position before the first event of the retained log of `session`.
async fn retained_start(state: &AppState, session: &str) -> Result<i64, ApiError> {
    Ok(state.store().read_log(session, 0, 0).await?.pruned_through)
}

pub(super) async fn page(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<EventPage>, ApiError> {
    let session = session_id(path)?;
    let Query(query) =
        query.map_err(|e| ApiError::new(ErrorCode::InvalidParameter, e.body_text()))?;
    let wait = query.wait.unwrap_or(0);
    if !(0..=MAX_WAIT_MS).contains(&wait) {
        return Err(ApiError::new(
            ErrorCode::InvalidParameter,
            format!("wait must be 0 to {MAX_WAIT_MS} milliseconds"),
        ));
    }
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::new(
            ErrorCode::InvalidParameter,
            format!("limit must be 1 to {MAX_LIMIT}"),
        ));
    }
    let account = &principal.account;
    if state.store().session(account, &session).await?.is_none() {
        return Err(no_session(&session));
    }
    // Subscribe before reading, so that an append after the read wakes the wait below.
    let mut subscription = state.agent().hub.subscribe(&session);
    let after = match &query.cursor {
        Some(cursor) => open_cursor(&state, account, &session, cursor)
            .await?
            .map_err(cursor_error)?,
        None => retained_start(&state, &session).await?,
    };
    let deadline = Instant::now() + Duration::from_millis(wait.unsigned_abs());
    loop {
        let read = state.store().read_log(&session, after, limit + 1).await?;
        if after < read.pruned_through {
            return Err(cursor_error(CursorError::Expired));
        }
        if !read.events.is_empty() || Instant::now() >= deadline {
            return Ok(Json(make_page(
                &state, account, &session, after, &read, limit,
            )));
        }
        let woken = tokio::time::timeout_at(deadline, subscription.appended.changed()).await;
        if matches!(woken, Ok(Err(_))) {
            // The session was deleted while we waited.
            return Err(no_session(&session));
        }
    }
}

/// Events per SSE `page`.
const STREAM_PAGE: i64 = 100;

pub(super) async fn stream(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<StreamQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let session = session_id(path)?;
    let Query(query) =
        query.map_err(|e| ApiError::new(ErrorCode::InvalidParameter, e.body_text()))?;
    let account = principal.account;
    if state.store().session(&account, &session).await?.is_none() {
        return Err(no_session(&session));
    }
    let subscription = state.agent().hub.subscribe(&session);
    let mut pending = VecDeque::new();
    // A `cursor` the client wrote is checked like the page's; a Last-Event-ID that the browser
    // resends on its own cannot be fixed by the client, so it gets a resync instead.
    let resume = match (&query.cursor, headers.get("last-event-id")) {
        (Some(cursor), _) => match open_cursor(&state, &account, &session, cursor).await? {
            Err(CursorError::Invalid) => return Err(cursor_error(CursorError::Invalid)),
            other => Some(other),
        },
        (None, Some(id)) => {
            let id = id.to_str().unwrap_or_default();
            Some(open_cursor(&state, &account, &session, id).await?)
        }
        (None, None) => None,
    };
    let after = match resume {
        Some(Ok(after)) => after,
        Some(Err(error)) => {
            pending.push_back(resync(match error {
                CursorError::Invalid => ResyncReason::CursorInvalid,
                CursorError::Expired => ResyncReason::CursorExpired,
            }));
            retained_start(&state, &session).await?
        }
        None => retained_start(&state, &session).await?,
    };
    let keep_alive = state.agent().sse_keep_alive;
    let projection = Projection {
        send_page: resume.is_none() || !pending.is_empty(),
        state,
        account,
        session,
        after,
        subscription,
        pending,
    };
    let events = futures_util::stream::unfold(projection, |mut projection| async move {
        let event = projection.next().await?;
        Some((Ok(event), projection))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(keep_alive)))
}

fn resync(reason: ResyncReason) -> Event {
    Event::default()
        .event("resync")
        .json_data(Resync { reason })
        .expect("a resync serializes")
}

/// One SSE reader's position in the log.
struct Projection {
    state: AppState,
    account: String,
    session: String,
    /// The last event sent.
    after: i64,
    subscription: Subscription,
    /// Events to send before reading the log again.
    pending: VecDeque<Event>,
    /// Send a page even when it is empty: the reader needs a cursor to start from.
    send_page: bool,
}

impl Projection {
    /// The next SSE event; `None` ends the stream (the session was deleted, or the store
    /// failed).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            let read = match self
                .state
                .store()
                .read_log(&self.session, self.after, STREAM_PAGE + 1)
                .await
            {
                Ok(read) => read,
                Err(error) => {
                    tracing::error!(error = &error as &dyn std::error::Error, "reading the log");
                    return None;
                }
            };
            if self.after < read.pruned_through {
                // The reader fell behind the retained log: no safe delta exists.
                self.after = read.pruned_through;
                self.send_page = true;
                return Some(resync(ResyncReason::Lagged));
            }
            if !read.events.is_empty() || self.send_page {
                self.send_page = false;
                let page = make_page(
                    &self.state,
                    &self.account,
                    &self.session,
                    self.after,
                    &read,
                    STREAM_PAGE,
                );
                self.after = page.events.last().map_or(self.after, seq_of);
                return Event::default()
                    .event("page")
                    .id(page.cursor.clone())
                    .json_data(&page)
                    .ok();
            }
            tokio::select! {
                changed = self.subscription.appended.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                snapshot = self.subscription.snapshots.recv() => match snapshot {
                    Ok(snapshot) => {
                        return Event::default().event("message").json_data(&snapshot).ok();
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    }
}
