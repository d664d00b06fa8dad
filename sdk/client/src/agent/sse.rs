//! The SSE projection of a session's log: `page` events carry durable events and the cursor
//! to resume from, `message` events are transient snapshots, and `resync` restarts the view.
//! Events are read from the body's chunks by [`event_stream::Parser`].

use futures_util::StreamExt;
use intent_models::SessionId;
use progenitor_client::ByteStream;

use super::event_stream;
use super::follow::{Frame, Page, Transport};
use crate::Error;
use crate::error::invalid;
use crate::raw::Client;
use crate::raw::types::StreamChatEventsCursor;

/// An open stream: its body and the events read from it.
pub(crate) struct Frames {
    body: ByteStream,
    events: event_stream::Parser,
}

/// `GET /v1/agent/chat/{sessionId}/stream`, resumed at a `page` cursor.
pub(crate) struct Sse {
    client: Client,
    session: SessionId,
}

impl Sse {
    /// The projection of `session` through `client`, whose calls the follower sends once: its
    /// reconnections apply the client's retry policy.
    pub(crate) fn new(client: &Client, session: SessionId) -> Self {
        Self {
            client: client.sending_once(),
            session,
        }
    }
}

impl Transport for Sse {
    type Connection = Frames;

    async fn open(&mut self, cursor: Option<&str>) -> Result<Frames, Error> {
        let mut request = self
            .client
            .stream_chat_events()
            .session_id(self.session.clone());
        if let Some(cursor) = cursor {
            let cursor: StreamChatEventsCursor = cursor.parse().map_err(invalid)?;
            request = request.cursor(cursor);
        }
        let body = request.send().await?.into_inner();
        Ok(Frames {
            body,
            events: event_stream::Parser::default(),
        })
    }

    async fn read(
        &mut self,
        frames: &mut Frames,
        _cursor: Option<&str>,
    ) -> Option<Result<Frame, Error>> {
        loop {
            let Some(event) = frames.events.next_event() else {
                match frames.body.next().await? {
                    Ok(chunk) => frames.events.feed(&chunk),
                    Err(reason) => {
                        let broke = format!("the event stream broke: {reason}");
                        return Some(Err(Error::Disconnected(broke)));
                    }
                }
                continue;
            };
            let data = |what: &str, e: serde_json::Error| {
                Error::InvalidResponse(format!("a `{what}` event does not parse: {e}"))
            };
            return Some(match event.name.as_str() {
                "page" => Page::from_json(&event.data)
                    .map(Frame::Page)
                    .map_err(|e| data("page", e)),
                "message" => serde_json::from_slice(&event.data)
                    .map(Frame::Snapshot)
                    .map_err(|e| data("message", e)),
                "resync" => Ok(Frame::Resync),
                // Unknown event names are skipped: the interface may add some.
                _ => continue,
            });
        }
    }
}
