//! Following a session's log over its SSE projection: `page` events carry durable events and the
//! cursor to resume from, `message` events are transient snapshots, and `resync` means the view
//! must be rebuilt. Frames are parsed with `eventsource-stream` over reqwest's byte stream.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use intent_models::{AgentEvent, EventPage, MessageSnapshot};

use super::{BACKOFF_MAX, BACKOFF_START, invalid};
use crate::{Client, Error};

/// What the SSE follower hands its consumer.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// The next durable event, in sequence order; none is delivered twice or skipped.
    Event(Box<AgentEvent>),
    /// A transient snapshot of a message being written; never a position in the log.
    Snapshot(MessageSnapshot),
    /// Drop the view built so far; the events that follow start at the retained log's start.
    Restart,
}

type Frames = Pin<Box<dyn Stream<Item = Result<eventsource_stream::Event, String>> + Send>>;

struct Follow {
    client: Client,
    session: crate::types::StreamChatEventsSessionId,
    /// The cursor of the last `page`: where a reconnect resumes.
    cursor: Option<String>,
    /// The last sequence number delivered.
    last: u64,
    frames: Option<Frames>,
    ready: VecDeque<StreamItem>,
    backoff: Duration,
    done: bool,
}

/// Follows a session's log over SSE from `cursor` (or the retained log's start), forever.
/// A dropped connection is yielded as an error and reconnected with backoff from the last
/// `page` cursor; `resync`, 400 `invalid_cursor` and 410 yield [`StreamItem::Restart`]; any
/// other error is yielded and ends the stream.
pub fn follow_sse(
    client: &Client,
    session_id: &str,
    cursor: Option<String>,
) -> Result<impl Stream<Item = Result<StreamItem, Error>> + use<>, Error> {
    let state = Follow {
        client: client.clone(),
        session: session_id.parse().map_err(invalid)?,
        cursor,
        last: 0,
        frames: None,
        ready: VecDeque::new(),
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
    async fn next(&mut self) -> Option<Result<StreamItem, Error>> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            let Some(frames) = self.frames.as_mut() else {
                match self.connect().await {
                    Ok(frames) => self.frames = Some(frames),
                    Err(Error::InvalidCursor(_) | Error::CursorExpired(_)) => self.restart(),
                    Err(error @ Error::Transport(_)) => return Some(Err(self.wait(error).await)),
                    Err(error) => {
                        self.done = true;
                        return Some(Err(error));
                    }
                }
                continue;
            };
            match frames.next().await {
                Some(Ok(frame)) => {
                    self.backoff = BACKOFF_START;
                    if let Err(error) = self.take(&frame) {
                        self.frames = None;
                        return Some(Err(error));
                    }
                }
                Some(Err(reason)) => {
                    self.frames = None;
                    let error = Error::InvalidResponse(format!("the event stream broke: {reason}"));
                    return Some(Err(self.wait(error).await));
                }
                None => {
                    self.frames = None;
                    let error = Error::InvalidResponse("the event stream ended".to_owned());
                    return Some(Err(self.wait(error).await));
                }
            }
        }
    }

    async fn wait(&mut self, error: Error) -> Error {
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        error
    }

    async fn connect(&self) -> Result<Frames, Error> {
        let cursor = self
            .cursor
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(invalid)?;
        let body = self
            .client
            .stream_chat_events(&self.session, cursor.as_ref(), None)
            .await?
            .into_inner()
            .into_inner();
        Ok(Box::pin(
            body.eventsource()
                .map(|frame| frame.map_err(|e| e.to_string())),
        ))
    }

    fn restart(&mut self) {
        self.cursor = None;
        self.last = 0;
        self.ready.push_back(StreamItem::Restart);
    }

    fn take(&mut self, frame: &eventsource_stream::Event) -> Result<(), Error> {
        let data = |what: &str, e: serde_json::Error| {
            Error::InvalidResponse(format!("a `{what}` event does not parse: {e}"))
        };
        match frame.event.as_str() {
            "page" => {
                let page: EventPage =
                    serde_json::from_str(&frame.data).map_err(|e| data("page", e))?;
                for event in page.events {
                    let seq = event.seq();
                    if seq <= self.last {
                        continue;
                    }
                    if self.last != 0 && seq != self.last + 1 {
                        // A gap: reconnect from the retained log's start.
                        self.frames = None;
                        self.restart();
                        return Ok(());
                    }
                    self.last = seq;
                    self.ready.push_back(StreamItem::Event(Box::new(event)));
                }
                self.cursor = Some(page.cursor);
            }
            "message" => {
                let snapshot = serde_json::from_str(&frame.data).map_err(|e| data("message", e))?;
                self.ready.push_back(StreamItem::Snapshot(snapshot));
            }
            "resync" => {
                // The server goes on with the retained log on this same connection.
                self.last = 0;
                self.ready.push_back(StreamItem::Restart);
            }
            // Unknown event names are skipped: the interface may add some.
            _ => {}
        }
        Ok(())
    }
}
