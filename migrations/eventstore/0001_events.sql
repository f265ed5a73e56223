-- The event store: one table, every stream.

-- +goose Up
CREATE TABLE IF NOT EXISTS events (
    stream_id  text        NOT NULL,
    version    bigint      NOT NULL CHECK (version >= 0),
    event_type text        NOT NULL,
    data       jsonb       NOT NULL,
    metadata   jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- global_pos orders all events, but a bigserial is handed out at INSERT
    -- and becomes visible at COMMIT: a later number can be visible while an
    -- earlier one is still in flight. A reader that moves a "global_pos >
    -- checkpoint" cursor would skip the slower transaction's event forever.
    global_pos bigserial   NOT NULL,
    -- xid is the inserting transaction's 64-bit id (xid8 never wraps).
    -- Subscribers read only rows with xid < pg_snapshot_xmin(
    -- pg_current_snapshot()): every transaction below that watermark has
    -- committed or aborted, so no row can still appear behind the cursor.
    xid        xid8        NOT NULL DEFAULT pg_current_xact_id(),
    -- The primary key is the optimistic lock: two appends with the same
    -- expected version insert the same (stream_id, version) and one fails
    -- with unique_violation (23505), which the service answers with 409.
    PRIMARY KEY (stream_id, version)
);

-- The subscription cursor is (xid, global_pos).
CREATE INDEX IF NOT EXISTS events_xid_global_pos ON events (xid, global_pos);

-- +goose Down
DROP TABLE IF EXISTS events;
