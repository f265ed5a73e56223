-- The queue pair's business records, shared by both services (rabbitmq and
-- no-rabbitmq): every task and payment is recorded in Postgres whatever
-- transports it. The Postgres-side queue itself comes in its own migration.

-- +goose Up
CREATE TABLE IF NOT EXISTS tasks (
    id           uuid        PRIMARY KEY,
    kind         text        NOT NULL,
    payload      jsonb       NOT NULL DEFAULT '{}',
    -- fail_times makes the worker fail that many attempts first, to
    -- exercise retries and the dead state.
    fail_times   integer     NOT NULL DEFAULT 0 CHECK (fail_times >= 0),
    status       text        NOT NULL DEFAULT 'queued'
                             CHECK (status IN ('queued', 'running', 'done', 'dead')),
    attempts     integer     NOT NULL DEFAULT 0,
    enqueued_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    delivered_at timestamptz,
    processed_at timestamptz,
    last_error   text
);

CREATE TABLE IF NOT EXISTS payments (
    id         uuid        PRIMARY KEY,
    -- minor units (cents): integers, never floats, for money.
    amount     bigint      NOT NULL CHECK (amount > 0),
    currency   char(3)     NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    task_id    uuid        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- +goose Down
DROP TABLE IF EXISTS payments;
DROP TABLE IF EXISTS tasks;
