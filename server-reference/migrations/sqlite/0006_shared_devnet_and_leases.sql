-- The chain of each commit, so that a devnet catches up on and serializes commits per chain; and
-- the lease of the instance that runs a processing turn, so that only a turn whose runner is gone
-- is failed as orphaned.
ALTER TABLE commits ADD COLUMN chain TEXT NOT NULL DEFAULT 'evm' CHECK (chain IN ('evm', 'svm'));
UPDATE commits SET chain = json_extract(actions, '$[0].chain') WHERE json_extract(actions, '$[0].chain') = 'svm';
CREATE INDEX commits_by_chain ON commits (chain, seq);

ALTER TABLE turns ADD COLUMN runner TEXT;
-- Unix milliseconds until which `runner` holds the turn; 0 when nobody does.
ALTER TABLE turns ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
