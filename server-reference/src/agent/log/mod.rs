//! The event log of every session (parts 2.11, 4.2 and 6) as its clients read it: long-poll
//! pages at opaque cursors, and the SSE projection. What it reads, the session cache writes.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::time::Instant;

mod stream;

pub use stream::StreamItem;

use super::cursor::{CursorError, CursorKey, ReadPoint};
use super::page::{Page, PageKey};
use super::sessions::SessionCache;
use super::sessions::head::{ForPage, Head};
use super::{Error, Result};
use crate::clock::now;
use crate::ids::{AccountId, SessionId};
use crate::store::agent::LogRead;

/// Longest long-poll (part 8).
const MAX_WAIT_MS: i64 = 30_000;
/// Events per page unless `limit` says otherwise, and the most it may say.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 500;

/// Reads every session's log for its clients: it opens and issues their cursors, answers their
/// pages from the session cache, and subscribes their long-polls and streams to its notifier
/// (ending their waits itself when the server drains). Cheap to clone.
#[derive(Clone)]
pub struct EventLog(Arc<Inner>);

struct Inner {
    sessions: SessionCache,
    draining: tokio::sync::watch::Sender<bool>,
    cursors: CursorKey,
    cursor_ttl: Duration,
}

/// What a page read asks for: `cursor` (none reads from the start of the retained log), `wait`
/// (0 to 30000 ms) and `limit` (1 to 500 events).
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct PageRequest {
    /// Where the previous page ended.
    pub cursor: Option<String>,
    /// How long to wait for an event when there is none, in milliseconds.
    pub wait: Option<i64>,
    /// The most events the page may hold.
    pub limit: Option<i64>,
}

impl PageRequest {
    /// The request of a query with nothing to decode (no `%` or `+`) that names each of its
    /// parameters at most once and whose numbers parse: what serde_urlencoded reads from it, at a
    /// tenth of its cost (it decodes a cursor byte by byte, four times over). `None` for any
    /// other query, for serde_urlencoded to read or refuse.
    pub fn from_plain_query(query: &str) -> Option<Self> {
        // Byte searches, which the standard library makes word by word.
        if query.as_bytes().contains(&b'%') || query.as_bytes().contains(&b'+') {
            return None;
        }
        let mut request = Self::default();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "cursor" if request.cursor.is_none() => request.cursor = Some(value.to_owned()),
                "wait" if request.wait.is_none() => request.wait = Some(value.parse().ok()?),
                "limit" if request.limit.is_none() => request.limit = Some(value.parse().ok()?),
                "cursor" | "wait" | "limit" => return None,
                _ => {}
            }
        }
        Some(request)
    }
}

impl EventLog {
    /// The log of `sessions`, with cursors of `cursors` valid for `cursor_ttl`.
    pub fn new(sessions: SessionCache, cursors: CursorKey, cursor_ttl: Duration) -> Self {
        Self(Arc::new(Inner {
            sessions,
            draining: tokio::sync::watch::Sender::new(false),
            cursors,
            cursor_ttl,
        }))
    }

    /// Starts draining: waiting long-polls answer at once with the page they have, and streams
    /// end; new long-polls do not wait.
    pub fn drain(&self) {
        self.0.draining.send_replace(true);
    }

    /// Forgets the wake-up channels of sessions nobody follows.
    pub fn forget_idle_readers(&self) {
        self.0.sessions.notifier().forget_idle();
    }

    /// Whether the log is draining.
    pub fn is_draining(&self) -> bool {
        *self.0.draining.borrow()
    }

    /// A fresh cursor at `position` of `session` for `account`.
    pub fn cursor(&self, account: &AccountId, session: &SessionId, position: ReadPoint) -> String {
        self.0
            .cursors
            .issue(account, session, position, self.expiry())
    }

    /// When a cursor issued now expires, in seconds.
    fn expiry(&self) -> i64 {
        let ttl = i64::try_from(self.0.cursor_ttl.as_secs()).unwrap_or(i64::MAX);
        now().saturating_add(ttl)
    }

