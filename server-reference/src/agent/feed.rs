//! What other processes on a shared store tell this one: their writes wake this process's
//! readers and retire the heads they make out of date ([`Feed`]), and this process's message
//! snapshots reach them ([`relay_snapshots`]).

use std::sync::Weak;

use intent_models::MessageSnapshot;
use tokio::sync::mpsc;

use super::{Hub, Notifier, WeakCache};
use crate::store::{Notified, Shared};

/// Snapshots waiting to be relayed to other processes before more are dropped.
const SNAPSHOT_OUTBOX: usize = 256;

/// Feeds a hub and a session cache, while they live, with what every process on a shared store
/// writes and what the others relay. The cache's heads are retired before readers wake, so that
/// a woken reader reads what woke it.
pub(crate) struct Feed {
    hub: Weak<Hub>,
    cache: WeakCache,
}

impl Feed {
    /// Feeds `hub` and `cache`.
    pub(crate) fn new(hub: Weak<Hub>, cache: WeakCache) -> Self {
        Self { hub, cache }
    }
}

impl Notified for Feed {
    fn appended(&self, session: &str, last_seq: i64) {
        if let Some(cache) = self.cache.upgrade() {
            cache.write_heard(session, Some(last_seq));
        }
        if let Some(hub) = self.hub.upgrade() {
            hub.appended(session, last_seq);
        }
    }

    fn updated(&self, session: &str) {
        if let Some(cache) = self.cache.upgrade() {
            cache.write_heard(session, None);
        }
    }

    fn deleted(&self, session: &str) {
        if let Some(cache) = self.cache.upgrade() {
            cache.write_heard(session, None);
        }
        if let Some(hub) = self.hub.upgrade() {
            hub.close(session);
        }
    }

    fn snapshot(&self, session: &str, snapshot: MessageSnapshot) {
        if let Some(hub) = self.hub.upgrade() {
            hub.snapshot(session, snapshot);
        }
    }

    fn listening(&self) {
        if let Some(cache) = self.cache.upgrade() {
            cache.hearing_changes(true);
        }
        if let Some(hub) = self.hub.upgrade() {
            hub.wake_all();
        }
    }

    fn lost(&self) {
        if let Some(cache) = self.cache.upgrade() {
            cache.hearing_changes(false);
        }
    }
}

/// The outbox of this process's snapshots, relayed to the others through `shared` until the
/// notifier that writes it is gone.
pub(crate) fn relay_snapshots(shared: Shared) -> mpsc::Sender<(String, MessageSnapshot)> {
    let (outbox, relayed) = mpsc::channel(SNAPSHOT_OUTBOX);
    tokio::spawn(relay(shared, relayed));
    outbox
}

/// Relays what `relayed` receives. A snapshot holds its message so far, so of the snapshots
/// waiting for one session only the last is sent.
async fn relay(shared: Shared, mut relayed: mpsc::Receiver<(String, MessageSnapshot)>) {
    let mut waiting = Vec::new();
    while relayed.recv_many(&mut waiting, SNAPSHOT_OUTBOX).await > 0 {
        let mut latest: Vec<(String, MessageSnapshot)> = Vec::new();
        for (session, snapshot) in waiting.drain(..) {
            match latest.iter_mut().find(|(held, _)| *held == session) {
                Some(held) => held.1 = snapshot,
                None => latest.push((session, snapshot)),
            }
        }
        for (session, snapshot) in latest {
            if let Err(error) = shared.relay_snapshot(&session, snapshot).await {
                tracing::debug!(%error, "relaying a snapshot");
            }
        }
    }
}
