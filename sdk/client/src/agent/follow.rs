//! One state machine follows a session's log over either projection (long-poll pages or SSE),
//! as kube-rs's watcher does: an explicit [`State`] stepped by `futures::stream::unfold`, over a
//! small [`Transport`]. It alone delivers each event once and in order, restarts the view after
//! a cursor error, a gap or a `resync`, and retries what retrying can fix.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;

use futures_util::Stream;
use intent_models::{AgentEvent, MessageSnapshot, OnePassEvent};

use crate::Error;
use crate::retry::RetryPolicy;

/// What following a log hands its consumer.
#[derive(Debug, Clone, PartialEq)]
pub enum LogItem {
    /// The next durable event, in sequence order; none is delivered twice or skipped.
    Event {
        /// The event.
        event: Box<AgentEvent>,
        /// Where to resume after it ([`Agent::follow_from`](super::Agent::follow_from)).
        position: Position,
    },
    /// A transient snapshot of a message being written (SSE only); never a position in the log.
    Snapshot(MessageSnapshot),
    /// Drop the view built so far; the events that follow start again at the retained log's
    /// start.
    Restart,
}

/// Where a follower stands in a session's log: after the event at `seq`, reading on from the
/// cursor of the page that held it. Keep its text (`to_string`) and resume with
/// [`Agent::follow_from`](super::Agent::follow_from) after a restart: the events after `seq`
/// come once each, none skipped.
///
/// ```
/// use intent_sdk::agent::Position;
///
/// let position: Position = "42:AQAAAA".parse().unwrap();
/// assert_eq!(position.seq(), 42);
/// assert_eq!(position.to_string(), "42:AQAAAA");
/// assert_eq!(Position::start().to_string(), "0:");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Position {
    /// Shared by the events of one page.
    cursor: Option<Arc<str>>,
    seq: u64,
}

impl Position {
    /// The retained log's start.
    pub fn start() -> Self {
        Self::default()
    }

    /// After the page whose cursor is `cursor` (from a long-poll page or an SSE `page` id).
    pub fn after_page(cursor: impl Into<String>) -> Self {
        Self::from_cursor(Some(cursor.into()))
    }

    /// After the page whose cursor is `cursor`, or at the retained log's start.
    pub(crate) fn from_cursor(cursor: Option<String>) -> Self {
        Self {
            cursor: cursor.map(Arc::from),
            seq: 0,
        }
    }

    /// The sequence number of the last event delivered (0 before any).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether it is the retained log's start: no cursor, no event.
    pub(crate) fn is_start(&self) -> bool {
        self.cursor.is_none() && self.seq == 0
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, self.cursor.as_deref().unwrap_or(""))
    }
}

impl FromStr for Position {
    type Err = Error;

    /// Reads `<seq>:<cursor>`, as `to_string` writes it.
    fn from_str(text: &str) -> Result<Self, Error> {
        let invalid = || Error::InvalidInput(format!("not a log position: {text:?}"));
        let (seq, cursor) = text.split_once(':').ok_or_else(invalid)?;
        Ok(Self {
            seq: seq.parse().map_err(|_| invalid())?,
            cursor: (!cursor.is_empty()).then(|| Arc::from(cursor)),
        })
    }
}

/// Durable events and the cursor after them, each event boxed as [`LogItem::Event`] hands it
/// out.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Page {
    #[expect(
        clippy::vec_box,
        reason = "each event is handed out in its own box; a page's vector moves only pointers"
    )]
    pub(crate) events: Vec<Box<AgentEvent>>,
    pub(crate) cursor: String,
    pub(crate) has_more: bool,
}

