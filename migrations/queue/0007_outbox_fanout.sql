-- Fan-out in the rabbitmq service's outbox (FANOUT, issue 23 item 2). A
-- task of a kind with subscribers is recorded as one task per subscriber
-- (kind@subscriber), and RabbitMQ receives it as ONE message, published to
-- the kind's fanout exchange, which copies it into every subscriber's
-- queue. Its outbox row is that one message: task_id is the first copy's
-- id, fanout_of the posted kind (which names the exchange), and copies the
-- subscribers' copies' ids ({"email": "<uuid>", ...}), from which each
-- subscriber's consumer picks its own. Both are NULL for an ordinary task.
-- no-rabbitmq applies this too and never touches the table.

-- +goose Up
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS fanout_of text;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS copies jsonb;

-- +goose Down
ALTER TABLE outbox DROP COLUMN IF EXISTS copies;
ALTER TABLE outbox DROP COLUMN IF EXISTS fanout_of;
