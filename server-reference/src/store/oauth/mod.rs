//! OAuth: authorization codes, device grants and refresh-token families, each stored under the
//! hash of its secret, and the clients that registered themselves.

mod rows;

use rows::{ClientRow, CodeRow, DeviceRow, RefreshRow, select_device_grant};

use super::engine::{Sql, sql};
use super::{Result, Store};

/// What a grant authorizes: who, for which client, which scopes on which one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The OAuth client.
    pub client_id: String,
    /// The account.
    pub account: String,
    /// Granted scopes, space-separated.
    pub scopes: String,
    /// The one resource identifier.
    pub resource: String,
}

/// A stored authorization code.
#[derive(Debug, Clone)]
pub struct AuthorizationCode {
    /// What the code grants.
    pub grant: Authorization,
    /// The redirect URI the code was issued to.
    pub redirect_uri: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    /// Unix seconds after which the code is void.
    pub expires_at: i64,
}

/// The state of a device authorization (RFC 8628).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceStatus {
    /// Waiting for the user.
    Pending,
    /// The user approved; a token may be issued once.
    Approved,
    /// The user denied.
    Denied,
    /// A token was issued.
    Used,
}

/// A stored device authorization.
#[derive(Debug, Clone)]
pub struct DeviceGrant {
    /// The code the user types.
    pub user_code: String,
    /// The client, scopes and resource asked for; the account once approved.
    pub client_id: String,
    /// Requested scopes, space-separated.
    pub scopes: String,
    /// The resource identifier.
    pub resource: String,
    /// The approving account.
    pub account: Option<String>,
    /// Where the grant stands.
    pub status: DeviceStatus,
    /// Seconds the client must wait between polls.
    pub interval_secs: i64,
    /// Unix milliseconds of the previous poll.
    pub last_poll_ms: Option<i64>,
    /// Unix seconds after which the grant is void.
    pub expires_at: i64,
}

/// What presenting a refresh token found.
#[derive(Debug, Clone)]
pub enum RefreshUse {
    /// The token was active and is now used; rotate to a new one in `family`.
    Rotated {
        /// What the token granted.
        grant: Authorization,
        /// The rotation family.
        family: String,
        /// Unix seconds after which the token was void.
        expires_at: i64,
    },
    /// The token was already used or revoked; its whole family is now revoked.
    Replayed,
    /// The token is active but the caller's check refused it; it was left unused.
    Refused {
        /// What the token grants.
        grant: Authorization,
        /// Unix seconds after which the token is void.
        expires_at: i64,
    },
    /// No such token.
    Unknown,
}

/// A public client that registered itself (RFC 7591).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredClient {
    /// The id it was given.
    pub client_id: String,
    /// The name it gave, shown on the consent page as its own claim.
    pub client_name: Option<String>,
    /// Its redirect URIs, matched like a configured client's.
    pub redirect_uris: Vec<String>,
    /// Unix seconds of the registration.
    pub registered_at: i64,
}

