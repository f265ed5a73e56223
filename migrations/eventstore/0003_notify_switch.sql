-- The NOTIFY of 0002 is sent in the inserting transaction, and a
-- transaction that notifies takes a database-wide lock at commit: appends
-- that notify serialize and group commit stops helping. So the trigger now
-- notifies unless the inserting transaction has set eventstore.notify to
-- 'off'. no-kurrentdb in NOTIFY_MODE=debounced sets it in the append
-- statement itself (set_config(..., true): that transaction only, safe
-- through pgbouncer) and notifies after the commit, at most once per
-- NOTIFY_INTERVAL, on a connection of its own. Every other insert (commit
-- mode, psql, tests) notifies as before. The mode is thus each writer's
-- choice per transaction, not schema state: instances in different modes
-- share the schema and wake each other.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- NULL when never set in the session, '' once set in an earlier
    -- transaction of it: both mean notify.
    IF current_setting('eventstore.notify', true) IS DISTINCT FROM 'off' THEN
        PERFORM pg_notify('eventstore_events', TG_TABLE_SCHEMA);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('eventstore_events', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
