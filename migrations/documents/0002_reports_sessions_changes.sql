-- The documents pair beyond CRUD: sessions that expire (MongoDB's TTL
-- index), and a change feed of the users (MongoDB's change streams). The
-- aggregation report needs nothing new: it is SQL over the users table.

-- +goose Up

-- Sessions: reads filter on expires_at (an expired session is never
-- read), a batched delete job removes them (services/no-mongodb: the
-- cleaner's "sessions" job, every RETENTION_INTERVAL); the index serves
-- the job's "oldest expired first". Logged, as MongoDB's journaled
-- collection is durable.
CREATE TABLE IF NOT EXISTS sessions (
    id         uuid        PRIMARY KEY,
    user_id    uuid        NOT NULL,
    data       jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_expires_at ON sessions (expires_at);

-- The change feed: a trigger writes one row per changed user in the
-- writing transaction, so a change is in the feed exactly when its write
-- committed (an outbox, not a second write that could be lost).
--
-- Why a change table and not the log pair's logical replication slot:
-- a slot has one position, so N streams resuming from N tokens would
-- need N slots, each holding WAL back while its reader is away (the log
-- pair measured a slot's backlog of other tables' WAL delaying delivery);
-- a table serves any number of readers from any token, and the cleaner's
-- CHANGES_RETENTION bounds it. The price is one more row written per
-- change, which the documents write points measure.
--
-- Why xid8 and not the sequence alone: seq is taken in insert order, not
-- commit order, so a reader that saw seq 11 could miss seq 10 committing
-- later. tx is the writing transaction's id; a reader takes only rows
-- with tx < pg_snapshot_xmin(pg_current_snapshot()), below which every
-- transaction has ended, so no row can appear below a position once it
-- has been read past (the event store pair's watermark cursor). Position
-- = (tx, seq), in the primary key's order.
CREATE TABLE IF NOT EXISTS user_changes (
    tx      xid8        NOT NULL DEFAULT pg_current_xact_id(),
    seq     bigint      GENERATED ALWAYS AS IDENTITY,
    op      text        NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
    user_id uuid        NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tx, seq)
);

-- The highest position the cleaner has removed: a token below it is a
-- 410 (its changes are gone), not a silent gap.
CREATE TABLE IF NOT EXISTS user_changes_horizon (
    one bool   PRIMARY KEY DEFAULT true CHECK (one),
    tx  xid8   NOT NULL,
    seq bigint NOT NULL
);
INSERT INTO user_changes_horizon (tx, seq) VALUES ('0', 0) ON CONFLICT DO NOTHING;

-- No NOTIFY here: a NOTIFY takes a database-wide lock at commit, which
-- would serialise every writer's commit; the service wakes its own
-- streams after its writes and polls for anyone else's.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION users_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO user_changes (op, user_id) VALUES ('delete', OLD.id);
    ELSE
        INSERT INTO user_changes (op, user_id) VALUES (lower(TG_OP), NEW.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TRIGGER IF EXISTS users_changed ON users;
CREATE TRIGGER users_changed AFTER INSERT OR UPDATE OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION users_changed();

-- +goose Down
DROP TRIGGER IF EXISTS users_changed ON users;
DROP FUNCTION IF EXISTS users_changed();
DROP TABLE IF EXISTS user_changes_horizon;
DROP TABLE IF EXISTS user_changes;
DROP TABLE IF EXISTS sessions;
