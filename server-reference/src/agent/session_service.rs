//! Sessions (part 4.2): the service that reads, updates and deletes them, over the
//! write-through cache of their heads ([`SessionCache`]) through which every write to a session
//! reaches the store.

use intent_models::{Session, SessionUpdate};

use super::sessions::SessionCache;
use super::turn_service::Turns;
use super::{Error, Result};
use crate::clock::now;
use crate::ids::{AccountId, SessionId};
use crate::json::Encoded;
use crate::store::agent::SessionRecord;

/// Reads and changes sessions as records of an account, through the cache of their heads;
/// deleting one stops its turn and ends its readers.
#[derive(Clone)]
pub struct Sessions {
    cache: SessionCache,
    turns: Turns,
}

impl Sessions {
    /// Sessions written through `cache`, whose turns are `turns`.
    pub fn new(cache: SessionCache, turns: Turns) -> Self {
        Self { cache, turns }
    }

    /// `account`'s session `id`.
    pub async fn get(&self, account: &AccountId, id: &SessionId) -> Result<Encoded<Session>> {
        let make = |record: &SessionRecord| {
            let view = view(id, record.clone())?;
            Encoded::new(&view).map_err(|error| {
                tracing::error!(%error, "a session's view does not serialize");
                Error::Internal
            })
        };
        let view = self.cache.session_view(account, id, make).await?;
        view.ok_or_else(|| Error::NoSession(id.to_string()))
    }

    /// Sets the title and/or the archived flag of `account`'s session `id`.
    pub async fn update(
        &self,
        account: &AccountId,
        id: &SessionId,
        update: &SessionUpdate,
    ) -> Result<Session> {
        if update.title.is_none() && update.archived.is_none() {
            return Err(Error::InvalidRequest(
                "give title, archived or both".to_owned(),
            ));
        }
        let title = update.title.as_deref().map(String::as_str);
        let record = self
            .cache
            .update(account, id, title, update.archived, now())
            .await?;
        view(id, record.ok_or_else(|| Error::NoSession(id.to_string()))?)
    }

    /// Deletes `account`'s session `id` with its log, stopping its active turn.
    pub async fn delete(&self, account: &AccountId, id: &SessionId) -> Result<()> {
        if self.cache.session(account, id).await?.is_none() {
            return Err(Error::NoSession(id.to_string()));
        }
        self.turns.stop(id).await?;
        if !self.cache.delete(account, id).await? {
            return Err(Error::NoSession(id.to_string()));
        }
        Ok(())
    }
}

/// Session `id` as `record` holds it; the id is the one asked for, already checked.
fn view(id: &SessionId, record: SessionRecord) -> Result<Session> {
    Ok(Session::builder()
        .archived(record.archived)
        .id(id.clone())
        .title(record.title)
        .updated_at(record.updated_at)
        .try_into()?)
}