impl Page {
    /// The page `json` holds, each event read in one pass ([`OnePassEvent`]); read again as
    /// [`AgentEvent`]s, which keep an event that fits no kind's shape whole, when one is refused.
    pub(crate) fn from_json(json: &[u8]) -> serde_json::Result<Self> {
        #[derive(serde::Deserialize)]
        struct OnePass {
            events: Vec<OnePassEvent>,
            cursor: String,
            has_more: bool,
        }
        let Ok(page) = serde_json::from_slice::<OnePass>(json) else {
            return serde_json::from_slice(json);
        };
        Ok(Self {
            events: page.events.into_iter().map(|event| event.0).collect(),
            cursor: page.cursor,
            has_more: page.has_more,
        })
    }
}

/// One unit read from a projection.
#[derive(Debug)]
pub(crate) enum Frame {
    /// Durable events and the cursor after them.
    Page(Page),
    /// A transient message snapshot.
    Snapshot(MessageSnapshot),
    /// The server restarts the projection at the retained log's start on this connection.
    Resync,
}

/// A projection of the log: how to open it at a cursor and read its frames.
pub(crate) trait Transport: Send + 'static {
    /// An open connection (nothing for long-poll pages, the event stream for SSE).
    type Connection: Send;

    /// Opens the projection after `cursor`, or at the retained log's start without one.
    fn open(
        &mut self,
        cursor: Option<&str>,
    ) -> impl Future<Output = Result<Self::Connection, Error>> + Send;

    /// The next frame, reading after `cursor`; `None` when the connection ended.
    fn read(
        &mut self,
        connection: &mut Self::Connection,
        cursor: Option<&str>,
    ) -> impl Future<Output = Option<Result<Frame, Error>>> + Send;
}

/// What one step of a [`Follower`] gave.
pub(crate) enum Step {
    /// An item to hand out.
    Item(Result<LogItem, Error>),
    /// A frame was taken that gave no item.
    Taken,
}

/// Where the follower is.
enum State<C> {
    /// No connection: open one at the cursor.
    Closed,
    /// Reading frames.
    Open(C),
    /// An error that retrying cannot fix was handed out; nothing follows.
    Ended,
}

/// Follows a session's log over a [`Transport`] whose calls are each sent once: the stream of
/// [`follow`], and what [`Agent::wait_turn`](super::Agent::wait_turn) steps itself.
pub(crate) struct Follower<T: Transport> {
    transport: T,
    state: State<T::Connection>,
    /// Where the next connection resumes: the cursor of the last page taken.
    cursor: Option<Arc<str>>,
    /// The last sequence number delivered.
    last: u64,
    ready: VecDeque<LogItem>,
    /// Whether the last page taken said more events were ready than it held.
    behind: bool,
    /// When and whether to reconnect after a failure.
    retry: RetryPolicy,
    /// Failures in a row since the last frame.
    failures: u32,
}

/// Follows the log over `transport` from `from`, forever, as
/// [`Agent::follow`](super::Agent::follow) describes.
pub(crate) fn follow<T: Transport>(
    transport: T,
    from: Position,
    retry: RetryPolicy,
) -> impl Stream<Item = Result<LogItem, Error>> + Send + 'static {
    // Boxed, so that each step moves a pointer in and out of its future, not the follower.
    futures_util::stream::unfold(
        Box::new(Follower::new(transport, from, retry)),
        |mut follower| async move {
            let item = follower.step().await?;
            Some((item, follower))
        },
    )
}

impl<T: Transport> Follower<T> {
    pub(crate) fn new(transport: T, from: Position, retry: RetryPolicy) -> Self {
        Self {
            transport,
            state: State::Closed,
            cursor: from.cursor,
            last: from.seq,
            ready: VecDeque::new(),
            behind: false,
            retry,
            failures: 0,
        }
    }

    /// Whether every event read has been handed out and the last page held all that were ready.
    pub(crate) fn caught_up(&self) -> bool {
        self.ready.is_empty() && !self.behind
    }

