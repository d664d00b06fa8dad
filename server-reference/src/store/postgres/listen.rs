//! The listener of [`EVENTS_CHANNEL`] and [`SNAPSHOTS_CHANNEL`]: turns every process's appends,
//! session changes and deletions into wake-ups and retired heads here, and other processes'
//! snapshots into snapshots here.

use std::time::Duration;

use intent_models::MessageSnapshot;
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgListener, PgPool};

use super::{EVENTS_CHANNEL, SNAPSHOTS_CHANNEL};

/// Pause before connecting again after the listener's connection failed.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// What the notifications of the processes on one database tell this process.
pub trait Notified: Send {
    /// `session`'s log now ends at `last_seq`.
    fn appended(&self, session: &str, last_seq: i64);
    /// `session`'s title or archived flag changed.
    fn updated(&self, session: &str);
    /// `session` was deleted.
    fn deleted(&self, session: &str);
    /// Another process relayed a snapshot of a message of `session`.
    fn snapshot(&self, session: &str, snapshot: MessageSnapshot);
    /// Listening (re)started: notifications since the last were lost, so readers must re-read
    /// from their position.
    fn listening(&self);
    /// Listening stopped (its connection was lost): notifications are lost until
    /// [`Notified::listening`].
    fn lost(&self);
}

/// A message snapshot on [`SNAPSHOTS_CHANNEL`], with the process that relayed it.
#[derive(Serialize, Deserialize)]
pub struct Relayed {
    pub from: String,
    pub session: String,
    pub snapshot: MessageSnapshot,
}

/// Listens on `pool` until it closes, on a new connection whenever one is lost; `own` is this
/// process's runner id, whose relayed snapshots it ignores.
pub async fn listen(pool: PgPool, own: &str, notified: impl Notified) {
    while !pool.is_closed() {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => {
                if let Err(error) = listener
                    .listen_all([EVENTS_CHANNEL, SNAPSHOTS_CHANNEL])
                    .await
                {
                    tracing::warn!(%error, "listening for appends");
                } else {
                    crate::metrics::listener_up(true);
                    notified.listening();
                    // `None`: the connection was lost; listen again on a new one.
                    loop {
                        match listener.try_recv().await {
                            Ok(Some(notification)) => {
                                dispatch(
                                    notification.channel(),
                                    notification.payload(),
                                    own,
                                    &notified,
                                );
                            }
                            Ok(None) => break,
                            Err(error) => {
                                tracing::warn!(%error, "receiving appends");
                                break;
                            }
                        }
                    }
                    crate::metrics::listener_up(false);
                    notified.lost();
                }
            }
            Err(error) => tracing::warn!(%error, "connecting the append listener"),
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// Hands one notification to `notified`.
fn dispatch(channel: &str, payload: &str, own: &str, notified: &impl Notified) {
    if channel == SNAPSHOTS_CHANNEL {
        match serde_json::from_str::<Relayed>(payload) {
            Ok(relayed) if relayed.from != own => {
                notified.snapshot(&relayed.session, relayed.snapshot);
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "an unreadable relayed snapshot"),
        }
        return;
    }
    let Some((session, what)) = payload.rsplit_once(':') else {
        return;
    };
    match what {
        "deleted" => notified.deleted(session),
        "updated" => notified.updated(session),
        seq => {
            if let Ok(seq) = seq.parse() {
                notified.appended(session, seq);
            }
        }
    }
}
