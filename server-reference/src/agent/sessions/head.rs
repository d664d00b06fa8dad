//! The in-memory head of active sessions: each one's record, the bounds of its log and its
//! latest events, as the store holds them. The session cache ([`SessionCache`](super::SessionCache)) keeps it: every write to a session
//! runs under that session's write lock, and updates the head after the store commits, so a
//! page at or near the head is served without the store, byte for byte as the store would
//! serve it.
//!
//! Where other processes write the same store, their writes reach this one as notifications
//! ([`Heads::changed`]), each of which retires the heads it makes out of date; a retired head is
//! read again from the store on its next use. While notifications cannot be heard
//! ([`Heads::hearing`]), every read goes to the store. A reader also names the last seq
//! its client has seen (from its cursor), and a head that has not reached it is not used.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use intent_models::Session;
use tokio::sync::OwnedMutexGuard;

use crate::agent::page::{Page, PageKey, PageMemo};
use crate::json::Encoded;
use crate::store::agent::{Bounds, LogRead, SessionRecord};

/// Events kept per session; older ones are read from the store.
pub const HEAD_EVENTS: usize = 256;
/// Sessions kept; past it, sessions that nobody writes are dropped.
const SESSIONS: usize = 4_096;

/// A session's record and the newest part of its log.
#[derive(Debug, Clone)]
pub struct Head {
    /// The session, with its owner.
    record: SessionRecord,
    /// The record's view, made by its first reader since the record last changed; shared with
    /// the head's clones (the one kept and the one its loader reads) until either changes it.
    view: Arc<OnceLock<Encoded<Session>>>,
    /// Where the log stands.
    pub bounds: Bounds,
    /// The newest events as stored: consecutive, the last at `bounds.last_seq`.
    events: VecDeque<Arc<str>>,
    /// The last page made from these events; shared with the head's clones until the log
    /// moves on.
    pages: Arc<PageMemo>,
    /// The notifications it was read after ([`Since`]).
    since: Since,
}

/// How many notifications of other processes' writes had come, for the heads and for one
/// session, when a head was read from the store; a head is current while both stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Since {
    all: u64,
    session: u64,
}

impl Head {
    /// The head of a session whose `events` (consecutive, as stored) end its log, read from the
    /// store after the notifications counted by `since`.
    pub fn new(record: SessionRecord, bounds: Bounds, events: Vec<Arc<str>>, since: Since) -> Self {
        let events = events.into();
        Self {
            record,
            view: Arc::default(),
            bounds,
            events,
            pages: Arc::default(),
            since,
        }
    }

    /// The session, with its owner.
    pub fn record(&self) -> &SessionRecord {
        &self.record
    }

    /// Replaces the session's record.
    pub fn set_record(&mut self, record: SessionRecord) {
        self.record = record;
        self.view = Arc::default();
    }

    /// The record's view as `make` makes it, made once per change of the record: every caller
    /// passes the one way of making it (`Sessions::get`'s), as the kept view is any caller's.
    pub fn view<E>(
        &self,
        make: impl FnOnce(&SessionRecord) -> Result<Encoded<Session>, E>,
    ) -> Result<Encoded<Session>, E> {
        if let Some(view) = self.view.get() {
            return Ok(view.clone());
        }
        let view = make(&self.record)?;
        Ok(self.view.get_or_init(|| view).clone())
    }

    /// Adds `events` (bodies as stored, from the seq after the last one) written at `at_ms`,
    /// after which the log stands at `bounds`; drops what left the retained log or the head.
    /// `false` when they do not follow on, and the head is out of date.
    pub fn advance(&mut self, events: Vec<String>, bounds: Bounds, at_ms: i64) -> bool {
        if self.bounds.last_seq + events.len() as i64 != bounds.last_seq {
            return false;
        }
        self.events.extend(events.into_iter().map(Arc::from));
        self.bounds = bounds;
        self.record.updated_at = at_ms / 1000;
        self.view = Arc::default();
        self.pages = Arc::default();
        // Drop what left the retained log, then what exceeds the head.
        let retained = bounds.last_seq - bounds.pruned_through;
        let kept = usize::try_from(retained).unwrap_or(0).min(HEAD_EVENTS);
        while self.events.len() > kept {
            self.events.pop_front();
        }
        true
    }

    /// Up to `limit` events after `after`, as [`crate::store::Store::read_log`] reads
    /// them, unless some of them are no longer in the head.
    pub fn read(&self, after: i64, limit: i64) -> Option<LogRead> {
        let from = after.max(self.bounds.pruned_through);
        let held_from = self.bounds.last_seq - self.events.len() as i64;
        if from < held_from {
            return None;
        }
        let skip = usize::try_from(from - held_from).unwrap_or(usize::MAX);
        let take = usize::try_from(limit).unwrap_or(0);
        Some(LogRead {
            events: self.events.iter().skip(skip).take(take).cloned().collect(),
            first_seq: from.saturating_add(1),
            last_seq: self.bounds.last_seq,
            pruned_through: self.bounds.pruned_through,
        })
    }