impl Store {
    /// Stores a client that registered itself; its id is new.
    pub async fn register_client(&self, client: &RegisteredClient) -> Result<()> {
        self.db
            .execute(
                sql(
                    "INSERT INTO registered_clients (client_id, client_name, redirect_uris,
                         registered_at)
                     VALUES ($1, $2, $3, $4)",
                )
                .bind(&client.client_id)
                .bind(client.client_name.as_deref())
                .bind(client.redirect_uris.join("\n"))
                .bind(client.registered_at),
            )
            .await?;
        Ok(())
    }

    /// The client that registered itself as `client_id`, if any.
    pub async fn registered_client(&self, client_id: &str) -> Result<Option<RegisteredClient>> {
        let row: Option<ClientRow> = self
            .db
            .fetch_optional(
                sql("SELECT client_id, client_name, redirect_uris, registered_at
                     FROM registered_clients WHERE client_id = $1")
                .bind(client_id),
            )
            .await?;
        Ok(row.map(RegisteredClient::from))
    }

    /// Stores an authorization code under the hash of its value.
    pub async fn save_code(&self, code_hash: &str, code: &AuthorizationCode) -> Result<()> {
        self.db
            .execute(
                sql(
                    "INSERT INTO authorization_codes (code_hash, client_id, redirect_uri, account,
                         scopes, resource, code_challenge, expires_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(code_hash)
                .bind(&code.grant.client_id)
                .bind(&code.redirect_uri)
                .bind(&code.grant.account)
                .bind(&code.grant.scopes)
                .bind(&code.grant.resource)
                .bind(&code.code_challenge)
                .bind(code.expires_at),
            )
            .await?;
        Ok(())
    }

    /// Marks the code used and returns it; `None` when unknown or already used.
    pub async fn take_code(&self, code_hash: &str) -> Result<Option<AuthorizationCode>> {
        let row: Option<CodeRow> = self
            .db
            .fetch_optional(
                sql(
                    "UPDATE authorization_codes SET used = TRUE WHERE code_hash = $1 AND NOT used
                     RETURNING client_id, redirect_uri, account, scopes, resource, code_challenge,
                         expires_at",
                )
                .bind(code_hash),
            )
            .await?;
        Ok(row.map(AuthorizationCode::from))
    }

    /// Stores a new pending device grant under the hash of its device code.
    pub async fn save_device_grant(
        &self,
        device_code_hash: &str,
        grant: &DeviceGrant,
    ) -> Result<()> {
        self.db
            .execute(
                sql(
                    "INSERT INTO device_grants (device_code_hash, user_code, client_id, scopes,
                         resource, status, interval_secs, expires_at)
                     VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7)",
                )
                .bind(device_code_hash)
                .bind(&grant.user_code)
                .bind(&grant.client_id)
                .bind(&grant.scopes)
                .bind(&grant.resource)
                .bind(grant.interval_secs)
                .bind(grant.expires_at),
            )
            .await?;
        Ok(())
    }

    /// The grant whose user code is `user_code`.
    pub async fn device_grant_by_user_code(&self, user_code: &str) -> Result<Option<DeviceGrant>> {
        let row: Option<DeviceRow> = self
            .db
            .fetch_optional(sql(select_device_grant!("user_code = $1")).bind(user_code))
            .await?;
        Ok(row.and_then(DeviceRow::grant))
    }

    /// Approves (with the account) or denies (with `None`) a pending grant that has not expired at
    /// `now`; whether it was pending.
    pub async fn decide_device_grant(
        &self,
        user_code: &str,
        account: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        let status = if account.is_some() {
            "approved"
        } else {
            "denied"
        };
        let decided = self
            .db
            .execute(
                sql("UPDATE device_grants SET status = $1, account = $2
                     WHERE user_code = $3 AND status = 'pending' AND expires_at > $4")
                .bind(status)
                .bind(account)
                .bind(user_code)
                .bind(now),
            )
            .await?;
        Ok(decided == 1)
    }

    /// Records a poll at `now_ms` and returns the grant as it was before the poll.
    pub async fn poll_device_grant(
        &self,
        device_code_hash: &str,
        now_ms: i64,
    ) -> Result<Option<DeviceGrant>> {
        let mut tx = self.db.begin().await?;
        let row: Option<DeviceRow> = tx
            .fetch_optional(
                sql(select_device_grant!("device_code_hash = $1"))
                    .bind(device_code_hash)
                    .for_update(),
            )
            .await?;
        tx.execute(
            sql("UPDATE device_grants SET last_poll_ms = $1 WHERE device_code_hash = $2")
                .bind(now_ms)
                .bind(device_code_hash),
        )
        .await?;
        tx.commit().await?;
        Ok(row.and_then(DeviceRow::grant))
    }

    /// Adds `by` seconds to the grant's poll interval (`slow_down`).
    pub async fn slow_device_grant(&self, device_code_hash: &str, by: i64) -> Result<()> {
        self.db
            .execute(
                sql("UPDATE device_grants SET interval_secs = interval_secs + $1
                     WHERE device_code_hash = $2")
                .bind(by)
                .bind(device_code_hash),
            )
            .await?;
        Ok(())
    }

    /// Moves an approved grant to used; whether it was approved.
    pub async fn consume_device_grant(&self, device_code_hash: &str) -> Result<bool> {
        let consumed = self
            .db
            .execute(
                sql("UPDATE device_grants SET status = 'used'
                     WHERE device_code_hash = $1 AND status = 'approved'")
                .bind(device_code_hash),
            )
            .await?;
        Ok(consumed == 1)
    }

    /// Stores an active refresh token in `family`, unless the family is revoked; whether it was
    /// stored.
    pub async fn save_refresh_token(
        &self,
        token_hash: &str,
        family: &str,
        grant: &Authorization,
        expires_at: i64,
    ) -> Result<bool> {
        // Under the family's lock, so that a replay revoking it cannot slip between the check
        // and the insert: a revoked family never gains an active token.
        let mut tx = self.db.begin().await?;
        tx.lock(&format!("intent.refresh.{family}")).await?;
        let saved = tx
            .execute(
                sql(
                    "INSERT INTO refresh_tokens (token_hash, family, client_id, account, scopes,
                         resource, expires_at, status)
                     SELECT $1, $2, $3, $4, $5, $6, $7, 'active'
                     WHERE NOT EXISTS
                         (SELECT 1 FROM refresh_tokens WHERE family = $2 AND status = 'revoked')",
                )
                .bind(token_hash)
                .bind(family)
                .bind(&grant.client_id)
                .bind(&grant.account)
                .bind(&grant.scopes)
                .bind(&grant.resource)
                .bind(expires_at),
            )
            .await?;
        tx.commit().await?;
        Ok(saved == 1)
    }

    /// Revokes every refresh token of `family`.
    pub async fn revoke_refresh_family(&self, family: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        tx.lock(&format!("intent.refresh.{family}")).await?;
        tx.execute(revoke_family(family)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Uses a refresh token: rotates an active one that `accept` (given the grant and its expiry)
    /// agrees to, leaves it unused when `accept` refuses, and revokes the family of a replayed one.
    pub async fn use_refresh_token(
        &self,
        token_hash: &str,
        accept: &(dyn for<'g> Fn(&'g Authorization, i64) -> bool + Send + Sync),
    ) -> Result<RefreshUse> {
        let mut tx = self.db.begin().await?;
        let row: Option<RefreshRow> = tx
            .fetch_optional(
                sql(
                    "SELECT family, client_id, account, scopes, resource, expires_at, status
                     FROM refresh_tokens WHERE token_hash = $1",
                )
                .bind(token_hash)
                .for_update(),
            )
            .await?;
        let Some(row) = row else {
            return Ok(RefreshUse::Unknown);
        };
        let grant = row.grant();
        let outcome = if row.status != "active" {
            // A used or revoked token presented again: revoke everything rotated from it.
            tx.lock(&format!("intent.refresh.{}", row.family)).await?;
            tx.execute(revoke_family(&row.family)).await?;
            RefreshUse::Replayed
        } else if accept(&grant, row.expires_at) {
            tx.execute(
                sql("UPDATE refresh_tokens SET status = 'used' WHERE token_hash = $1")
                    .bind(token_hash),
            )
            .await?;
            RefreshUse::Rotated {
                grant,
                family: row.family,
                expires_at: row.expires_at,
            }
        } else {
            // Refused before use: the token stays active.
            RefreshUse::Refused {
                grant,
                expires_at: row.expires_at,
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }
}

/// Revokes every token of `family`.
fn revoke_family(family: &str) -> Sql {
    sql("UPDATE refresh_tokens SET status = 'revoked' WHERE family = $1").bind(family)
}
