//! The long-poll projection of a session's log: one page per request, waiting on the server
//! until an event is appended or the wait ends.

use intent_models::SessionId;

use super::LONG_POLL_MS;
use super::follow::{Frame, Transport};
use crate::Error;
use crate::error::invalid;
use crate::raw::Client;

/// `GET /v1/agent/chat/{sessionId}?cursor=...&wait=...`; it holds no connection.
pub(crate) struct Poll {
    client: Client,
    session: SessionId,
}

impl Poll {
    /// The projection of `session` through `client`, whose calls the follower sends once: its
    /// reconnections apply the client's retry policy.
    pub(crate) fn new(client: &Client, session: SessionId) -> Self {
        Self {
            client: client.sending_once(),
            session,
        }
    }
}

impl Transport for Poll {
    type Connection = ();

    async fn open(&mut self, _cursor: Option<&str>) -> Result<(), Error> {
        Ok(())
    }

    async fn read(&mut self, _: &mut (), cursor: Option<&str>) -> Option<Result<Frame, Error>> {
        let page = async {
            let cursor = cursor.map(str::parse).transpose().map_err(invalid)?;
            let page = super::events(&self.client, &self.session, cursor, Some(LONG_POLL_MS))
                .send()
                .await?;
            Ok(Frame::Page(page.into_inner()))
        };
        Some(page.await)
    }
}