    /// For the page `key` asks of: the one made from this head for the same key, else the
    /// events after `key.after` (or 0) as [`Head::read`] reads them, one more than the page
    /// may hold (to tell whether more follow), with the memo to keep the page made of them in.
    pub fn for_page(&self, key: &PageKey) -> ForPage {
        if let Some(page) = self.pages.get(key) {
            return ForPage::Made(page);
        }
        match self.read(key.after.unwrap_or(0), key.limit + 1) {
            Some(read) => ForPage::Read(read, self.pages.clone()),
            None => ForPage::NotHeld,
        }
    }
}

/// What a head has for a page ([`Head::for_page`]).
pub enum ForPage {
    /// The page, made before for the same key.
    Made(Arc<Page>),
    /// Its events, and where to keep the page made of them.
    Read(LogRead, Arc<PageMemo>),
    /// Some of its events are no longer in the head.
    NotHeld,
}

/// The heads of active sessions, and their write locks.
#[derive(Default)]
pub struct Heads {
    slots: Mutex<foldhash::HashMap<String, Arc<Slot>>>,
    /// Times notifications may have been missed: every head read before is out of date.
    missed: AtomicU64,
    /// Notifications of other processes' writes cannot be heard now: no head is used.
    deaf: AtomicBool,
}

#[derive(Default)]
struct Slot {
    write: Arc<tokio::sync::Mutex<()>>,
    head: RwLock<Option<Head>>,
    /// Notified changes of the session other than appends, which its head may not hold.
    changes: AtomicU64,
    /// The last seq an append was notified up to, by any process (this one's too).
    notified: AtomicI64,
}

impl Slot {
    /// Reads the head with `read`, if it is current and has reached `seen`, under its read lock.
    fn current<T>(&self, missed: u64, seen: i64, read: impl FnOnce(&Head) -> T) -> Option<T> {
        let head = self.head.read().expect("a head lock");
        let reached = seen.max(self.notified.load(Ordering::Acquire));
        head.as_ref()
            .filter(|head| {
                head.since.all == missed
                    && head.since.session == self.changes.load(Ordering::Acquire)
                    && head.bounds.last_seq >= reached
            })
            .map(read)
    }
}

/// A session's write lock, held while its store is written and its head updated.
pub struct Writing {
    slot: Arc<Slot>,
    /// The count of missed notifications when the lock was taken, unless they could not be
    /// heard.
    missed: Option<u64>,
    _guard: OwnedMutexGuard<()>,
}

impl Writing {
    /// The head, if it is current and has reached `seen`.
    pub fn head(&self, seen: i64) -> Option<Head> {
        self.slot.current(self.missed?, seen, Head::clone)
    }

    /// The notifications counted now, to read a head from the store after.
    pub fn since(&self) -> Since {
        Since {
            all: self.missed.unwrap_or(u64::MAX),
            session: self.slot.changes.load(Ordering::Acquire),
        }
    }

    /// Keeps `head`.
    pub fn set(&self, head: Head) {
        *self.slot.head.write().expect("a head lock") = Some(head);
    }

    /// Changes the head, if it is kept, with `change`; a change that returns `false` drops it.
    pub fn update(&self, change: impl FnOnce(&mut Head) -> bool) {
        let mut head = self.slot.head.write().expect("a head lock");
        if let Some(kept) = head.as_mut()
            && !change(kept)
        {
            *head = None;
        }
    }
}

impl Heads {
    /// Reads the head of `session` with `read`, if it is kept, current and has reached `seen`.
    pub fn read<T>(&self, session: &str, seen: i64, read: impl FnOnce(&Head) -> T) -> Option<T> {
        let slot = self.lock().get(session).cloned()?;
        slot.current(self.trusted()?, seen, read)
    }

    /// The count of missed notifications, unless notifications cannot be heard now.
    fn trusted(&self) -> Option<u64> {
        let missed = self.missed.load(Ordering::Acquire);
        (!self.deaf.load(Ordering::Acquire)).then_some(missed)
    }