    /// A page of `account`'s `session`: the events after the cursor, waiting up to `wait` for
    /// one when there is none. The cursor is opened once and the log read once per wake-up.
    pub async fn page(
        &self,
        account: &AccountId,
        session: &SessionId,
        request: &PageRequest,
    ) -> Result<Arc<Page>> {
        let wait = request.wait.unwrap_or(0);
        if !(0..=MAX_WAIT_MS).contains(&wait) {
            return Err(Error::InvalidParameter(format!(
                "wait must be 0 to {MAX_WAIT_MS} milliseconds"
            )));
        }
        let limit = request.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::InvalidParameter(format!(
                "limit must be 1 to {MAX_LIMIT}"
            )));
        }
        // Ownership is checked by each read; a session that is not the account's is a 404 before
        // its cursor is judged.
        let opened = match &request.cursor {
            Some(cursor) => match self.open(account, session, cursor) {
                Ok(after) => Some(after),
                Err(error) => {
                    self.0.sessions.owned(account, session).await?;
                    return Err(cursor_error(error));
                }
            },
            None => None,
        };
        // Subscribe before reading, so that an append after the read (or a drain) wakes the wait
        // below. A page that will not wait subscribes to nothing.
        let mut waiting = (wait > 0).then(|| {
            (
                self.0.sessions.notifier().subscribe(session),
                self.0.draining.subscribe(),
            )
        });
        let deadline = Instant::now() + Duration::from_millis(wait.unsigned_abs());
        // Counted in the metrics from its first wait until it answers.
        let mut counted = None;
        loop {
            let page = self.page_at(account, session, opened, limit).await?;
            let Some((subscription, draining)) = waiting.as_mut().filter(|_| page.is_empty())
            else {
                return Ok(page);
            };
            if Instant::now() >= deadline || *draining.borrow() {
                return Ok(page);
            }
            counted.get_or_insert_with(crate::metrics::long_poll);
            tokio::select! {
                woken = tokio::time::timeout_at(deadline, subscription.appended.changed()) => {
                    if matches!(woken, Ok(Err(_))) {
                        // The session was deleted while we waited.
                        return Err(Error::NoSession(session.to_string()));
                    }
                }
                // The next round answers with the page it reads.
                _ = draining.wait_for(|draining| *draining) => {}
            }
        }
    }

    /// The page of `account`'s `session` after `opened` (or from the start of the retained
    /// log), of at most `limit` events: the one its head made for a reader that asked the same
    /// this second, else one made now (and kept on the head, when made from it).
    async fn page_at(
        &self,
        account: &AccountId,
        session: &SessionId,
        opened: Option<ReadPoint>,
        limit: i64,
    ) -> Result<Arc<Page>> {
        let (after, seen) = opened.map_or((0, 0), |at| (at.after, at.seen));
        let key = PageKey {
            after: opened.map(|at| at.after),
            limit,
            expires: self.expiry(),
        };
        let owned = |head: &Head| {
            head.record()
                .is_owned_by(account)
                .then(|| head.for_page(&key))
        };
        let no_session = || Error::NoSession(session.to_string());
        let (read, memo) = match self
            .0
            .sessions
            .with_head(account, session, seen, owned)
            .await?
        {
            None | Some(None) => return Err(no_session()),
            Some(Some(ForPage::Made(page))) => return Ok(page),
            Some(Some(ForPage::Read(read, memo))) => (read, Some(memo)),
            Some(Some(ForPage::NotHeld)) => {
                let read = Box::pin(self.0.sessions.read_stored(
                    account,
                    session,
                    after,
                    limit + 1,
                ));
                (read.await?.ok_or_else(no_session)?, None)
            }
        };
        // Without a cursor the page starts where the retained log does: pruned events are gone,
        // so reading from 0 reads from there.
        let after = match opened {
            Some(_) => position(&read, after).map_err(cursor_error)?,
            None => read.pruned_through,
        };
        let page = Arc::new(self.make_page(account, session, after, read, limit, key.expires));
        // Only a page that reaches the log's end is kept: that is where a session's many readers
        // wait, woken together by an append. A page behind it is one reader's own, and keeping it
        // would cost that reader and take the end's page from the many.
        if let Some(memo) = memo.filter(|_| page.reaches_end()) {
            memo.keep(key, page.clone());
        }
        Ok(page)
    }

    /// The position of `cursor`, from its signature and expiry alone.
    fn open(
        &self,
        account: &AccountId,
        session: &SessionId,
        cursor: &str,
    ) -> Result<ReadPoint, CursorError> {
        self.0.cursors.open(account, session, cursor, now())
    }

    /// The position of `cursor`, checked against the retained log too.
    async fn open_at(
        &self,
        account: &AccountId,
        session: &SessionId,
        cursor: &str,
    ) -> Result<Result<ReadPoint, CursorError>> {
        let at = match self.open(account, session, cursor) {
            Ok(at) => at,
            Err(error) => return Ok(Err(error)),
        };
        let read = self.bounds(account, session, at.seen).await?;
        Ok(position(&read, at.after).map(|_| at))
    }

    /// The position before the first event of the retained log of `session`.
    async fn retained_start(&self, account: &AccountId, session: &SessionId) -> Result<ReadPoint> {
        let read = self.bounds(account, session, 0).await?;
        Ok(ReadPoint::new(read.pruned_through, read.last_seq))
    }

    /// Where `account`'s `session` stands, with no events, as of `seen` at least.
    async fn bounds(&self, account: &AccountId, session: &SessionId, seen: i64) -> Result<LogRead> {
        self.0
            .sessions
            .read(account, session, i64::MAX, 0, seen)
            .await?
            .ok_or_else(|| Error::NoSession(session.to_string()))
    }

    /// A page of `read`, for `account`, after `after`, at most `limit` events, whose cursor
    /// expires at `expires` (seconds).
    fn make_page(
        &self,
        account: &AccountId,
        session: &SessionId,
        after: i64,
        read: LogRead,
        limit: i64,
        expires: i64,
    ) -> Page {
        let held = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .min(read.events.len());
        let events = &read.events[..held];
        let last = match events.len() {
            0 => after,
            count => read.first_seq + count as i64 - 1,
        };
        let position = ReadPoint::new(last, read.last_seq);
        let cursor = self.0.cursors.issue(account, session, position, expires);
        let has_more = read.events.len() > held || last < read.last_seq;
        Page::new(session, cursor, events, last, has_more)
    }
}

