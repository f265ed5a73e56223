-- The Postgres-side queue (no-rabbitmq). The rabbitmq service applies this
-- migration too (one migration set per pair) and never touches the table.
--
-- queue_jobs holds one row per task that still has work to do (queued,
-- running or waiting to be retried). A task's row is deleted in the same
-- transaction that marks its record done or dead, so the table stays the
-- size of the backlog: claims walk a short index instead of the dead index
-- entries of millions of finished rows (see stack-facts: one-row claims on a
-- bloated head drop to ~850/s). The history lives in tasks.
--
-- The table is created UNLOGGED (QUEUE_TABLE=unlogged, the default): no WAL
-- for the queue's churn (insert, lease, delete), at the price that crash
-- recovery empties it and it is neither replicated nor in base backups. The
-- service runs ALTER TABLE ... SET LOGGED / SET UNLOGGED at start to match
-- QUEUE_TABLE, and after any start (and after every reconnect of its LISTEN
-- connection, which a Postgres restart always breaks) it re-inserts a row for every task whose
-- (logged) record is still queued or running, so an emptied queue is
-- rebuilt from the business records.

-- +goose Up
CREATE UNLOGGED TABLE IF NOT EXISTS queue_jobs (
    task_id      uuid        PRIMARY KEY,
    -- run_at is when the row may next be claimed: the enqueue time, a retry's
    -- backoff deadline, or, while a worker holds it, the end of its lease.
    -- One column for all three lets a single index answer "what is due",
    -- and an expired lease is due like any other row: that is the rescue.
    run_at       timestamptz NOT NULL,
    -- locked_until is set (equal to run_at) while a worker holds the row,
    -- NULL while it waits; it tells running from queued.
    locked_until timestamptz,
    -- attempts counts claims (deliveries), including the current one.
    attempts     integer     NOT NULL DEFAULT 0,
    fail_times   integer     NOT NULL DEFAULT 0,
    enqueued_at  timestamptz NOT NULL
);

-- The claim reads "due rows, oldest first" with FOR UPDATE SKIP LOCKED: each
-- worker skips rows another worker's claim has locked instead of waiting on
-- them, so concurrent claimers never block each other or take the same row.
CREATE INDEX IF NOT EXISTS queue_jobs_run_at ON queue_jobs (run_at);

-- +goose Down
DROP TABLE IF EXISTS queue_jobs;