    /// The cursor after the last page taken.
    pub(crate) fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// The next item; `None` once the follower ended: after an error that retrying cannot fix
    /// was handed out, or any failure under [`RetryPolicy::none`].
    pub(crate) async fn step(&mut self) -> Option<Result<LogItem, Error>> {
        loop {
            match self.advance().await? {
                Step::Item(item) => return Some(item),
                Step::Taken => {}
            }
        }
    }

    /// The next item, or word that a frame was taken that gave none (a page of events already
    /// delivered, or of none), so that a caller can ask [`Follower::caught_up`] at each page;
    /// `None` once the follower ended.
    pub(crate) async fn advance(&mut self) -> Option<Step> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(Step::Item(Ok(item)));
            }
            let failure = match &mut self.state {
                State::Ended => return None,
                State::Closed => match self.transport.open(self.cursor.as_deref()).await {
                    Ok(connection) => {
                        self.state = State::Open(connection);
                        continue;
                    }
                    Err(error) => Some(error),
                },
                State::Open(connection) => {
                    match self
                        .transport
                        .read(connection, self.cursor.as_deref())
                        .await
                    {
                        Some(Ok(frame)) => {
                            self.failures = 0;
                            self.take(frame);
                            if self.ready.is_empty() {
                                return Some(Step::Taken);
                            }
                            continue;
                        }
                        Some(Err(error)) => Some(error),
                        None => None,
                    }
                }
            };
            self.state = State::Closed;
            match failure {
                // The server ended the connection: reconnect from the cursor, quietly.
                None => tokio::time::sleep(self.retry.backoff_delay(1)).await,
                Some(error) => {
                    if let Some(error) = self.recover(error).await {
                        return Some(Step::Item(Err(error)));
                    }
                }
            }
        }
    }

    /// Handles a failed open or read: `None` when the follower goes on without a word. Failures
    /// in a row count as one call's attempts under the policy: the one that spends them is
    /// handed out, and the follower reconnects after the backoff (or the `Retry-After`) unless
    /// the policy retries nothing.
    async fn recover(&mut self, error: Error) -> Option<Error> {
        if matches!(error, Error::InvalidCursor(_) | Error::CursorExpired(_)) {
            self.restart();
            return None;
        }
        if !error.is_transient() || !self.retry.retries() {
            self.state = State::Ended;
            return Some(error);
        }
        self.failures = self.failures.saturating_add(1);
        let wait = match &error {
            Error::RateLimited {
                retry_after: Some(wait),
                ..
            } => self.retry.retry_after(*wait),
            _ => self.retry.backoff_delay(self.failures),
        };
        tokio::time::sleep(wait).await;
        self.retry.spent(self.failures).then_some(error)
    }

    /// Starts again at the retained log's start, on a new connection.
    fn restart(&mut self) {
        self.state = State::Closed;
        self.cursor = None;
        self.last = 0;
        self.behind = false;
        self.ready.push_back(LogItem::Restart);
    }

    fn take(&mut self, frame: Frame) {
        match frame {
            Frame::Page(page) => {
                let read_from = self.cursor.take();
                for event in page.events {
                    let seq = event.seq();
                    if seq <= self.last {
                        continue;
                    }
                    if self.last != 0 && seq != self.last + 1 {
                        // A gap: the view cannot be trusted.
                        self.restart();
                        return;
                    }
                    self.last = seq;
                    let position = Position {
                        cursor: read_from.clone(),
                        seq,
                    };
                    self.ready.push_back(LogItem::Event { event, position });
                }
                self.cursor = Some(Arc::from(page.cursor));
                self.behind = page.has_more;
            }
            Frame::Snapshot(snapshot) => self.ready.push_back(LogItem::Snapshot(snapshot)),
            Frame::Resync => {
                // The server goes on with the retained log on this same connection; a
                // reconnect before its next page starts there too.
                self.last = 0;
                self.cursor = None;
                self.ready.push_back(LogItem::Restart);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures_util::StreamExt;
    use reqwest::header::HeaderMap;
    use serde_json::json;
    use tokio::time::Instant;

    use super::*;

    /// When each open happened, and at which cursor.
    type Log = Arc<Mutex<Vec<(Instant, Option<String>)>>>;

    /// A scripted projection: each open takes the next outcome and records its time and cursor.
    struct Script {
        opens: VecDeque<Result<(), Error>>,
        frames: VecDeque<Option<Result<Frame, Error>>>,
        log: Log,
    }

    impl Transport for Script {
        type Connection = ();

        async fn open(&mut self, cursor: Option<&str>) -> Result<(), Error> {
            let entry = (Instant::now(), cursor.map(str::to_owned));
            self.log.lock().unwrap().push(entry);
            self.opens.pop_front().unwrap_or(Ok(()))
        }

        async fn read(&mut self, _: &mut (), _: Option<&str>) -> Option<Result<Frame, Error>> {
            match self.frames.pop_front() {
                Some(frame) => frame,
                None => std::future::pending().await,
            }
        }
    }

    fn page(cursor: &str, seqs: &[u64]) -> Option<Result<Frame, Error>> {
        let events: Vec<_> = seqs
            .iter()
            .map(|seq| {
                json!({ "type": "turn_state", "seq": seq, "turnId": "t", "createdAt": 1,
                        "state": "processing" })
            })
            .collect();
        let page =
            json!({ "cursor": cursor, "events": events, "has_more": false, "session_id": "s" });
        Some(Ok(Frame::Page(serde_json::from_value(page).unwrap())))
    }

    fn status(status: u16, headers: &[(&'static str, &'static str)]) -> Error {
        let headers: HeaderMap = headers
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
            .collect();
        Error::from_response(status, &headers, json!({ "code": "test" }))
    }

    fn script(
        opens: Vec<Result<(), Error>>,
        frames: Vec<Option<Result<Frame, Error>>>,
    ) -> (Script, Log) {
        let log = Log::default();
        let script = Script {
            opens: opens.into(),
            frames: frames.into(),
            log: log.clone(),
        };
        (script, log)
    }

    /// The stream's first `n` items, as `e<seq>`, `restart` or `error <status>`, under the
    /// default retry policy without jitter.
    async fn items(script: Script, n: usize) -> Vec<String> {
        items_under(script, n, RetryPolicy::default().without_jitter()).await
    }

    async fn items_under(script: Script, n: usize, retry: RetryPolicy) -> Vec<String> {
        follow(script, Position::after_page("c0"), retry)
            .take(n)
            .map(|item| match item {
                Ok(LogItem::Event { event, .. }) => format!("e{}", event.seq()),
                Ok(LogItem::Snapshot(_)) => "snapshot".to_owned(),
                Ok(LogItem::Restart) => "restart".to_owned(),
                Err(error) => format!("error {}", error.status().unwrap_or(0)),
            })
            .collect()
            .await
    }

    fn gaps(log: &Log) -> Vec<u128> {
        let log = log.lock().unwrap();
        log.windows(2)
            .map(|pair| (pair[1].0 - pair[0].0).as_millis())
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn failures_in_a_row_are_one_call_s_attempts_on_one_backoff_that_a_frame_resets() {
        let unavailable = || Err(status(503, &[]));
        let (script, log) = script(
            vec![
                unavailable(),
                unavailable(),
                Err(status(502, &[])),
                Err(status(500, &[])),
                unavailable(),
                unavailable(),
                Ok(()),
                unavailable(),
                unavailable(),
                unavailable(),
            ],
            vec![page("c1", &[1]), None],
        );
        let got = items(script, 4).await;
        // Each third failure in a row spends a call's three attempts and is handed out.
        assert_eq!(got, ["error 502", "error 503", "e1", "error 503"]);
        // One backoff doubles across the failures, capped at 5 s; the page resets it, so the
        // ended connection reconnects after 100 ms and the next failures wait from 100 ms again.
        assert_eq!(gaps(&log), [100, 200, 400, 800, 1600, 3200, 100, 100, 200]);
        let last_open = log.lock().unwrap().last().unwrap().0;
        assert_eq!((Instant::now() - last_open).as_millis(), 400);
    }

    #[tokio::test(start_paused = true)]
    async fn a_policy_that_retries_nothing_ends_the_stream_at_its_first_failure() {
        let (script, log) = script(vec![Err(status(503, &[])), Ok(())], vec![page("c1", &[1])]);
        let got = items_under(script, 5, RetryPolicy::none()).await;
        assert_eq!(got, ["error 503"]);
        assert_eq!(log.lock().unwrap().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limits_wait_their_retry_after() {
        let limited = status(429, &[("retry-after", "3")]);
        let (script, log) = script(vec![Err(limited), Ok(())], vec![page("c1", &[1])]);
        assert_eq!(items(script, 1).await, ["e1"]);
        assert_eq!(gaps(&log), [3000]);
    }

    #[tokio::test(start_paused = true)]
    async fn errors_that_retrying_cannot_fix_end_the_stream() {
        for code in [401, 403, 404] {
            let (script, log) = script(vec![Err(status(code, &[]))], vec![]);
            assert_eq!(items(script, 5).await, [format!("error {code}")]);
            assert_eq!(log.lock().unwrap().len(), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_arrive_once_and_reconnects_resume_from_the_last_cursor() {
        let (script, log) = script(
            vec![],
            vec![
                page("c2", &[1, 2]),
                page("c3", &[2, 3]),
                None,
                page("c4", &[4]),
            ],
        );
        assert_eq!(items(script, 4).await, ["e1", "e2", "e3", "e4"]);
        let cursors: Vec<_> = log.lock().unwrap().iter().map(|e| e.1.clone()).collect();
        assert_eq!(cursors, [Some("c0".to_owned()), Some("c3".to_owned())]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_gap_or_a_cursor_error_restarts_from_the_log_start() {
        let (script, log) = script(
            vec![Err(status(410, &[])), Ok(()), Ok(())],
            vec![page("c1", &[1]), page("c3", &[3]), page("c3", &[1, 2, 3])],
        );
        assert_eq!(
            items(script, 6).await,
            ["restart", "e1", "restart", "e1", "e2", "e3"]
        );
        let cursors: Vec<_> = log.lock().unwrap().iter().map(|e| e.1.clone()).collect();
        assert_eq!(cursors, [Some("c0".to_owned()), None, None]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_page_that_gives_nothing_is_told_so_a_wait_can_end_at_it() {
        let (script, _) = script(
            vec![],
            vec![page("c1", &[1]), page("c2", &[1]), page("c3", &[])],
        );
        let mut follower = Follower::new(script, Position::after_page("c0"), RetryPolicy::none());
        let mut steps = Vec::new();
        for _ in 0..3 {
            steps.push(match follower.advance().await {
                Some(Step::Item(Ok(LogItem::Event { event, .. }))) => format!("e{}", event.seq()),
                Some(Step::Taken) => format!("taken {:?}", follower.cursor()),
                _ => "other".to_owned(),
            });
        }
        assert_eq!(steps, ["e1", "taken Some(\"c2\")", "taken Some(\"c3\")"]);
        assert!(follower.caught_up());
    }

    #[tokio::test(start_paused = true)]
    async fn a_resync_restarts_the_view_on_the_same_connection() {
        let (script, log) = script(
            vec![],
            vec![
                page("c2", &[1, 2]),
                Some(Ok(Frame::Resync)),
                page("c3", &[1, 2, 3]),
            ],
        );
        assert_eq!(
            items(script, 6).await,
            ["e1", "e2", "restart", "e1", "e2", "e3"]
        );
        assert_eq!(log.lock().unwrap().len(), 1);
    }
}