/// `after` if the retained log of `read` holds it: 410 once its events were pruned, 400 when
/// it lies beyond the log.
fn position(read: &LogRead, after: i64) -> Result<i64, CursorError> {
    if after < read.pruned_through {
        Err(CursorError::Expired)
    } else if after > read.last_seq {
        Err(CursorError::Invalid)
    } else {
        Ok(after)
    }
}

fn cursor_error(error: CursorError) -> Error {
    match error {
        CursorError::Invalid => Error::InvalidCursor,
        CursorError::Expired => Error::CursorExpired,
    }
}

#[cfg(test)]
mod tests {
    use intent_models::{AgentEvent, AgentEventRole};

    use super::*;
    use crate::agent::Hub;
    use crate::agent::sessions::head::HEAD_EVENTS;
    use crate::agent::sessions::{DRAFT_SEQ, Entry, Writer};
    use crate::store::Store;
    use crate::store::agent::SessionRecord;
    use crate::store::agent::{Appended, TurnStarted};

    const ACCOUNT: &str = "alice";
    const SESSION: &str = "ses_1";

    #[test]
    fn a_plain_query_reads_as_serde_urlencoded_reads_it_and_any_other_is_left_to_it() {
        let plain = [
            "",
            "limit=20",
            "cursor=AbC-_9&limit=12&wait=30000",
            "&&wait=-1&cursor=&limit=05&",
            "cursor",
            "other=1&other=2&=x&limit=3",
            "cursor=a=b&wait=0",
            "limit=7&cursor=été",
        ];
        for query in plain {
            let read: PageRequest = serde_urlencoded::from_str(query).unwrap();
            assert_eq!(PageRequest::from_plain_query(query), Some(read), "{query}");
        }
        // Percent-encoded or plus signs, a parameter twice, a number that does not parse.
        let other = [
            "cursor=a%2Db",
            "limit=%32",
            "wait=+5",
            "limit=1&limit=2",
            "cursor=a&cursor=b",
            "limit=",
            "wait=soon",
        ];
        for query in other {
            assert_eq!(PageRequest::from_plain_query(query), None, "{query}");
        }
    }

    fn account() -> AccountId {
        AccountId::verified(ACCOUNT)
    }

