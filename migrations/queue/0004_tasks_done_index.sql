-- Retention (issue 16): the cleaner removes done tasks processed longer
-- than TASK_RETENTION ago, in bounded batches, oldest first. This partial
-- index is what it walks: only done rows, by processed_at, so each batch
-- reads its rows from the index's left edge instead of scanning the
-- history. Queued, running and dead tasks are never in it and never
-- removed.
--
-- Cost on the hot path: one more index entry per task marked done. That
-- update already changes status (indexed by tasks_open), so it was never
-- a HOT update; the index adds no lost HOT update.
--
-- Built without CONCURRENTLY (goose runs this in a transaction): on an
-- existing table of millions of rows the build blocks writes to tasks for
-- its duration. An operator with such a table can create the same index
-- first, concurrently (the CONCURRENTLY option); IF NOT EXISTS then skips
-- it here.

-- +goose Up
CREATE INDEX IF NOT EXISTS tasks_done ON tasks (processed_at) WHERE status = 'done';

-- +goose Down
DROP INDEX IF EXISTS tasks_done;
