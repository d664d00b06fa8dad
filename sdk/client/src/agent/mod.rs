//! Agent helpers over the generated [`Client`]: wait for a turn to settle, follow a session's
//! log as a [`futures_util::Stream`] that survives cursor errors, and resolve actions with an
//! idempotency key that retries reuse.
//!
//! ```no_run
//! # async fn run(client: intent_sdk::Client) -> Result<(), intent_sdk::Error> {
//! use intent_sdk::agent;
//! let (started, outcome) = agent::run_turn(&client, "send 1 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8", None).await?;
//! if let Some(action) = &outcome.action {
//!     let resolution = agent::resolve(&client, &started.session_id, action, agent::Decision::Approve).await?;
//!     let outcome = agent::wait_turn(&client, &started.session_id, &started.turn_id, &outcome.cursor).await?;
//!     println!("{} after revision {}", outcome.state, resolution.revision);
//! }
//! # Ok(())
//! # }
//! ```

mod sse;

use std::time::Duration;

use futures_util::Stream;
use intent_models::{
    ActionRequest, ActionResolution, ActionResolutionRequest, ActionResult, AgentEvent,
    ChatStartRequest, ChatStartResponse, EventPage, TurnState,
};

use crate::{Client, Error};

pub use sse::{StreamItem, follow_sse};

/// How long one long-poll waits on the server, in milliseconds.
const LONG_POLL_MS: i64 = 25_000;

/// First and longest delay between retries after a transport error.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Attempts of one resolution before its error is returned.
const RESOLVE_ATTEMPTS: u32 = 4;

/// Where a turn stopped: a state other than `processing`, with what the log said meanwhile.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// The turn's state: `complete`, `failed`, `interrupted` or `awaiting_action`.
    pub state: TurnState,
    /// The events read while waiting, in sequence order.
    pub events: Vec<AgentEvent>,
    /// The pending action when the state is `awaiting_action`.
    pub action: Option<ActionRequest>,
    /// The cursor after the last event read; wait again from here after resolving the action.
    pub cursor: String,
}

/// Starts a turn with `message` (in `session_id`, or a new session) and waits for it to settle.
pub async fn run_turn(
    client: &Client,
    message: &str,
    session_id: Option<&str>,
) -> Result<(ChatStartResponse, TurnOutcome), Error> {
    let request = ChatStartRequest {
        message: message.parse().map_err(invalid)?,
        session_id: session_id.map(str::parse).transpose().map_err(invalid)?,
    };
    let started = client.start_chat(&request).await?.into_inner();
    let outcome = wait_turn(
        client,
        &started.session_id,
        &started.turn_id,
        &started.cursor,
    )
    .await?;
    Ok((started, outcome))
}

/// Long-polls the session from `cursor` until turn `turn_id` is in a state other than
/// `processing` and no more events are ready (part 3, rules 3 and 4).
pub async fn wait_turn(
    client: &Client,
    session_id: &str,
    turn_id: &str,
    cursor: &str,
) -> Result<TurnOutcome, Error> {
    let session = session_id.parse().map_err(invalid)?;
    let mut outcome = TurnOutcome {
        state: TurnState::Processing,
        events: Vec::new(),
        action: None,
        cursor: cursor.to_owned(),
    };
    loop {
        let cursor = outcome.cursor.parse().map_err(invalid)?;
        let page = client
            .get_chat_events(&session, Some(&cursor), None, Some(LONG_POLL_MS))
            .await?
            .into_inner();
        for event in &page.events {
            if event.turn_id() != turn_id {
                continue;
            }
            match event {
                AgentEvent::TurnState { state, .. } => outcome.state = *state,
                AgentEvent::Action { action, .. } => outcome.action = Some(action.clone()),
                _ => {}
            }
        }
        outcome.events.extend(page.events);
        outcome.cursor = page.cursor;
        if outcome.state != TurnState::Processing && !page.has_more {
            if outcome.state != TurnState::AwaitingAction {
                outcome.action = None;
            }
            return Ok(outcome);
        }
    }
}

/// What the log stream hands its consumer.
#[derive(Debug, Clone, PartialEq)]
pub enum LogItem {
    /// The next event, in sequence order; none is delivered twice or skipped.
    Event(Box<AgentEvent>),
    /// The cursor could not be followed (invalid, expired, or the log had a gap): drop the view
    /// built so far; the events that follow start again at the retained log's start.
    Restart,
}

