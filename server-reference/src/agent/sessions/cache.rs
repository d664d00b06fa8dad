//! The write-through cache of session heads: the only way a session, a turn's record or an
//! event reaches the store. Every write to a session runs under its head's write lock and
//! updates the head after the store commits, then wakes the session's readers; reads of a
//! session, and of the newest part of its log, are answered from its head when it is kept.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use intent_models::{AgentEvent, MessageSnapshot, Session, TurnState};
use serde_json::{Map, Value};

use super::head::{HEAD_EVENTS, Head, Heads, Writing};
use crate::agent::notify::Notifier;
use crate::agent::transitions::can_become;
use crate::agent::{Error, Result};
use crate::clock::now_ms;
use crate::ids::{AccountId, SessionId};
use crate::json::Encoded;
use crate::store::agent::{
    Append, Appended, Bounds, LogRead, NewAction, Resolution, Resolved, SessionRecord, TurnStarted,
    event_body,
};
use crate::store::{self, Store};

/// The placeholder `seq` of an event before the log assigns one.
pub const DRAFT_SEQ: NonZeroU64 = NonZeroU64::MIN;

/// Owns every session's record and log as the store holds them, with the in-memory head of
/// active sessions, and wakes readers through the notifier after each append. Cheap to clone.
#[derive(Clone)]
pub struct SessionCache(Arc<Inner>);

/// A [`SessionCache`] that is not kept alive by this handle.
pub struct WeakCache(std::sync::Weak<Inner>);

impl WeakCache {
    /// The cache, while it lives.
    pub fn upgrade(&self) -> Option<SessionCache> {
        self.0.upgrade().map(SessionCache)
    }
}

struct Inner {
    store: Arc<Store>,
    heads: Heads,
    notifier: Arc<dyn Notifier>,
    retention: Duration,
}

/// Events of one turn to append, with the state they move the turn to.
pub struct Entry {
    /// The turn.
    pub turn_id: String,
    /// The events; the log assigns their `seq`.
    pub events: Vec<AgentEvent>,
    /// The state the turn enters with them.
    pub next_state: Option<TurnState>,
    /// An action they ask the client to resolve.
    pub action: Option<NewAction>,
}

/// Who appends, which decides the turn states an append is accepted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The turn's runtime: only while the turn is `processing` and leased to this process, so
    /// that a runner whose turn another process claimed writes no more of it.
    Runtime,
    /// The client (an interrupt): in any state that may enter the next one.
    Client,
}

impl SessionCache {
    /// The sessions of `store`, waking readers through `notifier`, with events retained for
    /// `retention`.
    pub fn new(store: Arc<Store>, notifier: Arc<dyn Notifier>, retention: Duration) -> Self {
        Self(Arc::new(Inner {
            store,
            heads: Heads::default(),
            notifier,
            retention,
        }))
    }

    /// The notifier that wakes the sessions' readers.
    pub(crate) fn notifier(&self) -> &Arc<dyn Notifier> {
        &self.0.notifier
    }

    /// Up to `limit` events of `account`'s `session` after `after`, from the store alone.
    pub(crate) async fn read_stored(
        &self,
        account: &AccountId,
        session: &SessionId,
        after: i64,
        limit: i64,
    ) -> Result<Option<LogRead>, store::Error> {
        self.0.store.read_log(account, session, after, limit).await
    }

    /// A process of the shared store (this one too) wrote `session`: appended up to `last_seq`,
    /// or else changed or deleted it. Heads it makes out of date are read from the store again.
    pub fn write_heard(&self, session: &str, last_seq: Option<i64>) {
        self.0.heads.changed(session, last_seq);
    }

    /// Whether this process hears of other processes' writes (from now on) or not (until it
    /// does again): some may have been missed, so every head is read from the store again, and
    /// while they are not heard every read goes to the store.
    pub fn hearing_changes(&self, hearing: bool) {
        self.0.heads.hearing(hearing);
    }

    /// A handle that does not keep the cache alive.
    pub fn downgrade(&self) -> WeakCache {
        WeakCache(Arc::downgrade(&self.0))
    }

    /// Creates `session`, with an empty log whose head is kept from now on; `false` when its id
    /// is taken.
    pub async fn create(&self, session: SessionRecord) -> Result<bool, store::Error> {
        let writing = self.0.heads.write(&session.id).await;
        let since = writing.since();
        let created = self.0.store.create_session(&session).await?;
        if created {
            let empty = Bounds {
                last_seq: 0,
                pruned_through: 0,
            };
            writing.set(Head::new(session, empty, Vec::new(), since));
        }
        Ok(created)
    }

