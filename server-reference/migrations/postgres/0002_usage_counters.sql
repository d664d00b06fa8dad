-- Usage rolled up where it is written: one counter per account, meter and day, so that a
-- statement reads at most a month of counters whatever the account's history. The raw ledger
-- (one row per unit) is folded into them and dropped.
--
-- Without CHECK constraints: PostgreSQL evaluates them on every update of a counter, which made
-- recording a unit 1.14x an insert into the raw ledger (pgbench, 10,000 transactions); only the
-- server writes the table, with the meters it knows, and its reads skip any other.
CREATE TABLE usage_counters (
    account TEXT   NOT NULL,
    -- Unix seconds of the day's start (UTC): months start on one.
    day     BIGINT NOT NULL,
    meter   TEXT   NOT NULL,
    units   BIGINT NOT NULL,
    PRIMARY KEY (account, day, meter)
);

INSERT INTO usage_counters (account, day, meter, units)
    SELECT account, at - at % 86400, meter, COUNT(*) FROM usage GROUP BY 1, 2, 3;

DROP TABLE usage;
