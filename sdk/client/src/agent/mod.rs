//! The Agent resource: turns, sessions, a session's log as a [`Stream`] over long-poll pages or
//! SSE, and actions resolved with an idempotency key that retries reuse.
//!
//! ```no_run
//! # async fn run(intent: intent_sdk::Intent) -> Result<(), intent_sdk::Error> {
//! use intent_sdk::agent::Decision;
//! let agent = intent.agent();
//! let outcome = agent.run_turn("send 1 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8", None).await?;
//! if let Some(action) = &outcome.action {
//!     let resolution = agent.resolve(&outcome.session_id, action, Decision::Approve).await?;
//!     let done = agent.wait_turn(&outcome.session_id, &outcome.turn_id, &outcome.cursor).await?;
//!     println!("{} after revision {}", done.state, resolution.revision);
//! }
//! # Ok(())
//! # }
//! ```

mod event_stream;
mod follow;
mod poll;
mod sse;

use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use intent_models::{
    ActionRequest, ActionResolution, ActionResolutionRequest, ActionResult, AgentEvent,
    ChatStartRequest, ChatStartResponse, EventPage, Session, SessionId, SessionUpdate, TurnState,
    TurnStatus,
};

use crate::Error;
use crate::RetryPolicy;
use crate::error::invalid;
use crate::raw::Client;
use crate::raw::builder;
use crate::raw::types::{GetChatEventsCursor, ResolveActionActionId, ResolveActionIdempotencyKey};

use follow::Step;
pub use follow::{LogItem, Position};

/// How long one long-poll waits on the server, in milliseconds.
const LONG_POLL_MS: i64 = 25_000;

/// The Agent operations of an [`Intent`](crate::Intent).
///
/// Owns what it needs (a clone of the [`Intent`](crate::Intent)'s client, which shares its
/// connections and tokens), so it is `Clone + Send + 'static` and moves into a spawned task. The
/// lifetime names no borrow: every handle is `Agent<'static>`, and code written as `Agent<'_>`
/// still compiles.
#[derive(Debug, Clone)]
pub struct Agent<'a> {
    pub(crate) client: Client,
    pub(crate) borrows: PhantomData<&'a ()>,
}

/// How a turn settled: its final state (not `processing`), its events, and the action it
/// awaits, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The turn's session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// `awaiting_action`, `complete`, `interrupted` or `failed`.
    pub state: TurnState,
    /// The events read while waiting, in sequence order (every turn's, as the log has them).
    pub events: Vec<AgentEvent>,
    /// The action the turn awaits when its state is `awaiting_action`.
    pub action: Option<ActionRequest>,
    /// The cursor after the last event read; wait again from here after resolving the action.
    pub cursor: String,
}

