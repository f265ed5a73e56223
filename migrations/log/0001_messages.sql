-- The log pair's events. On no-kafka this table is the whole transport:
-- an INSERT here is what the logical-replication consumer (wal2json) sees.
-- On kafka it is the first half of the dual write.

-- +goose Up
CREATE TABLE IF NOT EXISTS messages (
    id         uuid        PRIMARY KEY,
    type       text        NOT NULL,
    key        text        NOT NULL,
    payload    jsonb       NOT NULL DEFAULT '{}',
    -- clock_timestamp, not now(): in a 1000-event batch each row gets its
    -- own time, so per-event delivery latency stays meaningful.
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- +goose Down
DROP TABLE IF EXISTS messages;