    /// Starts turn `turn_id` of `account`'s `session` with its first `events`, unless another
    /// turn is active.
    pub async fn start_turn(
        &self,
        account: &AccountId,
        session: &SessionId,
        turn_id: &str,
        events: Vec<AgentEvent>,
    ) -> Result<TurnStarted, store::Error> {
        let append = self.draft(session, turn_id, events, None, None);
        let writing = self.0.heads.write(session).await;
        let started = self.0.store.start_turn(account, &append).await?;
        if let TurnStarted::Started { bounds, .. } = started {
            self.appended(writing, session, &append.events, bounds, append.at_ms);
        }
        Ok(started)
    }

    /// Appends `entry` to `session` in one transaction that assigns the seqs and moves the turn,
    /// if its current state accepts `writer` and the transition.
    pub async fn append(
        &self,
        session: &SessionId,
        entry: Entry,
        writer: Writer,
    ) -> Result<Appended, store::Error> {
        let next = entry.next_state;
        let append = self.draft(session, &entry.turn_id, entry.events, next, entry.action);
        let accept = move |current: TurnState, leased_here: bool| {
            (writer == Writer::Client || (current == TurnState::Processing && leased_here))
                && next.is_none_or(|next| can_become(current, next))
        };
        let writing = self.0.heads.write(session).await;
        let appended = self.0.store.append(&append, &accept).await?;
        if let Appended::Done(bounds) = appended {
            self.appended(writing, session, &append.events, bounds, append.at_ms);
        }
        Ok(appended)
    }

    /// Resolves an action and appends the events `events` makes from its turn and the resulting
    /// revision, moving the turn from `awaiting_action` back to `processing`. The store admits
    /// only a pending action, which only a turn awaiting it has.
    pub async fn resolve(
        &self,
        resolution: &Resolution,
        events: impl Fn(&str, i64) -> Vec<AgentEvent> + Send + Sync,
    ) -> Result<Resolved, store::Error> {
        let written = std::sync::Mutex::new(Vec::new());
        let drafts = |turn_id: &str, revision: i64| -> Vec<Map<String, Value>> {
            let drafts: Vec<_> = events(turn_id, revision).into_iter().map(draft).collect();
            *written.lock().expect("a drafts lock") = drafts.clone();
            drafts
        };
        let session = &resolution.session_id;
        let writing = self.0.heads.write(session).await;
        let resolved = self.0.store.resolve_action(resolution, &drafts).await?;
        if let Resolved::Done { bounds, .. } = &resolved {
            let written = std::mem::take(&mut *written.lock().expect("a drafts lock"));
            self.appended(writing, session, &written, *bounds, resolution.at_ms);
        }
        Ok(resolved)
    }

    /// After the store wrote `drafts` to `session` at `at_ms`, leaving its log at `bounds`: adds
    /// them to the head (as the store keeps them), releases the write lock and wakes readers.
    fn appended(
        &self,
        writing: Writing,
        session: &SessionId,
        drafts: &[Map<String, Value>],
        bounds: Bounds,
        at_ms: i64,
    ) {
        let first = bounds.last_seq - drafts.len() as i64 + 1;
        let bodies = (first..)
            .zip(drafts)
            .map(|(seq, draft)| event_body(draft, seq))
            .collect();
        writing.update(|head| head.advance(bodies, bounds, at_ms));
        drop(writing);
        self.0.notifier.appended(session, bounds.last_seq);
    }

    /// Hands a transient snapshot to the streams of `session`; it is never stored.
    pub fn snapshot(&self, session: &SessionId, snapshot: MessageSnapshot) {
        self.0.notifier.snapshot(session, snapshot);
    }

    /// `account`'s session `id`, from its head when it is kept; reading it keeps its head.
    pub async fn session(
        &self,
        account: &AccountId,
        id: &SessionId,
    ) -> Result<Option<SessionRecord>, store::Error> {
        let record = self.with_head(account, id, 0, |head| head.record().clone());
        Ok(record.await?.filter(|record| record.is_owned_by(account)))
    }

    /// `account`'s session `id` in the view `make` makes of its record; from its head when it is
    /// kept, where the view is made once per change of the record. Reading it keeps its head.
    pub async fn session_view<E: From<store::Error>>(
        &self,
        account: &AccountId,
        id: &SessionId,
        make: impl Fn(&SessionRecord) -> Result<Encoded<Session>, E>,
    ) -> Result<Option<Encoded<Session>>, E> {
        let owned = |head: &Head| {
            head.record()
                .is_owned_by(account)
                .then(|| head.view(&make))
                .transpose()
        };
        let view = self.with_head(account, id, 0, owned).await?;
        Ok(view.transpose()?.flatten())
    }