impl TurnOutcome {
    /// Takes `event` read while waiting, unless it was read already (the follower restarted its
    /// view); a state of the turn at or before `history` is one it has left.
    fn read(&mut self, event: AgentEvent, history: u64) {
        if self
            .events
            .last()
            .is_some_and(|read| read.seq() >= event.seq())
        {
            return;
        }
        if event.turn_id() == self.turn_id && event.seq() > history {
            match &event {
                AgentEvent::TurnState { state, .. } => self.state = *state,
                AgentEvent::Action { action, .. } => self.action = Some(action.clone()),
                _ => {}
            }
        }
        self.events.push(event);
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

impl<'a> Agent<'a> {
    /// Starts a turn with `message` (in `session`, or a new session) and waits for it to
    /// settle.
    pub async fn run_turn(
        &self,
        message: &str,
        session: Option<&str>,
    ) -> Result<TurnOutcome, Error> {
        let request: ChatStartRequest = ChatStartRequest::builder()
            .message(message)
            .session_id(session.map(str::parse).transpose().map_err(invalid)?)
            .try_into()
            .map_err(invalid)?;
        self.within_deadline(async {
            let started = self.start(&request).await?;
            self.settle(&started.session_id, &started.turn_id, &started.cursor, 0)
                .await
        })
        .await
    }

    /// Starts a turn and returns at once (`POST /v1/agent/chat`).
    pub async fn start(&self, request: &ChatStartRequest) -> Result<ChatStartResponse, Error> {
        Ok(self
            .client
            .start_chat()
            .body(request.clone())
            .send()
            .await?
            .into_inner())
    }

    /// Long-polls the session from `cursor` until turn `turn_id` is in a state other than
    /// `processing` and no more events are ready (part 3, rules 3 and 4), within the client's
    /// turn deadline. A cursor that expired or no longer reads is reconciled: the log is read
    /// again from its retained start, and the events already read are left out.
    ///
    /// A turn that settled before `cursor` (a cursor saved after its last event) is answered
    /// from the log at once ([`Agent::read_log`]): its state and the action it awaits, with no
    /// events read after `cursor`.
    pub async fn wait_turn(
        &self,
        session: &str,
        turn_id: &str,
        cursor: &str,
    ) -> Result<TurnOutcome, Error> {
        self.within_deadline(async {
            let log = self.read_log(session).await?;
            let (state, action) = match Standing::of(&log, turn_id) {
                Standing::Ended(state) => (state, None),
                Standing::Awaiting { action, .. } => (TurnState::AwaitingAction, Some(*action)),
                Standing::Running(since) => {
                    return self.settle(session, turn_id, cursor, since).await;
                }
            };
            Ok(TurnOutcome {
                session_id: session.to_owned(),
                turn_id: turn_id.to_owned(),
                state,
                events: Vec::new(),
                action,
                cursor: cursor.to_owned(),
            })
        })
        .await
    }

    /// Every event of the session's retained log, read page by page once without waiting, as
    /// it stands when read (the way openai-python's auto-pagination reads a list).
    pub async fn read_log(&self, session: &str) -> Result<Vec<AgentEvent>, Error> {
        let session = session_id(session)?;
        let (mut events, mut cursor) = (Vec::new(), None);
        loop {
            let page = crate::agent::events(&self.client, &session, cursor, Some(0))
                .send()
                .await?
                .into_inner();
            events.extend(page.events);
            if !page.has_more {
                return Ok(events);
            }
            cursor = Some(page.cursor.parse().map_err(invalid)?);
        }
    }

    /// The latest state of turn `turn` in the session's log ([`Agent::read_log`]); `None` when
    /// the log holds none (a turn of another session, or one whose events the log no longer
    /// retains).
    pub async fn turn_state(&self, session: &str, turn: &str) -> Result<Option<TurnState>, Error> {
        let log = self.read_log(session).await?;
        let states = log.iter().filter(|event| event.turn_id() == turn);
        Ok(states.fold(None, |state, event| match event {
            AgentEvent::TurnState { state, .. } => Some(*state),
            _ => state,
        }))
    }

    /// `turn` within the client's turn deadline, else [`Error::Deadline`].
    async fn within_deadline(
        &self,
        turn: impl Future<Output = Result<TurnOutcome, Error>>,
    ) -> Result<TurnOutcome, Error> {
        let deadline = self.client.inner.turn_deadline;
        tokio::time::timeout(deadline, turn)
            .await
            .unwrap_or(Err(Error::Deadline(deadline)))
    }

    /// Follows the session's log from `cursor` with the follower ([`Agent::follow`]'s state
    /// machine) until turn `turn_id` is in a state other than `processing` and no more events
    /// are ready (part 3, rules 3 and 4). A state at or before `history` (a `seq`) is one the
    /// turn has left. Events already read are left out when the follower restarts the view;
    /// the errors it recovers from are waited out, and the one that ends it is returned.
    async fn settle(
        &self,
        session: &str,
        turn_id: &str,
        cursor: &str,
        history: u64,
    ) -> Result<TurnOutcome, Error> {
        let transport = poll::Poll::new(&self.client, session_id(session)?);
        let from = Position::after_page(cursor);
        let mut follower = follow::Follower::new(transport, from, self.client.inner.retry.clone());
        let mut outcome = TurnOutcome {
            session_id: session.to_owned(),
            turn_id: turn_id.to_owned(),
            state: TurnState::Processing,
            events: Vec::new(),
            action: None,
            cursor: cursor.to_owned(),
        };
        let mut last = None;
        loop {
            match follower.advance().await {
                Some(Step::Item(Ok(LogItem::Event { event, .. }))) => outcome.read(*event, history),
                Some(Step::Item(Ok(LogItem::Restart | LogItem::Snapshot(_))) | Step::Taken) => {}
                Some(Step::Item(Err(error))) => {
                    last = Some(error);
                    continue;
                }
                None => return Err(last.unwrap_or(Error::Disconnected("the log ended".into()))),
            }
            if outcome.state.is_settled() && follower.caught_up() {
                if let Some(cursor) = follower.cursor() {
                    outcome.cursor = cursor.to_owned();
                }
                if outcome.state != TurnState::AwaitingAction {
                    outcome.action = None;
                }
                return Ok(outcome);
            }
        }
    }

    /// One page of the session's log after `cursor`, waiting up to `wait_ms` for an event.
    pub async fn page(
        &self,
        session: &str,
        cursor: Option<&str>,
        wait_ms: Option<i64>,
    ) -> Result<EventPage, Error> {
        let cursor = cursor.map(str::parse).transpose().map_err(invalid)?;
        let page = events(&self.client, &session_id(session)?, cursor, wait_ms)
            .send()
            .await?;
        Ok(page.into_inner())
    }

    /// Follows the session's log by long-poll pages from `cursor` (or the retained log's start),
    /// forever: every event once, in order, across expired tokens, cursor errors and lost
    /// connections.
    ///
    /// Errors travel in the stream. Those that retrying can fix (the transport, a broken
    /// stream, a status the client's [`RetryPolicy`] retries) are retried from the last cursor
    /// after the policy's backoff (or the `Retry-After`), each call sent once; the failure that
    /// spends a call's attempts is handed out and the stream goes on. Under
    /// [`RetryPolicy::none`] the first of them ends it. A 400 `invalid_cursor`, a 410, a gap or
    /// a `resync` hand out [`LogItem::Restart`]. Any other error (a 401 once the token could not
    /// be renewed, 403, 404, a token source that fails) is handed out and ends the stream.
    pub fn follow(&self, session: &str, cursor: Option<&str>) -> LogStream {
        self.follow_from(session, Position::from_cursor(cursor.map(str::to_owned)))
    }

    /// Follows the session's log by long-poll pages like [`Agent::follow`], from `position`:
    /// the [`Position`] of the last event a consumer handled, kept across a restart.
    pub fn follow_from(&self, session: &str, position: Position) -> LogStream {
        let transport = session_id(session).map(|session| poll::Poll::new(&self.client, session));
        follow_or_fail(transport, position, self.client.inner.retry.clone())
    }

    /// Follows the session's log over SSE like [`Agent::follow`]; it also hands out the
    /// transient [`LogItem::Snapshot`]s.
    pub fn follow_sse(&self, session: &str, cursor: Option<&str>) -> LogStream {
        self.follow_sse_from(session, Position::from_cursor(cursor.map(str::to_owned)))
    }

    /// Follows turn `turn` of the session by long-poll pages like [`Agent::follow`], from
    /// `cursor` (the one [`Agent::start`] answered), and ends once the turn settles
    /// ([`TurnState::is_settled`]): its events only, the action it awaits on the way. Resolve
    /// the action, then follow the turn again from the last event's [`Position`]
    /// ([`Agent::follow_turn_from`]) to read it to its end.
    ///
    /// ```no_run
    /// # async fn run(intent: intent_sdk::Intent) -> Result<(), intent_sdk::Error> {
    /// use futures_util::StreamExt;
    /// use intent_sdk::agent::LogItem;
    /// use intent_sdk::models::ChatStartRequest;
    ///
    /// let request: ChatStartRequest = ChatStartRequest::builder().message("hello").try_into()?;
    /// let started = intent.agent().start(&request).await?;
    /// let (session, turn) = (&started.session_id, &started.turn_id);
    /// let mut turn = intent.agent().follow_turn(session, turn, Some(&started.cursor));
    /// while let Some(item) = turn.next().await {
    ///     if let LogItem::Event { event, .. } = item? {
    ///         println!("{event}");
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn follow_turn(&self, session: &str, turn: &str, cursor: Option<&str>) -> LogStream {
        self.follow_turn_from(
            session,
            turn,
            Position::from_cursor(cursor.map(str::to_owned)),
        )
    }

    /// Follows turn `turn` like [`Agent::follow_turn`], from `position`. Resumed from a saved
    /// position, it reads the log first ([`Agent::read_log`]), so that an app restarted at any
    /// point of a turn never waits on a turn that already settled: a turn that ended
    /// (`complete`, `failed`, `interrupted`) ends the stream at once, and a turn awaiting an
    /// action it has not had resolved hands out that action's event again (at `position`) and
    /// ends.
    pub fn follow_turn_from(&self, session: &str, turn: &str, position: Position) -> LogStream {
        use futures_util::StreamExt;
        // Read once, before the first item: the turn's standing in the log.
        let resumed = (!position.is_start())
            .then(|| (position.clone(), self.client.clone(), session.to_owned()));
        let log = self.follow_from(session, position);
        // The follower, the turn, what to read before following, and the `seq` up to which a
        // settled state is history.
        let first = (log, turn.to_owned(), resumed, 0);
        LogStream::new(futures_util::stream::unfold(
            Some(first),
            |state| async move {
                let (mut log, turn, resumed, mut history) = state?;
                if let Some((position, client, session)) = resumed {
                    let agent = Agent {
                        client,
                        borrows: PhantomData,
                    };
                    let standing = match agent.read_log(&session).await {
                        Ok(read) => Standing::of(&read, &turn),
                        Err(error) => return Some((Err(error), None)),
                    };
                    match standing {
                        Standing::Ended(_) => return None,
                        Standing::Awaiting { event, .. } => {
                            return Some((Ok(LogItem::Event { event, position }), None));
                        }
                        Standing::Running(since) => history = since,
                    }
                }
                loop {
                    let item = log.next().await?;
                    let settled = match &item {
                        Ok(LogItem::Event { event, .. }) if event.turn_id() != turn => continue,
                        Ok(LogItem::Event { event, .. }) => {
                            event.seq() > history
                                && matches!(
                                    &**event,
                                    AgentEvent::TurnState { state, .. } if state.is_settled()
                                )
                        }
                        _ => false,
                    };
                    return Some((item, (!settled).then_some((log, turn, None, history))));
                }
            },
        ))
    }

    /// Follows the session's log over SSE like [`Agent::follow_sse`], from `position`.
    pub fn follow_sse_from(&self, session: &str, position: Position) -> LogStream {
        let transport = session_id(session).map(|session| sse::Sse::new(&self.client, session));
        follow_or_fail(transport, position, self.client.inner.retry.clone())
    }

    /// Resolves `action` at its revision with a result naming its Build's digest. One
    /// idempotency key is made for the resolution and reused by every retry of the client's
    /// [`RetryPolicy`] (after a transport error, a 409 `idempotency_in_flight`, or a 429 once its
    /// `Retry-After` has passed), so the server applies it at most once.
    pub async fn resolve(
        &self,
        session: &str,
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
        let body: ActionResolutionRequest = ActionResolutionRequest::builder()
            .revision(action.revision)
            .result(result)
            .try_into()
            .map_err(invalid)?;
        let key: ResolveActionIdempotencyKey = idempotency_key().parse().map_err(invalid)?;
        let session = session_id(session)?;
        let action_id: ResolveActionActionId =
            action.action_id.to_string().parse().map_err(invalid)?;
        // The client's retry policy resends it on a transport failure, a 429 or while its
        // duplicate is in flight (it carries its key).
        let resolution = self
            .client
            .resolve_action()
            .session_id(session)
            .action_id(action_id)
            .idempotency_key(key)
            .body(body)
            .send()
            .await?;
        Ok(resolution.into_inner())
    }

    /// The session (`GET /v1/agent/sessions/{sessionId}`).
    pub async fn session(&self, session: &str) -> Result<Session, Error> {
        Ok(self
            .client
            .get_session()
            .session_id(session_id(session)?)
            .send()
            .await?
            .into_inner())
    }

    /// Renames or archives the session.
    pub async fn update_session(
        &self,
        session: &str,
        update: &SessionUpdate,
    ) -> Result<Session, Error> {
        let updated = self
            .client
            .update_session()
            .session_id(session_id(session)?)
            .body(update.clone())
            .send()
            .await?;
        Ok(updated.into_inner())
    }

    /// Deletes the session and its log.
    pub async fn delete_session(&self, session: &str) -> Result<(), Error> {
        self.client
            .delete_session()
            .session_id(session_id(session)?)
            .send()
            .await?;
        Ok(())
    }

    /// Interrupts the session's active turn.
    pub async fn interrupt(&self, session: &str) -> Result<TurnStatus, Error> {
        let status = self
            .client
            .interrupt_turn()
            .session_id(session_id(session)?)
            .send()
            .await?;
        Ok(status.into_inner())
    }
}

/// A session's log as it is followed: a [`Stream`] of [`LogItem`]s that is `Unpin`, so that
/// `while let Some(item) = log.next().await` reads it as it is.
pub struct LogStream(Pin<Box<dyn Stream<Item = Result<LogItem, Error>> + Send>>);

impl LogStream {
    fn new(stream: impl Stream<Item = Result<LogItem, Error>> + Send + 'static) -> Self {
        Self(Box::pin(stream))
    }
}

impl Stream for LogStream {
    type Item = Result<LogItem, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.as_mut().poll_next(cx)
    }
}

impl std::fmt::Debug for LogStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogStream")
    }
}

