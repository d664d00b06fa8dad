-- An idempotency key now records the service's answer (a resolution or a refusal, as JSON in
-- `response`), not an HTTP status and body. Answers recorded in the old form cannot be replayed
-- and are dropped: a retry of one of them finds its action already resolved.
DELETE FROM idempotency_keys WHERE status IS NOT NULL;
ALTER TABLE idempotency_keys DROP COLUMN status;
