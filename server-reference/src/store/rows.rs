//! Rows as both engines read them, by column name, and the records they make.

use intent_models::TurnState;

use super::agent::{Bounds, Resolution, Resolved, SessionRecord};
use super::{Authorization, AuthorizationCode, DeviceGrant, DeviceStatus, Error, Result};
use crate::ids::{AccountId, SessionId};

/// A row struct, declared once, that reads itself from the columns of its fields' names on either
/// engine: what `#[derive(sqlx::FromRow)]` writes, without compiling sqlx's macros and both
/// drivers for the host.
macro_rules! row {
    (
        $(#[$meta:meta])*
        pub struct $row:ident {
            $($(#[$field_meta:meta])* $vis:vis $field:ident: $ty:ty),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $row {
            $($(#[$field_meta])* $vis $field: $ty,)+
        }

        impl<'r, R> sqlx::FromRow<'r, R> for $row
        where
            R: sqlx::Row,
            &'static str: sqlx::ColumnIndex<R>,
            $($ty: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,)+
        {
            fn from_row(row: &'r R) -> sqlx::Result<Self> {
                Ok(Self {
                    $($field: row.try_get(stringify!($field))?,)+
                })
            }
        }
    };
}

pub(super) use row;

row! {
    /// The columns of a session.
    pub struct SessionRow {
        id: String,
        account: String,
        title: String,
        archived: bool,
        updated_at: i64,
    }
}

impl TryFrom<SessionRow> for SessionRecord {
    type Error = Error;

    fn try_from(row: SessionRow) -> Result<Self> {
        Ok(Self {
            id: session_id(row.id)?,
            account: AccountId::stored(row.account),
            title: row.title,
            archived: row.archived,
            updated_at: row.updated_at,
        })
    }
}

row! {
    /// The columns of the action a resolution names.
    pub struct ActionRow {
        /// The action's turn.
        pub turn_id: String,
        revision: i64,
        pending: bool,
        digest: String,
        request: String,
    }
}

impl ActionRow {
    /// The revision `resolution` makes of this action, or why it is refused.
    pub fn resolve(&self, resolution: &Resolution) -> std::result::Result<i64, Resolved> {
        if self.revision != resolution.revision {
            return Err(Resolved::Stale {
                current: self.revision,
            });
        }
        if !self.pending {
            return Err(Resolved::NotPending);
        }
        if self.digest != resolution.digest {
            return Err(Resolved::DigestMismatch {
                expected: self.digest.clone(),
            });
        }
        Ok(self.revision + 1)
    }

    /// The resolution recorded at `revision`, the log then ending at `bounds`.
    pub fn resolved(self, revision: i64, bounds: Bounds) -> Result<Resolved> {
        let request = serde_json::from_str(&self.request)
            .map_err(|e| Error::Database(sqlx::Error::Decode(Box::new(e))))?;
        Ok(Resolved::Done {
            turn_id: self.turn_id,
            revision,
            request,
            bounds,
        })
    }
}

/// The state stored as `name`.
/// A stored session id, which was a [`SessionId`] when it was written.
pub fn session_id(id: String) -> Result<SessionId> {
    SessionId::try_from(id).map_err(|error| Error::Database(sqlx::Error::Decode(error.into())))
}

pub fn turn_state(name: &str) -> Result<TurnState> {
    name.parse().map_err(|_| {
        Error::Database(sqlx::Error::Decode(
            format!("unknown turn state {name:?}").into(),
        ))
    })
}

row! {
    /// An installed application.
    pub struct Installation {
        pub application_id: i64,
        pub installed_at: i64,
    }
}

row! {
    /// A count of rows per name.
    pub struct Count {
        pub name: String,
        pub count: i64,
    }
}

row! {
    /// A committed Build's actions.
    pub struct CommitRow {
        pub seq: i64,
        pub actions: String,
    }
}

row! {
    /// A turn and its state.
    pub struct TurnRow {
        pub id: String,
        pub state: String,
    }
}

impl TurnRow {
    /// The turn id with its state.
    pub fn turn(self) -> Result<(String, TurnState)> {
        Ok((self.id, turn_state(&self.state)?))
    }
}

row! {
    /// A turn of a session.
    pub struct SessionTurn {
        pub session_id: String,
        pub id: String,
    }
}

row! {
    /// A session's log bounds, with one event after the reader's position when there is one.
    pub struct LogRow {
        pub last_seq: i64,
        pub pruned_through: i64,
        pub seq: Option<i64>,
        pub body: Option<String>,
    }
}

row! {
    /// An idempotency key's record.
    pub struct IdempotencyRow {
        pub request_hash: String,
        pub response: Option<String>,
    }
}

row! {
    /// The columns of an authorization code.
    pub struct CodeRow {
        client_id: String,
        redirect_uri: String,
        account: String,
        scopes: String,
        resource: String,
        code_challenge: String,
        expires_at: i64,
    }
}

impl From<CodeRow> for AuthorizationCode {
    fn from(row: CodeRow) -> Self {
        Self {
            grant: Authorization {
                client_id: row.client_id,
                account: row.account,
                scopes: row.scopes,
                resource: row.resource,
            },
            redirect_uri: row.redirect_uri,
            code_challenge: row.code_challenge,
            expires_at: row.expires_at,
        }
    }
}

/// A `SELECT` of the columns of [`DeviceRow`] with a `WHERE` condition.
macro_rules! select_device_grant {
    ($condition:literal) => {
        concat!(
            "SELECT user_code, client_id, scopes, resource, account, status, interval_secs, \
             last_poll_ms, expires_at FROM device_grants WHERE ",
            $condition
        )
    };
}
pub(crate) use select_device_grant;

row! {
    /// The columns of a device grant, as [`select_device_grant!`] reads them.
    pub struct DeviceRow {
        user_code: String,
        client_id: String,
        scopes: String,
        resource: String,
        account: Option<String>,
        status: String,
        interval_secs: i64,
        last_poll_ms: Option<i64>,
        expires_at: i64,
    }
}

impl DeviceRow {
    /// The grant of the row; `None` for a status the CHECK constraint keeps out.
    pub fn grant(self) -> Option<DeviceGrant> {
        let status = match self.status.as_str() {
            "pending" => DeviceStatus::Pending,
            "approved" => DeviceStatus::Approved,
            "denied" => DeviceStatus::Denied,
            "used" => DeviceStatus::Used,
            // The CHECK constraint admits no other value.
            _ => return None,
        };
        Some(DeviceGrant {
            user_code: self.user_code,
            client_id: self.client_id,
            scopes: self.scopes,
            resource: self.resource,
            account: self.account,
            status,
            interval_secs: self.interval_secs,
            last_poll_ms: self.last_poll_ms,
            expires_at: self.expires_at,
        })
    }
}

row! {
    /// The columns of a refresh token.
    pub struct RefreshRow {
        pub family: String,
        client_id: String,
        account: String,
        scopes: String,
        resource: String,
        pub expires_at: i64,
        pub status: String,
    }
}

impl RefreshRow {
    /// What the token grants.
    pub fn grant(&self) -> Authorization {
        Authorization {
            client_id: self.client_id.clone(),
            account: self.account.clone(),
            scopes: self.scopes.clone(),
            resource: self.resource.clone(),
        }
    }
}