    /// A process wrote `session`: appended up to `last_seq`, or else changed or deleted it. A
    /// head is current only once it holds every append notified, and was read after every other
    /// change notified. This process's own appends are notified too, and its head holds them as
    /// soon as it has written them.
    pub fn changed(&self, session: &str, last_seq: Option<i64>) {
        let Some(slot) = self.lock().get(session).cloned() else {
            return;
        };
        if let Some(seq) = last_seq {
            slot.notified.fetch_max(seq, Ordering::AcqRel);
        } else {
            slot.changes.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Notifications of other processes' writes can be heard (`true`, from now on) or cannot
    /// (`false`, until they can again). Either way some may have been lost: no head read before
    /// now is used again, and none is used while they cannot be heard.
    pub fn hearing(&self, hearing: bool) {
        self.deaf.store(!hearing, Ordering::Release);
        self.missed.fetch_add(1, Ordering::AcqRel);
    }

    /// Takes `session`'s write lock.
    pub async fn write(&self, session: &str) -> Writing {
        loop {
            let slot = self.slot(session);
            let guard = slot.write.clone().lock_owned().await;
            // The slot may have been dropped while we waited; then take the new one.
            let current = self
                .lock()
                .get(session)
                .is_some_and(|s| Arc::ptr_eq(s, &slot));
            if current {
                return Writing {
                    slot,
                    missed: self.trusted(),
                    _guard: guard,
                };
            }
        }
    }

    /// Forgets `session`, which was deleted; `writing` is its write lock.
    pub fn remove(&self, session: &str, writing: Writing) {
        self.lock().remove(session);
        drop(writing);
    }

    fn slot(&self, session: &str) -> Arc<Slot> {
        let mut slots = self.lock();
        if let Some(slot) = slots.get(session) {
            return slot.clone();
        }
        if slots.len() >= SESSIONS {
            // Drop the slots nobody writes now; a writer holds its slot's lock.
            slots.retain(|_, slot| slot.write.try_lock().is_err());
        }
        let slot = Arc::new(Slot::default());
        slots.insert(session.to_owned(), slot.clone());
        slot
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, foldhash::HashMap<String, Arc<Slot>>> {
        self.slots.lock().expect("the heads lock is not poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(title: &str) -> SessionRecord {
        SessionRecord {
            id: "ses_0123456789abcdef0123456789abcdef".parse().unwrap(),
            account: crate::ids::AccountId::verified("acct"),
            title: title.to_owned(),
            archived: false,
            updated_at: 1,
        }
    }

    /// The head's view, and whether it was made now rather than kept.
    fn view(head: &Head) -> (Session, bool) {
        let mut made = false;
        let view = head
            .view(|record| {
                made = true;
                let session: Session = Session::builder()
                    .archived(record.archived)
                    .id(record.id.parse::<intent_models::SessionId>().unwrap())
                    .title(record.title.clone())
                    .updated_at(record.updated_at)
                    .try_into()
                    .unwrap();
                Encoded::new(&session)
            })
            .unwrap();
        (serde_json::from_slice(&view.into_json()).unwrap(), made)
    }

    #[test]
    fn the_view_is_made_once_per_change_of_the_record() {
        let bounds = Bounds {
            last_seq: 0,
            pruned_through: 0,
        };
        let since = Since { all: 0, session: 0 };
        let mut head = Head::new(record("first"), bounds, Vec::new(), since);
        // A clone, as a loader reads, makes the view for the head it was cloned from.
        let copy = head.clone();
        let (first, made) = view(&copy);
        assert!(made);
        assert_eq!(first.title, "first");
        assert!(!view(&head).1, "an unchanged record's view is kept");

        head.set_record(record("second"));
        let (second, made) = view(&head);
        assert!(made);
        assert_eq!(second.title, "second");
        assert!(!view(&head).1);
        assert_eq!(
            view(&copy),
            (first, false),
            "the clone keeps its own record's view"
        );

        let advanced = Bounds {
            last_seq: 1,
            pruned_through: 0,
        };
        assert!(head.advance(vec!["{}".to_owned()], advanced, 7_000));
        let (third, made) = view(&head);
        assert!(made);
        assert_eq!(third.updated_at, 7);
    }

    #[test]
    fn a_page_is_kept_for_its_key_until_the_log_moves_on() {
        let bounds = Bounds {
            last_seq: 2,
            pruned_through: 0,
        };
        let since = Since { all: 0, session: 0 };
        let events = vec![Arc::from("{}"), Arc::from("{}")];
        let mut head = Head::new(record("t"), bounds, events, since);
        let key = PageKey {
            after: Some(1),
            limit: 20,
            expires: 100,
        };
        let ForPage::Read(read, memo) = head.clone().for_page(&key) else {
            panic!("nothing is kept yet, and the head holds the events");
        };
        assert_eq!((read.first_seq, read.events.len()), (2, 1));
        // Kept through a clone, as a loader's copy keeps it, for the head it was cloned from.
        memo.keep(
            key,
            Arc::new(Page::new("s", "c".to_owned(), &read.events, 2, false)),
        );
        assert!(matches!(head.for_page(&key), ForPage::Made(page) if page.after() == 2));
        let later = PageKey {
            expires: 101,
            ..key
        };
        assert!(matches!(head.for_page(&later), ForPage::Read(..)));

        let advanced = Bounds {
            last_seq: 3,
            pruned_through: 0,
        };
        assert!(head.advance(vec!["{}".to_owned()], advanced, 7_000));
        let ForPage::Read(read, _) = head.for_page(&key) else {
            panic!("a page made before the append is not kept");
        };
        assert_eq!(read.events.len(), 2);
        // A head that holds only the last event does not hold the page.
        let short = Head::new(record("t"), advanced, vec![Arc::from("{}")], since);
        assert!(matches!(short.for_page(&key), ForPage::NotHeld));
    }
}
