-- OAuth 2.1 authorization server: codes, device grants and refresh tokens. Every secret is
-- stored as its SHA-256 hex digest, never in clear.

CREATE TABLE authorization_codes (
    code_hash      TEXT    PRIMARY KEY,
    client_id      TEXT    NOT NULL,
    redirect_uri   TEXT    NOT NULL,
    account        TEXT    NOT NULL,
    scopes         TEXT    NOT NULL,
    resource       TEXT    NOT NULL,
    code_challenge TEXT    NOT NULL,
    expires_at     INTEGER NOT NULL,
    used           INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE device_grants (
    device_code_hash TEXT    PRIMARY KEY,
    user_code        TEXT    NOT NULL UNIQUE,
    client_id        TEXT    NOT NULL,
    scopes           TEXT    NOT NULL,
    resource         TEXT    NOT NULL,
    account          TEXT,
    status           TEXT    NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'used')),
    interval_secs    INTEGER NOT NULL,
    last_poll_ms     INTEGER,
    expires_at       INTEGER NOT NULL
) STRICT;

CREATE TABLE refresh_tokens (
    token_hash TEXT    PRIMARY KEY,
    family     TEXT    NOT NULL,
    client_id  TEXT    NOT NULL,
    account    TEXT    NOT NULL,
    scopes     TEXT    NOT NULL,
    resource   TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    status     TEXT    NOT NULL CHECK (status IN ('active', 'used', 'revoked'))
) STRICT;

CREATE INDEX refresh_tokens_by_family ON refresh_tokens (family);