    fn session_id() -> SessionId {
        SESSION.parse().unwrap()
    }
    const TURN: &str = "turn_1";

    /// A log over the store of `dir`, with a fresh set of heads, as after a restart.
    fn open(store: &Arc<Store>, dir: &std::path::Path, retention: Duration) -> EventLog {
        let cursors = CursorKey::load_or_create(dir, Duration::from_secs(60)).unwrap();
        let store = store.clone();
        let hour = Duration::from_secs(3600);
        let sessions = SessionCache::new(store, Arc::new(Hub::default()), retention);
        EventLog::new(sessions, cursors, hour)
    }

    /// A store with a session of `ACCOUNT` whose turn `TURN` is processing.
    async fn session(dir: &std::path::Path, log_retention: Duration) -> (Arc<Store>, EventLog) {
        let runner = crate::store::Runner {
            id: "test".into(),
            lease_ms: 10_000,
        };
        let store = Arc::new(Store::sqlite(dir, runner).await.unwrap());
        let record = SessionRecord {
            id: session_id(),
            account: account(),
            title: "t".into(),
            archived: false,
            updated_at: 0,
        };
        let log = open(&store, dir, log_retention);
        assert!(log.0.sessions.create(record.clone()).await.unwrap());
        assert!(
            !log.0.sessions.create(record).await.unwrap(),
            "the id is taken"
        );
        let started = log
            .0
            .sessions
            .start_turn(&account(), &session_id(), TURN, messages(1))
            .await
            .unwrap();
        assert!(matches!(started, TurnStarted::Started { .. }));
        (store, log)
    }

    fn messages(count: usize) -> Vec<AgentEvent> {
        (0..count)
            .map(|i| AgentEvent::Message {
                created_at: now(),
                role: AgentEventRole::Assistant,
                seq: DRAFT_SEQ,
                text: format!("message {i} \"quoted\" é"),
                turn_id: TURN.into(),
            })
            .collect()
    }

    async fn append(log: &EventLog, count: usize) {
        let entry = Entry {
            turn_id: TURN.into(),
            events: messages(count),
            next_state: None,
            action: None,
        };
        let appended = log
            .0
            .sessions
            .append(&session_id(), entry, Writer::Runtime)
            .await
            .unwrap();
        assert!(matches!(appended, Appended::Done(_)), "{appended:?}");
    }

    /// Every read of the head equals the store's, for positions around the retained log, the
    /// head and the end.
    async fn same_reads(log: &EventLog, store: &Store) -> i64 {
        let bounds = store
            .read_log(&account(), &session_id(), 0, 0)
            .await
            .unwrap()
            .unwrap();
        let (pruned, last) = (bounds.pruned_through, bounds.last_seq);
        let afters = [
            0,
            pruned.saturating_sub(1),
            pruned,
            (pruned + last) / 2,
            last - 300,
            last - 3,
            last,
        ];
        for after in afters.into_iter().filter(|a| *a >= 0) {
            for limit in [0, 1, 7, 101, 501] {
                let from_log = log
                    .0
                    .sessions
                    .read(&account(), &session_id(), after, limit, 0)
                    .await
                    .unwrap();
                let from_store = store
                    .read_log(&account(), &session_id(), after, limit)
                    .await
                    .unwrap();
                assert_eq!(from_log, from_store, "after {after}, limit {limit}");
            }
        }
        assert_eq!(
            log.0
                .sessions
                .read(&AccountId::verified("bob"), &session_id(), 0, 10, 0)
                .await
                .unwrap(),
            None
        );
        last - pruned
    }

