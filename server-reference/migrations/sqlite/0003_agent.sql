-- Agent: sessions, turns, the ordered event log of each session, actions and idempotency keys.

CREATE TABLE sessions (
    id             TEXT    PRIMARY KEY,
    account        TEXT    NOT NULL,
    title          TEXT    NOT NULL,
    archived       INTEGER NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL,
    -- The highest sequence number assigned; the next event gets last_seq + 1.
    last_seq       INTEGER NOT NULL DEFAULT 0,
    -- Events with seq <= pruned_through are gone from the retained log.
    pruned_through INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX sessions_by_account ON sessions (account);

CREATE TABLE turns (
    id         TEXT    PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    state      TEXT    NOT NULL
        CHECK (state IN ('processing', 'complete', 'failed', 'interrupted', 'awaiting_action')),
    created_at INTEGER NOT NULL
) STRICT;

CREATE INDEX turns_by_session ON turns (session_id, state);

CREATE TABLE events (
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    -- The AgentEvent as JSON, seq included.
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE actions (
    id         TEXT    PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id    TEXT    NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    revision   INTEGER NOT NULL,
    pending    INTEGER NOT NULL,
    -- The digest of the Build under review; a result must name it.
    digest     TEXT    NOT NULL,
    -- The ActionRequest as JSON, as shown in the action event.
    request    TEXT    NOT NULL,
    -- The ActionResult as JSON once resolved.
    result     TEXT
) STRICT;

CREATE TABLE idempotency_keys (
    account      TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request_hash TEXT    NOT NULL,
    -- NULL while the first request is in flight.
    status       INTEGER,
    response     TEXT,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (account, key)
) STRICT, WITHOUT ROWID;