    /// Sets the title and/or the archived flag of `account`'s session `id`.
    pub async fn update(
        &self,
        account: &AccountId,
        id: &SessionId,
        title: Option<&str>,
        archived: Option<bool>,
        at: i64,
    ) -> Result<Option<SessionRecord>, store::Error> {
        let writing = self.0.heads.write(id).await;
        let record = self
            .0
            .store
            .update_session(account, id, title, archived, at)
            .await?;
        if let Some(record) = &record {
            writing.update(|head| {
                head.set_record(record.clone());
                true
            });
        }
        Ok(record)
    }

    /// Deletes `account`'s session `id` with its log, and ends its readers; whether it was
    /// `account`'s.
    pub async fn delete(&self, account: &AccountId, id: &SessionId) -> Result<bool, store::Error> {
        let writing = self.0.heads.write(id).await;
        let deleted = self.0.store.delete_session(account, id).await?;
        if deleted {
            self.0.heads.remove(id, writing);
            self.0.notifier.close(id);
        }
        Ok(deleted)
    }

    /// Up to `limit` events of `account`'s `session` after `after`, from its head when the head
    /// holds them and has reached `seen`, and from the store otherwise; `None` when `account`
    /// has no such session.
    pub(crate) async fn read(
        &self,
        account: &AccountId,
        session: &SessionId,
        after: i64,
        limit: i64,
        seen: i64,
    ) -> Result<Option<LogRead>, store::Error> {
        let owned = |head: &Head| {
            head.record()
                .is_owned_by(account)
                .then(|| head.read(after, limit))
        };
        match self
            .with_head(account, session, seen, owned)
            .await?
            .flatten()
        {
            None => Ok(None),
            Some(Some(read)) => Ok(Some(read)),
            Some(None) => Box::pin(self.0.store.read_log(account, session, after, limit)).await,
        }
    }

    /// `read` of `session`'s head: the kept one when it is current and has reached `seen`, else
    /// one read from the store and kept; `None` when the store holds no such session.
    pub(crate) async fn with_head<T>(
        &self,
        account: &AccountId,
        session: &SessionId,
        seen: i64,
        read: impl Fn(&Head) -> T,
    ) -> Result<Option<T>, store::Error> {
        if let Some(kept) = self.0.heads.read(session, seen, &read) {
            return Ok(Some(kept));
        }
        // The store's futures are boxed: a waiting reader would otherwise hold their size.
        let loaded = Box::pin(self.load(account, session, seen)).await?;
        Ok(loaded.map(|head| read(&head)))
    }

    /// Reads `account`'s `session` into a kept head, under its write lock, unless a current one
    /// has reached `seen`; `None` when `account` has no such session.
    async fn load(
        &self,
        account: &AccountId,
        session: &SessionId,
        seen: i64,
    ) -> Result<Option<Head>, store::Error> {
        let writing = self.0.heads.write(session).await;
        if let Some(head) = writing.head(seen) {
            return Ok(Some(head));
        }
        let since = writing.since();
        let Some(record) = self.0.store.session(account, session).await? else {
            return Ok(None);
        };
        let Some(bounds) = self.0.store.read_log(account, session, 0, 0).await? else {
            return Ok(None);
        };
        let held = HEAD_EVENTS as i64;
        let from = bounds.pruned_through.max(bounds.last_seq - held);
        let Some(read) = self.0.store.read_log(account, session, from, held).await? else {
            return Ok(None);
        };
        // Another process may have appended between the two reads: the head ends at the last
        // event it holds, and the notification of those appends sends readers past it.
        let first = from.max(read.pruned_through);
        let bounds = Bounds {
            last_seq: first + read.events.len() as i64,
            pruned_through: read.pruned_through,
        };
        let head = Head::new(record, bounds, read.events, since);
        writing.set(head.clone());
        Ok(Some(head))
    }

    /// `NoSession` unless `account` owns `session`.
    pub(crate) async fn owned(&self, account: &AccountId, session: &SessionId) -> Result<()> {
        match self.session(account, session).await? {
            Some(_) => Ok(()),
            None => Err(Error::NoSession(session.to_string())),
        }
    }

    fn draft(
        &self,
        session: &SessionId,
        turn_id: &str,
        events: Vec<AgentEvent>,
        next_state: Option<TurnState>,
        action: Option<NewAction>,
    ) -> Append {
        let retention = i64::try_from(self.0.retention.as_millis()).unwrap_or(i64::MAX);
        let at_ms = now_ms();
        Append {
            session_id: session.clone(),
            turn_id: turn_id.to_owned(),
            events: events.into_iter().map(draft).collect(),
            next_state,
            action,
            at_ms,
            prune_before_ms: at_ms.saturating_sub(retention),
        }
    }
}

/// An event as the store takes it: `seq` is replaced inside the write transaction.
fn draft(event: AgentEvent) -> Map<String, Value> {
    match serde_json::to_value(event).expect("an event serializes") {
        Value::Object(map) => map,
        _ => unreachable!("an event is a JSON object"),
    }
}
