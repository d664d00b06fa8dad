//! The long-poll projection of a session's log: one page per request, waiting on the server
//! until an event is appended or the wait ends.

use intent_models::SessionId;
use reqwest::header::ACCEPT;

use super::LONG_POLL_MS;
use super::follow::{Frame, Page, Transport};
use crate::Error;
use crate::raw::{Client, ClientInfo};

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
        // `getChatEvents`, sent through the hooks and read straight into the follower's page.
        let client = &self.client;
        let path = progenitor_client::encode_path(self.session.as_str());
        let mut request = client
            .client()
            .get(format!("{}/v1/agent/chat/{path}", client.baseurl()))
            .header(ACCEPT, "application/json")
            .query(&[("wait", LONG_POLL_MS)]);
        if let Some(cursor) = cursor {
            request = request.query(&[("cursor", cursor)]);
        }
        let page = match request.build() {
            Ok(request) => {
                crate::hooks::call(client, request, "getChatEvents", Page::from_json).await
            }
            Err(error) => Err(Error::Transport(error)),
        };
        Some(page.map(Frame::Page))
    }
}
