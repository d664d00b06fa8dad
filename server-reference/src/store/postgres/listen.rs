//! The listener of [`EVENTS_CHANNEL`] and [`SNAPSHOTS_CHANNEL`]: turns every process's appends
//! into wake-ups here, and other processes' snapshots into snapshots here.

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};

use super::{EVENTS_CHANNEL, SNAPSHOTS_CHANNEL};

/// Pause before connecting again after the listener's connection failed.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// See [`super::PgStore::follow_notifications`]; `relayed` gets the payloads of
/// [`SNAPSHOTS_CHANNEL`].
pub async fn follow(
    pool: PgPool,
    appended: impl Fn(&str, i64) + Send,
    relayed: impl Fn(&str) + Send,
    listening: impl Fn() + Send,
) {
    while !pool.is_closed() {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => {
                if let Err(error) = listener
                    .listen_all([EVENTS_CHANNEL, SNAPSHOTS_CHANNEL])
                    .await
                {
                    tracing::warn!(%error, "listening for appends");
                } else {
                    listening();
                    // `None`: the connection was lost; listen again on a new one.
                    loop {
                        match listener.try_recv().await {
                            Ok(Some(notification))
                                if notification.channel() == SNAPSHOTS_CHANNEL =>
                            {
                                relayed(notification.payload());
                            }
                            Ok(Some(notification)) => {
                                if let Some((session, seq)) =
                                    notification.payload().rsplit_once(':')
                                    && let Ok(seq) = seq.parse()
                                {
                                    appended(session, seq);
                                }
                            }
                            Ok(None) => break,
                            Err(error) => {
                                tracing::warn!(%error, "receiving appends");
                                break;
                            }
                        }
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "connecting the append listener"),
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}
