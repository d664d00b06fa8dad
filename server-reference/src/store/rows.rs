//! Rows as both backends read them, and the records they make.

use intent_models::TurnState;

use super::agent::{Bounds, Resolution, Resolved, SessionRecord};
use super::{Authorization, AuthorizationCode, DeviceGrant, DeviceStatus, Error, Result};

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

impl From<SessionRow> for SessionRecord {
    fn from(row: SessionRow) -> Self {
        Self {
            id: row.id,
            account: row.account,
            title: row.title,
            archived: row.archived,
            updated_at: row.updated_at,
        }
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
pub fn turn_state(name: &str) -> Result<TurnState> {
    name.parse().map_err(|_| {
        Error::Database(sqlx::Error::Decode(
            format!("unknown turn state {name:?}").into(),
        ))
    })
}

/// The columns of an authorization code: client, redirect URI, account, scopes, resource,
/// PKCE challenge and expiry.
pub type CodeRow = (String, String, String, String, String, String, i64);

/// The code of a row.
pub fn authorization_code(row: CodeRow) -> AuthorizationCode {
    let (client_id, redirect_uri, account, scopes, resource, code_challenge, expires_at) = row;
    AuthorizationCode {
        grant: Authorization {
            client_id,
            account,
            scopes,
            resource,
        },
        redirect_uri,
        code_challenge,
        expires_at,
    }
}

/// A static `SELECT` of the columns of [`DeviceRow`] with a `WHERE` condition.
macro_rules! select_device_grant {
    ($condition:literal) => {
        concat!(
            "SELECT user_code, client_id, scopes, resource, account, status, interval_secs, last_poll_ms, expires_at \
             FROM device_grants WHERE ",
            $condition
        )
    };
}
pub(crate) use select_device_grant;

/// The columns of a device grant, as [`select_device_grant!`] reads them.
pub type DeviceRow = (
    String,
    String,
    String,
    String,
    Option<String>,
    String,
    i64,
    Option<i64>,
    i64,
);

/// The grant of a row; `None` for a status the CHECK constraint keeps out.
pub fn device_grant(row: DeviceRow) -> Option<DeviceGrant> {
    let (
        user_code,
        client_id,
        scopes,
        resource,
        account,
        status,
        interval_secs,
        last_poll_ms,
        expires_at,
    ) = row;
    let status = match status.as_str() {
        "pending" => DeviceStatus::Pending,
        "approved" => DeviceStatus::Approved,
        "denied" => DeviceStatus::Denied,
        "used" => DeviceStatus::Used,
        // The CHECK constraint admits no other value.
        _ => return None,
    };
    Some(DeviceGrant {
        user_code,
        client_id,
        scopes,
        resource,
        account,
        status,
        interval_secs,
        last_poll_ms,
        expires_at,
    })
}