    /// A page that reaches the log's end, asked again, is the one its head kept, byte for byte
    /// the page a log with no head makes; a page behind the end is not kept; another account is
    /// refused before the memo is reached; an append makes the next page anew.
    #[tokio::test]
    async fn a_kept_page_is_the_page_made_anew_and_only_its_owners() {
        let dir = tempfile::tempdir().unwrap();
        let (store, log) = session(dir.path(), Duration::from_secs(3600)).await;
        append(&log, 3).await;
        let request = PageRequest {
            limit: Some(100),
            ..PageRequest::default()
        };
        let (alice, id) = (account(), session_id());
        let behind = PageRequest {
            limit: Some(1),
            ..PageRequest::default()
        };
        let (first, second) = loop {
            let second = now();
            let pages = (
                log.page(&alice, &id, &behind).await.unwrap(),
                log.page(&alice, &id, &behind).await.unwrap(),
            );
            if now() == second {
                break pages;
            }
        };
        assert!(!first.reaches_end());
        assert_eq!(first.json().text(), second.json().text());
        assert!(
            !Arc::ptr_eq(&first, &second),
            "a page behind the end is made anew"
        );
        let page = || log.page(&alice, &id, &request);
        // Pages made in another second differ in their cursor's expiry: take three in one.
        let (kept, again, fresh) = loop {
            let second = now();
            let kept = page().await.unwrap();
            let again = page().await.unwrap();
            let fresh = open(&store, dir.path(), Duration::from_secs(3600))
                .page(&alice, &id, &request)
                .await
                .unwrap();
            if now() == second {
                break (kept, again, fresh);
            }
        };
        assert!(
            Arc::ptr_eq(&kept, &again),
            "the page asked again is the kept one"
        );
        assert_eq!(kept.json().text(), fresh.json().text());

        let bob = AccountId::verified("bob");
        let refused = log.page(&bob, &session_id(), &request).await;
        assert!(matches!(refused, Err(Error::NoSession(_))));

        let all = PageRequest {
            limit: Some(100),
            ..PageRequest::default()
        };
        let before = log.page(&account(), &session_id(), &all).await.unwrap();
        append(&log, 1).await;
        let after = log.page(&account(), &session_id(), &all).await.unwrap();
        assert_eq!(
            after.to_model().events.len(),
            before.to_model().events.len() + 1
        );
    }

    /// Two logs over one store, as two processes over one database: what one writes reaches
    /// the other's readers through the cursor its client carries, or through a notification.
    #[tokio::test]
    async fn a_head_is_not_used_past_a_write_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let (store, a) = session(dir.path(), Duration::from_secs(3600)).await;
        let b = open(&store, dir.path(), Duration::from_secs(3600));
        let first = PageRequest::default();
        let on_b = b.page(&account(), &session_id(), &first).await.unwrap();
        let seen = on_b.to_model().events.len();

        // A appends: B's head does not hold it, but a cursor from A says how far A saw.
        append(&a, 2).await;
        let stale = b.page(&account(), &session_id(), &first).await.unwrap();
        assert_eq!(
            stale.to_model().events.len(),
            seen,
            "B's head, with nothing to retire it"
        );
        let after = |cursor: &str| PageRequest {
            cursor: Some(cursor.to_owned()),
            ..PageRequest::default()
        };
        let on_a = a
            .page(&account(), &session_id(), &after(on_b.cursor()))
            .await
            .unwrap();
        assert_eq!(on_a.to_model().events.len(), 2);
        let read = b
            .page(&account(), &session_id(), &after(on_a.cursor()))
            .await
            .unwrap();
        assert!(read.is_empty(), "nothing after A's page, and no 400");
        let fresh = b.page(&account(), &session_id(), &first).await.unwrap();
        assert_eq!(
            fresh.to_model().events.len(),
            seen + 2,
            "A's cursor retired B's head"
        );

        // A notification retires the head for every reader.
        append(&a, 1).await;
        let last = store
            .read_log(&account(), &session_id(), 0, 0)
            .await
            .unwrap()
            .unwrap()
            .last_seq;
        b.0.sessions.write_heard(&session_id(), Some(last - 1));
        let before = b
            .page(&account(), &session_id(), &PageRequest::default())
            .await
            .unwrap();
        assert_eq!(
            before.to_model().events.len(),
            fresh.to_model().events.len(),
            "a notification it holds"
        );
        b.0.sessions.write_heard(&session_id(), Some(last));
        let after = b
            .page(&account(), &session_id(), &PageRequest::default())
            .await
            .unwrap();
        assert_eq!(
            after.to_model().events.len(),
            fresh.to_model().events.len() + 1
        );

