-- Consumer groups (issue 23): each group receives every event once, on a
-- position of its own. The default group is the one every service had
-- before groups: its deliveries stay in the deliveries table, so existing
-- clients, the retention cleaner and the crash guard see no change. Every
-- other group records what it received in group_deliveries, keyed by
-- (grp, id): the same at-least-once dedup as deliveries, per group.
--
-- ready is false while a group created from earliest replays the events
-- written before it; an instance that finds a group not ready (its
-- creator died mid-replay) starts the replay again.

-- +goose Up
CREATE TABLE IF NOT EXISTS groups (
    name          text        PRIMARY KEY,
    from_position text        NOT NULL CHECK (from_position IN ('earliest', 'latest')),
    ready         boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO groups (name, from_position, ready) VALUES ('default', 'earliest', true) ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS group_deliveries (
    grp          text        NOT NULL,
    id           uuid        NOT NULL,
    -- Increasing in the order each group's consumer observed events, as
    -- deliveries.seq (one sequence for every group: increasing per group).
    seq          bigint      GENERATED ALWAYS AS IDENTITY,
    delivered_at timestamptz NOT NULL,
    PRIMARY KEY (grp, id)
);
-- The retention cleaner's walk over the dedup rows of removed events.
CREATE INDEX IF NOT EXISTS group_deliveries_delivered_at ON group_deliveries (delivered_at);

-- +goose Down
DROP TABLE IF EXISTS group_deliveries;
DROP TABLE IF EXISTS groups;