struct Follow {
    client: Client,
    session: crate::types::GetChatEventsSessionId,
    cursor: Option<String>,
    /// The last sequence number delivered.
    last: u64,
    ready: std::collections::VecDeque<LogItem>,
    backoff: Duration,
    done: bool,
}

/// Follows a session's log from `cursor` (or from the retained log's start) by long-poll pages,
/// forever. Transport errors are yielded and retried with backoff from the last cursor; a 400
/// `invalid_cursor` or a 410 yields [`LogItem::Restart`] and reconciles from a page without a
/// cursor; any other error is yielded and ends the stream.
pub fn follow(
    client: &Client,
    session_id: &str,
    cursor: Option<String>,
) -> Result<impl Stream<Item = Result<LogItem, Error>> + use<>, Error> {
    let state = Follow {
        client: client.clone(),
        session: session_id.parse().map_err(invalid)?,
        cursor,
        last: 0,
        ready: Default::default(),
        backoff: BACKOFF_START,
        done: false,
    };
    Ok(futures_util::stream::unfold(
        state,
        |mut state| async move {
            let item = state.next().await?;
            Some((item, state))
        },
    ))
}

impl Follow {
    async fn next(&mut self) -> Option<Result<LogItem, Error>> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            match self.page().await {
                Ok(page) => {
                    self.backoff = BACKOFF_START;
                    self.take(page);
                }
                Err(Error::InvalidCursor(_) | Error::CursorExpired(_)) => self.restart(),
                Err(error @ Error::Transport(_)) => {
                    tokio::time::sleep(self.backoff).await;
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                    return Some(Err(error));
                }
                Err(error) => {
                    self.done = true;
                    return Some(Err(error));
                }
            }
        }
    }

    async fn page(&self) -> Result<EventPage, Error> {
        let cursor = self
            .cursor
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(invalid)?;
        Ok(self
            .client
            .get_chat_events(&self.session, cursor.as_ref(), None, Some(LONG_POLL_MS))
            .await?
            .into_inner())
    }

    fn restart(&mut self) {
        self.cursor = None;
        self.last = 0;
        self.ready.push_back(LogItem::Restart);
    }

    fn take(&mut self, page: EventPage) {
        for event in page.events {
            let seq = event.seq();
            if seq <= self.last {
                continue;
            }
            if self.last != 0 && seq != self.last + 1 {
                // A gap: the view cannot be trusted; start again from the retained log.
                self.restart();
                return;
            }
            self.last = seq;
            self.ready.push_back(LogItem::Event(Box::new(event)));
        }
        self.cursor = Some(page.cursor);
    }
}

/// The client's answer to an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Approve the reviewed Build.
    Approve,
    /// Reject it.
    Reject,
}

/// Resolves `action` at its revision with a result naming its Build's digest. One idempotency
/// key is made for the resolution and reused by every retry (after a transport error, a 409
/// `idempotency_in_flight`, or a 429 once its `Retry-After` has passed), so the server applies it
/// at most once.
pub async fn resolve(
    client: &Client,
    session_id: &str,
    action: &ActionRequest,
    decision: Decision,
) -> Result<ActionResolution, Error> {
    let digest = action.build.digest.to_string().parse().map_err(invalid)?;
    let result = match decision {
        Decision::Approve => ActionResult::Approved { digest },
        Decision::Reject => ActionResult::Rejected {
            digest,
            reason: None,
        },
    };
    let body = ActionResolutionRequest {
        revision: action.revision,
        result,
    };
    let key = idempotency_key().parse().map_err(invalid)?;
    let session = session_id.parse().map_err(invalid)?;
    let action_id = action.action_id.to_string().parse().map_err(invalid)?;
    let mut backoff = BACKOFF_START;
    let mut attempt = 1;
    loop {
        match client
            .resolve_action(&session, &action_id, &key, &body)
            .await
        {
            Ok(resolution) => return Ok(resolution.into_inner()),
            Err(error) => {
                let error = Error::from(error);
                let wait = match &error {
                    Error::RateLimited { retry_after, .. } => Some(retry_after.unwrap_or(backoff)),
                    Error::Transport(_) => Some(backoff),
                    _ if error.code() == Some("idempotency_in_flight") => Some(backoff),
                    _ => None,
                };
                match wait {
                    Some(wait) if attempt < RESOLVE_ATTEMPTS => tokio::time::sleep(wait).await,
                    _ => return Err(error),
                }
            }
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
        attempt += 1;
    }
}

/// A fresh idempotency key: 32 random hex digits.
fn idempotency_key() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system provides randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn invalid(error: impl std::fmt::Display) -> Error {
    Error::InvalidInput(error.to_string())
}
