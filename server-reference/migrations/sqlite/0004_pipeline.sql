-- Pipeline custody: every committed Build, in commit order. The devnet state is rebuilt on start
-- by replaying the committed actions.

CREATE TABLE commits (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    digest       TEXT    NOT NULL UNIQUE,
    account      TEXT    NOT NULL,
    -- The Build's actions as JSON.
    actions      TEXT    NOT NULL,
    committed_at INTEGER NOT NULL
) STRICT;
