-- OAuth clients that registered themselves (RFC 7591): public clients, known by the id they were
-- given, with the redirect URIs (one a line) and the name they gave.
CREATE TABLE registered_clients (
    client_id     TEXT    PRIMARY KEY,
    client_name   TEXT,
    redirect_uris TEXT    NOT NULL,
    registered_at INTEGER NOT NULL
) STRICT;
