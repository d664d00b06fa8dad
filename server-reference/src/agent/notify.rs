//! Wake-ups for readers of a session's log: a watch of the last sequence number (durable
//! appends) and a broadcast of transient message snapshots. A reader subscribes before it reads
//! the log, so that no append between its read and its wait goes unnoticed. [`Notifier`] is the
//! seam; [`Hub`] serves one process, and on PostgreSQL the store's notifications from every
//! process feed it too (`store::Shared::listen`), while [`Relay`] hands this
//! process's snapshots to the others. A lost wake-up only delays a reader, which re-reads from
//! its position.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use intent_models::MessageSnapshot;
use tokio::sync::{broadcast, mpsc, watch};

/// Snapshots a slow SSE reader may fall behind by before it skips some (they are transient).
const SNAPSHOT_BUFFER: usize = 64;

/// Wakes the readers of sessions' logs: the session cache tells it each write, the event log
/// subscribes its readers.
pub trait Notifier: Send + Sync + 'static {
    /// Subscribes to `session`'s appends and snapshots from now on.
    fn subscribe(&self, session: &str) -> Subscription;
    /// Wakes the readers of `session`: its log now ends at `last_seq`.
    fn appended(&self, session: &str, last_seq: i64);
    /// Hands a transient snapshot to the streams of `session`.
    fn snapshot(&self, session: &str, snapshot: MessageSnapshot);
    /// Ends every subscription to `session` (it was deleted).
    fn close(&self, session: &str);
    /// Forgets the channels of sessions nobody listens to.
    fn forget_idle(&self);
}

/// The in-process notifier: channels per session, kept while someone listens.
#[derive(Default)]
pub struct Hub {
    sessions: Mutex<HashMap<String, Channels>>,
}

struct Channels {
    appended: watch::Sender<i64>,
    snapshots: broadcast::Sender<MessageSnapshot>,
}

impl Channels {
    fn unused(&self) -> bool {
        self.appended.receiver_count() == 0 && self.snapshots.receiver_count() == 0
    }
}

/// One reader's subscription to a session.
pub struct Subscription {
    /// Changes when events are appended.
    pub appended: watch::Receiver<i64>,
    /// Transient snapshots of messages being written.
    pub snapshots: broadcast::Receiver<MessageSnapshot>,
}

impl Notifier for Hub {
    fn subscribe(&self, session: &str) -> Subscription {
        let mut sessions = self.sessions.lock().expect("the hub lock is not poisoned");
        let channels = sessions
            .entry(session.to_owned())
            .or_insert_with(|| Channels {
                appended: watch::Sender::new(0),
                snapshots: broadcast::Sender::new(SNAPSHOT_BUFFER),
            });
        Subscription {
            appended: channels.appended.subscribe(),
            snapshots: channels.snapshots.subscribe(),
        }
    }

    fn appended(&self, session: &str, last_seq: i64) {
        self.with(session, |channels| {
            // Wake-ups from another process may arrive after this process's own, later ones.
            channels.appended.send_if_modified(|seen| {
                let later = last_seq > *seen;
                *seen = (*seen).max(last_seq);
                later
            });
        });
    }

    fn snapshot(&self, session: &str, snapshot: MessageSnapshot) {
        self.with(session, |channels| {
            // No receiver is not an error: snapshots are transient.
            let _ = channels.snapshots.send(snapshot);
        });
    }

    fn close(&self, session: &str) {
        self.sessions
            .lock()
            .expect("the hub lock is not poisoned")
            .remove(session);
    }

    fn forget_idle(&self) {
        self.sessions
            .lock()
            .expect("the hub lock is not poisoned")
            .retain(|_, channels| !channels.unused());
    }
}

/// The notifier of one process among several: a [`Hub`] that also puts every snapshot in an
/// outbox, from which it reaches the other processes' hubs. Appends need no relay: the store
/// announces them itself when they commit.
pub struct Relay {
    hub: Arc<Hub>,
    outbox: mpsc::Sender<(String, MessageSnapshot)>,
}

impl Relay {
    /// `hub`, relaying its snapshots to `outbox`; a full outbox drops them (they are transient).
    pub fn new(hub: Arc<Hub>, outbox: mpsc::Sender<(String, MessageSnapshot)>) -> Self {
        Self { hub, outbox }
    }
}

impl Notifier for Relay {
    fn subscribe(&self, session: &str) -> Subscription {
        self.hub.subscribe(session)
    }

    fn appended(&self, session: &str, last_seq: i64) {
        self.hub.appended(session, last_seq);
    }

    fn snapshot(&self, session: &str, snapshot: MessageSnapshot) {
        let _ = self.outbox.try_send((session.to_owned(), snapshot.clone()));
        self.hub.snapshot(session, snapshot);
    }

    fn close(&self, session: &str) {
        self.hub.close(session);
    }

    fn forget_idle(&self) {
        self.hub.forget_idle();
    }
}

impl Hub {
    /// Wakes every reader, to re-read from its position: wake-ups may have been lost.
    pub fn wake_all(&self) {
        let sessions = self.sessions.lock().expect("the hub lock is not poisoned");
        for channels in sessions.values() {
            channels.appended.send_modify(|_| {});
        }
    }

    fn with(&self, session: &str, f: impl FnOnce(&Channels)) {
        let mut sessions = self.sessions.lock().expect("the hub lock is not poisoned");
        if let Some(channels) = sessions.get(session) {
            if channels.unused() {
                sessions.remove(session);
            } else {
                f(channels);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_sessions_are_forgotten_and_listened_ones_kept() {
        let hub = Hub::default();
        let kept = hub.subscribe("listened");
        drop(hub.subscribe("abandoned"));
        hub.forget_idle();
        let sessions = hub.sessions.lock().unwrap();
        assert!(sessions.contains_key("listened"));
        assert!(!sessions.contains_key("abandoned"));
        drop(kept);
    }
}
