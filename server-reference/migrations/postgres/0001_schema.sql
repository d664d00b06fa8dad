-- The reference server's state on PostgreSQL, shared by every instance of a deployment. The same
-- tables as the SQLite migrations, in their final form. Times are Unix seconds unless a column
-- says milliseconds.

-- Account: installed applications, sealed credentials and metered usage.
CREATE TABLE installations (
    account        TEXT   NOT NULL,
    application_id BIGINT NOT NULL,
    installed_at   BIGINT NOT NULL,
    PRIMARY KEY (account, application_id)
);

CREATE TABLE credentials (
    account        TEXT   NOT NULL,
    application_id BIGINT NOT NULL,
    name           TEXT   NOT NULL,
    sealed         BYTEA  NOT NULL, -- nonce || AES-256-GCM ciphertext; never the clear value
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (account, application_id, name)
);

CREATE TABLE usage (
    id      BIGSERIAL PRIMARY KEY,
    account TEXT   NOT NULL,
    meter   TEXT   NOT NULL CHECK (meter IN ('turn', 'build', 'simulation', 'commit')),
    at      BIGINT NOT NULL
);

CREATE INDEX usage_by_account_time ON usage (account, at);

-- OAuth 2.1: codes, device grants and refresh tokens, each secret as its SHA-256 hex digest.
CREATE TABLE authorization_codes (
    code_hash      TEXT    PRIMARY KEY,
    client_id      TEXT    NOT NULL,
    redirect_uri   TEXT    NOT NULL,
    account        TEXT    NOT NULL,
    scopes         TEXT    NOT NULL,
    resource       TEXT    NOT NULL,
    code_challenge TEXT    NOT NULL,
    expires_at     BIGINT  NOT NULL,
    used           BOOLEAN NOT NULL DEFAULT FALSE
);

CREATE TABLE device_grants (
    device_code_hash TEXT   PRIMARY KEY,
    user_code        TEXT   NOT NULL UNIQUE,
    client_id        TEXT   NOT NULL,
    scopes           TEXT   NOT NULL,
    resource         TEXT   NOT NULL,
    account          TEXT,
    status           TEXT   NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'used')),
    interval_secs    BIGINT NOT NULL,
    last_poll_ms     BIGINT,
    expires_at       BIGINT NOT NULL
);

CREATE TABLE refresh_tokens (
    token_hash TEXT   PRIMARY KEY,
    family     TEXT   NOT NULL,
    client_id  TEXT   NOT NULL,
    account    TEXT   NOT NULL,
    scopes     TEXT   NOT NULL,
    resource   TEXT   NOT NULL,
    expires_at BIGINT NOT NULL,
    status     TEXT   NOT NULL CHECK (status IN ('active', 'used', 'revoked'))
);

CREATE INDEX refresh_tokens_by_family ON refresh_tokens (family);

-- Agent: sessions, turns, each session's ordered event log, actions and idempotency keys. Every
-- write to a session locks its row first, which orders appends from every instance.
CREATE TABLE sessions (
    id             TEXT    PRIMARY KEY,
    account        TEXT    NOT NULL,
    title          TEXT    NOT NULL,
    archived       BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at     BIGINT  NOT NULL,
    last_seq       BIGINT  NOT NULL DEFAULT 0,
    pruned_through BIGINT  NOT NULL DEFAULT 0
);

CREATE INDEX sessions_by_account ON sessions (account);

CREATE TABLE turns (
    id          TEXT   PRIMARY KEY,
    session_id  TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    state       TEXT   NOT NULL
        CHECK (state IN ('processing', 'complete', 'failed', 'interrupted', 'awaiting_action')),
    created_at  BIGINT NOT NULL,
    -- The instance running the turn while it is processing, until `lease_until` (Unix ms).
    runner      TEXT,
    lease_until BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX turns_by_session ON turns (session_id, state);
-- At most one active turn per session, whichever instance starts it.
CREATE UNIQUE INDEX one_active_turn ON turns (session_id)
    WHERE state IN ('processing', 'awaiting_action');

CREATE TABLE events (
    session_id TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    body       TEXT   NOT NULL, -- the AgentEvent as JSON, seq included
    created_at BIGINT NOT NULL, -- Unix milliseconds
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE actions (
    id         TEXT    PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id    TEXT    NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    revision   BIGINT  NOT NULL,
    pending    BOOLEAN NOT NULL,
    digest     TEXT    NOT NULL,
    request    TEXT    NOT NULL,
    result     TEXT
);

CREATE TABLE idempotency_keys (
    account      TEXT   NOT NULL,
    key          TEXT   NOT NULL,
    request_hash TEXT   NOT NULL,
    response     TEXT, -- NULL while the first request is in flight
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (account, key)
);

-- Pipeline custody: every committed Build in commit order; each instance's devnet replays them.
CREATE TABLE commits (
    seq          BIGSERIAL PRIMARY KEY,
    chain        TEXT   NOT NULL CHECK (chain IN ('evm', 'svm')),
    digest       TEXT   NOT NULL UNIQUE,
    account      TEXT   NOT NULL,
    actions      TEXT   NOT NULL,
    committed_at BIGINT NOT NULL
);

CREATE INDEX commits_by_chain ON commits (chain, seq);
