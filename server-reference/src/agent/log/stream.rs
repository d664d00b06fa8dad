//! A session's log as a stream (the SSE projection, part 6): pages as events are
//! appended, with transient snapshots between them, a resync where no safe delta exists, and an
//! end when the server drains.

use std::collections::VecDeque;

use futures_util::Stream;
use intent_models::{MessageSnapshot, ResyncReason};

use super::{EventLog, Page, Result, cursor_error};
use crate::agent::cursor::CursorError;
use crate::agent::notify::Subscription;
use crate::ids::{AccountId, SessionId};

/// Events per SSE `page`.
const STREAM_PAGE: i64 = 100;

/// One item of a streamed log.
#[derive(Debug, Clone)]
pub enum StreamItem {
    /// A durable page; its cursor resumes after it.
    Page(Page),
    /// A transient snapshot of a message being written.
    Snapshot(MessageSnapshot),
    /// No safe delta exists; the pages that follow start over from the retained log.
    Resync(ResyncReason),
    /// The server is draining: the stream ends here, and the reader resumes elsewhere from the
    /// cursor of its last page.
    Closing,
}

impl EventLog {
    /// Follows `account`'s `session` from `cursor`, or else from `last_event_id` (a page cursor
    /// the stream sent before), or else from the start of the retained log: pages as events are
    /// appended, with transient snapshots between them. A `cursor` is checked like a page's (400
    /// invalid, 410 expired) before any event; a Last-Event-ID that does not open starts the
    /// stream with a resync, since a browser resends it on its own and cannot act on a status.
    /// The stream ends when the session is deleted or the store fails.
    pub async fn stream(
        &self,
        account: &AccountId,
        session: &SessionId,
        cursor: Option<&str>,
        last_event_id: Option<&str>,
    ) -> Result<impl Stream<Item = StreamItem> + Send + use<>> {
        self.0.sessions.owned(account, session).await?;
        let subscription = self.0.sessions.notifier().subscribe(session);
        let mut pending = VecDeque::new();
        // A `cursor` the client wrote is checked like the page's; a Last-Event-ID that the
        // browser resends on its own cannot be fixed by the client, so it gets a resync instead.
        let resume = match (cursor, last_event_id) {
            (Some(cursor), _) => Some(Ok(self
                .open_at(account, session, cursor)
                .await?
                .map_err(cursor_error)?)),
            (None, Some(id)) => Some(self.open_at(account, session, id).await?),
            (None, None) => None,
        };
        let at = match resume {
            Some(Ok(at)) => at,
            Some(Err(error)) => {
                pending.push_back(StreamItem::Resync(match error {
                    CursorError::Invalid => ResyncReason::CursorInvalid,
                    CursorError::Expired => ResyncReason::CursorExpired,
                }));
                self.retained_start(account, session).await?
            }
            None => self.retained_start(account, session).await?,
        };
        let projection = Projection {
            draining: self.0.draining.subscribe(),
            closed: false,
            send_page: resume.is_none() || !pending.is_empty(),
            log: self.clone(),
            account: account.clone(),
            session: session.clone(),
            after: at.after,
            seen: at.seen,
            subscription,
            pending,
            _open: crate::metrics::stream(),
        };
        Ok(futures_util::stream::unfold(
            projection,
            |mut projection| async move {
                let item = projection.next().await?;
                Some((item, projection))
            },
        ))
    }
}

/// One stream's position in the log.
struct Projection {
    log: EventLog,
    /// Ends the stream when the server drains.
    draining: tokio::sync::watch::Receiver<bool>,
    /// `Closing` was sent: the stream is over.
    closed: bool,
    account: AccountId,
    session: SessionId,
    /// The last event sent.
    after: i64,
    /// The last seq of the log the stream has seen.
    seen: i64,
    subscription: Subscription,
    /// Items to send before reading the log again.
    pending: VecDeque<StreamItem>,
    /// Send a page even when it is empty: the reader needs a cursor to start from.
    send_page: bool,
    /// Counts the stream in the metrics while it is open.
    _open: crate::metrics::Open,
}

impl Projection {
    /// The next item; `None` ends the stream (the session was deleted, or the store failed).
    async fn next(&mut self) -> Option<StreamItem> {
        if self.closed {
            return None;
        }
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            let read = match self
                .log
                .0
                .sessions
                .read(
                    &self.account,
                    &self.session,
                    self.after,
                    STREAM_PAGE + 1,
                    self.seen,
                )
                .await
            {
                Ok(Some(read)) => read,
                // The session was deleted.
                Ok(None) => return None,
                Err(error) => {
                    tracing::error!(error = &error as &dyn std::error::Error, "reading the log");
                    return None;
                }
            };
            self.seen = self.seen.max(read.last_seq);
            if self.after < read.pruned_through {
                // The reader fell behind the retained log: no safe delta exists.
                self.after = read.pruned_through;
                self.send_page = true;
                return Some(StreamItem::Resync(ResyncReason::Lagged));
            }
            if !read.events.is_empty() || self.send_page {
                self.send_page = false;
                let expires = self.log.expiry();
                let page = self.log.make_page(
                    &self.account,
                    &self.session,
                    self.after,
                    read,
                    STREAM_PAGE,
                    expires,
                );
                self.after = page.after();
                return Some(StreamItem::Page(page));
            }
            tokio::select! {
                _ = self.draining.wait_for(|draining| *draining) => {
                    self.closed = true;
                    return Some(StreamItem::Closing);
                }
                changed = self.subscription.appended.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                snapshot = self.subscription.snapshots.recv() => match snapshot {
                    Ok(snapshot) => return Some(StreamItem::Snapshot(snapshot)),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    }
}