/// The follower over `transport`, or a stream of the one error that made it impossible.
fn follow_or_fail<T: follow::Transport>(
    transport: Result<T, Error>,
    from: Position,
    retry: RetryPolicy,
) -> LogStream {
    match transport {
        Ok(transport) => LogStream::new(follow::follow(transport, from, retry)),
        Err(error) => LogStream::new(futures_util::stream::once(async { Err(error) })),
    }
}

/// `GET /v1/agent/chat/{sessionId}` from `cursor` (or the retained log's start), waiting up to
/// `wait_ms` for an event.
pub(crate) fn events<'c>(
    client: &'c Client,
    session: &SessionId,
    cursor: Option<GetChatEventsCursor>,
    wait_ms: Option<i64>,
) -> builder::GetChatEvents<'c> {
    let mut request = client.get_chat_events().session_id(session.clone());
    if let Some(cursor) = cursor {
        request = request.cursor(cursor);
    }
    if let Some(wait_ms) = wait_ms {
        request = request.wait(wait_ms);
    }
    request
}

/// Where a turn stands in its session's log, read before resuming a follow of it.
enum Standing {
    /// It ended (`complete`, `failed`, `interrupted`).
    Ended(TurnState),
    /// It awaits `action`, raised by `event`, which the log shows no result of.
    Awaiting {
        /// The entry that raised it.
        event: Box<AgentEvent>,
        /// The action.
        action: Box<ActionRequest>,
    },
    /// It runs (or resumes after a resolution) since its state event at this `seq` (0 before
    /// any): a settled state before it is history.
    Running(u64),
}

impl Standing {
    /// Turn `turn` as `log` shows it.
    fn of(log: &[AgentEvent], turn: &str) -> Self {
        let (mut state, mut since, mut awaited) = (None, 0, None);
        for event in log.iter().filter(|event| event.turn_id() == turn) {
            match event {
                AgentEvent::TurnState { state: now, .. } => {
                    (state, since) = (Some(*now), event.seq());
                }
                AgentEvent::Action { action, .. } => awaited = Some((event, action)),
                AgentEvent::ActionResult { .. } => awaited = None,
                _ => {}
            }
        }
        match (state, awaited) {
            (Some(TurnState::AwaitingAction), Some((event, action))) => Self::Awaiting {
                event: Box::new(event.clone()),
                action: Box::new(action.clone()),
            },
            (
                Some(state @ (TurnState::Complete | TurnState::Failed | TurnState::Interrupted)),
                _,
            ) => Self::Ended(state),
            _ => Self::Running(since),
        }
    }
}

fn session_id(session: &str) -> Result<SessionId, Error> {
    session.parse().map_err(invalid)
}

/// A fresh idempotency key: 32 random hex digits.
fn idempotency_key() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system provides randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
