-- Both services answer GET /queue (depth by status, oldest queued age) from
-- the business records. Completed tasks are the bulk of the table and never
-- matter to that question, so a partial index covers only the open ones
-- (queued, running) and the dead letters: the count stays proportional to
-- the backlog, not to the history.

-- +goose Up
CREATE INDEX IF NOT EXISTS tasks_open ON tasks (status, enqueued_at) WHERE status <> 'done';

-- +goose Down
DROP INDEX IF EXISTS tasks_open;
