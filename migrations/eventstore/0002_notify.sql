-- Live subscribers are woken by LISTEN/NOTIFY: one notification per
-- inserting statement. The subscriber then reads below the xid watermark as
-- usual; the notification carries no event, only "look again", so a missed
-- one (a listener reconnecting) costs latency until the fallback poll,
-- never an event.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- The payload is the schema: services (and parallel tests) that share
    -- one database in different schemas ignore each other's wake-ups.
    -- NOTIFY is sent at COMMIT, only if the transaction commits, and
    -- identical notifications of one transaction are folded into one.
    PERFORM pg_notify('eventstore_events', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- FOR EACH STATEMENT: an append of 1,000 events sends one notification,
-- not 1,000. CREATE OR REPLACE makes the migration re-runnable (PG 14+).
CREATE OR REPLACE TRIGGER events_notify
    AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_notify();

-- +goose Down
DROP TRIGGER IF EXISTS events_notify ON events;
DROP FUNCTION IF EXISTS events_notify();
