//! The in-memory head of active sessions: each one's record, the bounds of its log and its
//! latest events, as the store holds them. The event log keeps it: every write to a session
//! runs under that session's write lock, and updates the head after the store commits, so a
//! page at or near the head is served without the store, byte for byte as the store would
//! serve it. This holds for one process: a deployment whose store other processes write must
//! not keep heads.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::OwnedMutexGuard;

use crate::store::agent::{Bounds, LogRead, SessionRecord};

/// Events kept per session; older ones are read from the store.
pub const HEAD_EVENTS: usize = 256;
/// Sessions kept; past it, sessions that nobody writes are dropped.
const SESSIONS: usize = 4_096;

/// A session's record and the newest part of its log.
#[derive(Debug, Clone)]
pub struct Head {
    /// The session, with its owner.
    pub record: SessionRecord,
    /// Where the log stands.
    pub bounds: Bounds,
    /// The newest events as stored: consecutive, the last at `bounds.last_seq`.
    events: VecDeque<Arc<str>>,
}

impl Head {
    /// The head of a session whose `events` (consecutive, as stored) end its log.
    pub fn new(record: SessionRecord, bounds: Bounds, events: Vec<String>) -> Self {
        let events = events.into_iter().map(Arc::from).collect();
        Self {
            record,
            bounds,
            events,
        }
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
        // Drop what left the retained log, then what exceeds the head.
        let retained = bounds.last_seq - bounds.pruned_through;
        let kept = usize::try_from(retained).unwrap_or(0).min(HEAD_EVENTS);
        while self.events.len() > kept {
            self.events.pop_front();
        }
        true
    }

    /// Up to `limit` events after `after`, as [`crate::store::AgentStore::read_log`] reads
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
            events: self
                .events
                .iter()
                .skip(skip)
                .take(take)
                .map(|body| body.to_string())
                .collect(),
            last_seq: self.bounds.last_seq,
            pruned_through: self.bounds.pruned_through,
        })
    }
}

/// The heads of active sessions, and their write locks.
pub struct Heads {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    kept: bool,
}

#[derive(Default)]
struct Slot {
    write: Arc<tokio::sync::Mutex<()>>,
    head: RwLock<Option<Head>>,
}

/// A session's write lock, held while its store is written and its head updated.
pub struct Writing {
    slot: Arc<Slot>,
    _guard: OwnedMutexGuard<()>,
}

impl Writing {
    /// The head, if it is kept.
    pub fn head(&self) -> Option<Head> {
        self.slot.head.read().expect("a head lock").clone()
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
    /// Write locks, with heads when `kept`; without, [`Heads::read`] finds none.
    pub fn new(kept: bool) -> Self {
        Self {
            slots: Mutex::default(),
            kept,
        }
    }

    /// Whether heads are kept.
    pub fn kept(&self) -> bool {
        self.kept
    }

    /// Reads the head of `session` with `read`, if it is kept.
    pub fn read<T>(&self, session: &str, read: impl FnOnce(&Head) -> T) -> Option<T> {
        let slot = self.lock().get(session).cloned()?;
        let head = slot.head.read().expect("a head lock");
        head.as_ref().map(read)
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.slots.lock().expect("the heads lock is not poisoned")
    }
}
