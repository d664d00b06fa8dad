//! The long-poll projection of a session's log: one page per request, waiting on the server
//! until an event is appended or the wait ends. While a page that says the log has more is
//! decoded, the next one is already asked for.

use intent_models::SessionId;
use memchr::memmem;
use reqwest::header::ACCEPT;
use tokio::task::JoinHandle;

use super::LONG_POLL_MS;
use super::follow::{Frame, Page, Transport};
use crate::Error;
use crate::error::undecodable;
use crate::raw::{Client, ClientInfo};

/// `GET /v1/agent/chat/{sessionId}?cursor=...&wait=...`; it holds no connection.
pub(crate) struct Poll {
    client: Client,
    session: SessionId,
    /// The page asked for ahead, after the cursor it was asked at.
    ahead: Option<(String, Asked)>,
}

/// A page asked for, once it comes.
type Asked = JoinHandle<Answer>;

/// A page's status and JSON, or the error its request ended with.
type Answer = Result<(u16, Vec<u8>), Error>;

impl Poll {
    /// The projection of `session` through `client`, whose calls the follower sends once: its
    /// reconnections apply the client's retry policy.
    pub(crate) fn new(client: &Client, session: SessionId) -> Self {
        Self {
            client: client.sending_once(),
            session,
            ahead: None,
        }
    }

    /// `getChatEvents` after `cursor`, sent through the hooks: the page's status and JSON.
    fn ask(&self, cursor: Option<&str>) -> impl Future<Output = Answer> + Send + use<> {
        let client = self.client.clone();
        let path = progenitor_client::encode_path(self.session.as_str());
        let mut request = client
            .client()
            .get(format!("{}/v1/agent/chat/{path}", client.baseurl()))
            .header(ACCEPT, "application/json")
            .query(&[("wait", LONG_POLL_MS)]);
        if let Some(cursor) = cursor {
            request = request.query(&[("cursor", cursor)]);
        }
        let request = request.build();
        async move {
            let request = request.map_err(Error::Transport)?;
            crate::hooks::send(&client, request, "getChatEvents").await
        }
    }

    /// Stops asking for the page ahead.
    fn drop_ahead(&mut self) {
        if let Some((_, task)) = self.ahead.take() {
            task.abort();
        }
    }
}

impl Drop for Poll {
    fn drop(&mut self) {
        self.drop_ahead();
    }
}

impl Transport for Poll {
    type Connection = ();

    async fn open(&mut self, _cursor: Option<&str>) -> Result<(), Error> {
        Ok(())
    }

    async fn read(&mut self, _: &mut (), cursor: Option<&str>) -> Option<Result<Frame, Error>> {
        let answer = match self.ahead.take() {
            Some((at, task)) if Some(at.as_str()) == cursor => match task.await {
                Ok(answer) => answer,
                // The task panicked: ask again.
                Err(_) => self.ask(cursor).await,
            },
            other => {
                if let Some((_, task)) = other {
                    task.abort();
                }
                self.ask(cursor).await
            }
        };
        let (status, body) = match answer {
            Ok(answer) => answer,
            Err(error) => return Some(Err(error)),
        };
        if let Some(next) = next_cursor(&body) {
            let task = tokio::spawn(self.ask(Some(next)));
            self.ahead = Some((next.to_owned(), task));
            // Let the request go out before the page is decoded.
            tokio::task::yield_now().await;
        }
        let page = Page::from_json(&body).map_err(|error| undecodable(Some(status), error, &body));
        let asked_right = match (&page, &self.ahead) {
            (Ok(page), Some((at, _))) => page.has_more && page.cursor == *at,
            _ => true,
        };
        if !asked_right {
            self.drop_ahead();
        }
        Some(page.map(Frame::Page))
    }
}

/// The cursor of the page `json` when it says the log has more and names its cursor where no
/// event can (the first member, as the reference server writes it); a guess the decoded page
/// confirms before the page asked with it is used.
fn next_cursor(json: &[u8]) -> Option<&str> {
    const FIRST: &[u8] = br#"{"cursor":""#;
    let rest = json.strip_prefix(FIRST)?;
    let end = memchr::memchr(b'"', rest)?;
    let cursor = std::str::from_utf8(&rest[..end]).ok()?;
    let safe = cursor
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let more = memmem::rfind(json, br#""has_more":true"#).is_some();
    (safe && more).then_some(cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_cursor_is_read_only_where_no_event_can_name_one() {
        let page = br#"{"cursor":"AbC-_9","events":[],"has_more":true}"#;
        assert_eq!(next_cursor(page), Some("AbC-_9"));
        let last = br#"{"cursor":"AbC","events":[],"has_more":false}"#;
        assert_eq!(next_cursor(last), None, "no more to ask for");
        let later = br#"{"events":[{"cursor":"x"}],"cursor":"AbC","has_more":true}"#;
        assert_eq!(next_cursor(later), None, "not the first member");
        let escaped = br#"{"cursor":"a\"b","events":[],"has_more":true}"#;
        assert_eq!(next_cursor(escaped), None, "not a plain cursor");
    }
}
