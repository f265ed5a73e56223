-- Invalidation from Postgres itself: every statement that changes or
-- removes products, the service's PUT or a bulk UPDATE ... WHERE typed in
-- psql, sends one notification naming the ids it touched, so that every
-- no-redis instance drops those keys from its in-process cache.
--
-- Statement-level with a transition table: an UPDATE of 50,000 rows sends
-- one notification, not 50,000. The payload is "<schema> <id>,<id>,..."
-- (services and parallel tests sharing one database in different schemas
-- ignore each other's), or "<schema> *" when the ids would not fit in a
-- payload (8000 bytes): the listeners then flush their whole cache. A
-- TRUNCATE flushes too. NOTIFY is sent at COMMIT, only if the transaction
-- commits. Both sides share this table, so the redis side's writes send it
-- too (docs/cache.md).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION products_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    n   bigint;
    ids text;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('cache_products', TG_TABLE_SCHEMA || ' *');
        RETURN NULL;
    END IF;
    SELECT count(*), string_agg(id::text, ',') INTO n, ids
    FROM (SELECT id FROM changed_rows LIMIT 301) AS c;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    IF n > 300 THEN
        ids := '*';
    END IF;
    PERFORM pg_notify('cache_products', TG_TABLE_SCHEMA || ' ' || ids);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE TRIGGER products_notify_update
    AFTER UPDATE ON products REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION products_notify();
CREATE OR REPLACE TRIGGER products_notify_delete
    AFTER DELETE ON products REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION products_notify();
CREATE OR REPLACE TRIGGER products_notify_truncate
    AFTER TRUNCATE ON products
    FOR EACH STATEMENT EXECUTE FUNCTION products_notify();

-- +goose Down
DROP TRIGGER IF EXISTS products_notify_truncate ON products;
DROP TRIGGER IF EXISTS products_notify_delete ON products;
DROP TRIGGER IF EXISTS products_notify_update ON products;
DROP FUNCTION IF EXISTS products_notify();
