-- Account area: installed applications, sealed credentials and metered usage.

CREATE TABLE installations (
    account        TEXT    NOT NULL,
    application_id INTEGER NOT NULL,
    installed_at   INTEGER NOT NULL,
    PRIMARY KEY (account, application_id)
) STRICT;

CREATE TABLE credentials (
    account        TEXT    NOT NULL,
    application_id INTEGER NOT NULL,
    name           TEXT    NOT NULL,
    sealed         BLOB    NOT NULL, -- nonce || AES-256-GCM ciphertext; never the clear value
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (account, application_id, name)
) STRICT;

CREATE TABLE usage (
    id      INTEGER PRIMARY KEY,
    account TEXT    NOT NULL,
    meter   TEXT    NOT NULL CHECK (meter IN ('turn', 'build', 'simulation', 'commit')),
    at      INTEGER NOT NULL
) STRICT;

CREATE INDEX usage_by_account_time ON usage (account, at);