        // A change of the session, and lost notifications, retire it too.
        a.0.sessions
            .update(&account(), &session_id(), Some("renamed"), None, 5)
            .await
            .unwrap();
        assert_eq!(
            b.0.sessions
                .session(&account(), &session_id())
                .await
                .unwrap()
                .unwrap()
                .title,
            "t"
        );
        b.0.sessions.write_heard(&session_id(), None);
        assert_eq!(
            b.0.sessions
                .session(&account(), &session_id())
                .await
                .unwrap()
                .unwrap()
                .title,
            "renamed"
        );
        a.0.sessions
            .update(&account(), &session_id(), Some("again"), None, 6)
            .await
            .unwrap();
        b.0.sessions.hearing_changes(false);
        assert_eq!(
            b.0.sessions
                .session(&account(), &session_id())
                .await
                .unwrap()
                .unwrap()
                .title,
            "again"
        );
        a.0.sessions
            .update(&account(), &session_id(), Some("deaf"), None, 7)
            .await
            .unwrap();
        assert_eq!(
            b.0.sessions
                .session(&account(), &session_id())
                .await
                .unwrap()
                .unwrap()
                .title,
            "deaf"
        );
        b.0.sessions.hearing_changes(true);
        a.0.sessions
            .update(&account(), &session_id(), Some("again"), None, 8)
            .await
            .unwrap();
        b.0.sessions.write_heard(&session_id(), None);
        assert_eq!(
            b.0.sessions
                .session(&account(), &session_id())
                .await
                .unwrap()
                .unwrap()
                .title,
            "again"
        );
    }

    #[tokio::test]
    async fn the_head_reads_as_the_store_over_appends_pruning_and_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut log) = session(dir.path(), Duration::from_secs(3600)).await;
        // A simple deterministic generator: how many events each append writes.
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |modulo: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % modulo
        };
        let mut most_retained = 0;
        let mut retention = Duration::from_secs(3600);
        for round in 0..240 {
            if round == 120 {
                // Past the head, nothing pruned yet; then a restart with a short retention:
                // from now on appends prune the log.
                most_retained = same_reads(&log, &store).await;
                retention = Duration::from_millis(300);
                log = open(&store, dir.path(), retention);
            }
            append(&log, 1 + next(4) as usize).await;
            if round % 15 == 0 {
                same_reads(&log, &store).await;
            }
            if round >= 120 && next(3) == 0 {
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            if round % 50 == 49 {
                log = open(&store, dir.path(), retention);
                same_reads(&log, &store).await;
            }
        }
        same_reads(&log, &store).await;
        let bounds = store
            .read_log(&account(), &session_id(), 0, 0)
            .await
            .unwrap()
            .unwrap();
        assert!(bounds.pruned_through > 0, "retention pruned the log");
        assert!(
            most_retained > HEAD_EVENTS as i64,
            "some reads reached past the head ({most_retained} events retained at most)"
        );
    }

    #[tokio::test]
    async fn readers_see_no_gap_and_no_duplicate_under_concurrent_appends() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, log) = session(dir.path(), Duration::from_secs(3600)).await;
        const WRITERS: usize = 4;
        const APPENDS: usize = 40;
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let log = log.clone();
                tokio::spawn(async move {
                    for i in 0..APPENDS {
                        append(&log, 1 + (w + i) % 3).await;
                    }
                })
            })
            .collect();
        let expected: i64 = 1
            + (0..WRITERS)
                .flat_map(|w| (0..APPENDS).map(move |i| 1 + (w + i) % 3))
                .sum::<usize>() as i64;
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut seqs = Vec::new();
                    let mut cursor = None;
                    while seqs.len() < expected as usize {
                        let request = PageRequest {
                            cursor: cursor.clone(),
                            wait: Some(1_000),
                            limit: Some(7),
                        };
                        let page = log.page(&account(), &session_id(), &request).await.unwrap();
                        seqs.extend(
                            page.to_model()
                                .events
                                .iter()
                                .map(|event| event.seq() as i64),
                        );
                        let seen = seqs.last().copied().unwrap_or(0);
                        assert_eq!(page.after(), seen, "a page stands at its last event");
                        cursor = Some(page.cursor().to_owned());
                    }
                    seqs
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
        for reader in readers {
            let seqs = tokio::time::timeout(Duration::from_secs(30), reader)
                .await
                .expect("the reader catches up")
                .unwrap();
            assert_eq!(seqs, (1..=expected).collect::<Vec<_>>());
        }
    }
}
