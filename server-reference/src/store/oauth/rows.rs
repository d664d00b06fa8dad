//! OAuth's rows as both engines read them, and the records they make.

use super::{Authorization, AuthorizationCode, DeviceGrant, DeviceStatus, RegisteredClient};
use crate::store::rows::row;

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

row! {
    /// The columns of a registered client.
    pub struct ClientRow {
        client_id: String,
        client_name: Option<String>,
        redirect_uris: String,
        registered_at: i64,
    }
}

impl From<ClientRow> for RegisteredClient {
    fn from(row: ClientRow) -> Self {
        Self {
            client_id: row.client_id,
            client_name: row.client_name,
            redirect_uris: row.redirect_uris.lines().map(str::to_owned).collect(),
            registered_at: row.registered_at,
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
