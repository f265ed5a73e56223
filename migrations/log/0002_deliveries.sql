-- What the consumer has observed, one row per event: the dedup record of
-- at-least-once delivery (a redelivered event conflicts on the primary key
-- and is counted as a duplicate instead of being applied twice), and the
-- source of GET /events/{id}'s delivered_at.
--
-- No foreign key to messages: the consumer inserts these in batches on its
-- hot path and an FK check per row would cost an index probe each; every
-- row's id comes from a messages row anyway.
--
-- WAL feedback: on no-kafka the consumer writes this table while it reads
-- the WAL through a slot. Its own writes must not come back as events, so
-- the slot's wal2json stream is filtered to the messages table
-- (add-tables) and these rows are never decoded into the stream.

-- +goose Up
CREATE TABLE IF NOT EXISTS deliveries (
    id           uuid        PRIMARY KEY,
    -- The order in which the consumer observed events: the per-key
    -- ordering check reads it. Identity values are assigned in the order
    -- the consumer's INSERT produces rows (it orders them by arrival).
    seq          bigint      GENERATED ALWAYS AS IDENTITY,
    delivered_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS deliveries;
