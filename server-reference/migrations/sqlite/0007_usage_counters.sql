-- Usage rolled up where it is written: one counter per account, meter and day, so that a
-- statement reads at most a month of counters whatever the account's history. The raw ledger
-- (one row per unit) is folded into them and dropped.
CREATE TABLE usage_counters (
    account TEXT    NOT NULL,
    -- Unix seconds of the day's start (UTC): months start on one.
    day     INTEGER NOT NULL,
    meter   TEXT    NOT NULL CHECK (meter IN ('turn', 'build', 'simulation', 'commit')),
    units   INTEGER NOT NULL CHECK (units > 0),
    PRIMARY KEY (account, day, meter)
) STRICT, WITHOUT ROWID;

INSERT INTO usage_counters (account, day, meter, units)
    SELECT account, at - at % 86400, meter, COUNT(*) FROM usage GROUP BY 1, 2, 3;

DROP TABLE usage;
