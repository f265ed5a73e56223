-- The rabbitmq service's outbox (PUBLISH_MODE=outbox) and its reconciler
-- (issue 14). One migration set per pair: no-rabbitmq applies this too and
-- never touches the table or the column.
--
-- outbox holds one row per task whose message is still to be published.
-- The enqueue inserts the task's record and its outbox row in one
-- transaction, so a committed task always has either a published message
-- or a row here; the relay publishes rows in batches with publisher
-- confirms and deletes them, in the transaction that claimed them (FOR
-- UPDATE SKIP LOCKED), after the confirms. A relay that dies before its
-- commit leaves the rows for the next pass: the messages may then be
-- published twice, which the record makes harmless. The table stays the
-- size of what is unpublished; it is logged (an unlogged outbox would
-- empty on a crash, with nothing left to say which tasks were never
-- published).
--
-- tasks.republished_at is the reconciler's claim: a task still queued
-- and never delivered RECONCILE_AFTER after it was enqueued (or last
-- republished) has its message published again, and the statement that
-- picks it sets this column, so that two instances do not both
-- republish it in one pass and one instance republishes it at most once
-- per RECONCILE_AFTER.

-- +goose Up
CREATE TABLE IF NOT EXISTS outbox (
    seq         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     uuid        NOT NULL,
    enqueued_at timestamptz NOT NULL
);

-- The reconciler skips a task whose outbox row still waits (the relay
-- will publish it): this index answers "has this task a row".
CREATE INDEX IF NOT EXISTS outbox_task_id ON outbox (task_id);

-- Churn as queue_jobs' (migration 0005): every row is inserted, then
-- deleted; vacuum on an absolute count.
ALTER TABLE outbox SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 1000
);

ALTER TABLE tasks ADD COLUMN IF NOT EXISTS republished_at timestamptz;

-- +goose Down
ALTER TABLE tasks DROP COLUMN IF EXISTS republished_at;
DROP TABLE IF EXISTS outbox;
