-- The table cache of no-redis (CACHE_MODE=unlogged): key, value and
-- expiry, shared by every instance. cache_kv is UNLOGGED: no WAL, so
-- writes are cheaper, but crash recovery empties it and it is not
-- replicated (docs/cache.md). cache_kv_logged is the same table written
-- to the WAL, for the comparison (CACHE_TABLE=logged). Values are bytea,
-- returned byte for byte as stored. A reader ignores expired rows; the
-- reaper (kit/cleaner) removes them in batches through the expiry index.

-- +goose Up
CREATE UNLOGGED TABLE IF NOT EXISTS cache_kv (
    key        text        PRIMARY KEY,
    value      bytea       NOT NULL,
    expires_at timestamptz
);
CREATE INDEX IF NOT EXISTS cache_kv_expires_at ON cache_kv (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS cache_kv_logged (
    key        text        PRIMARY KEY,
    value      bytea       NOT NULL,
    expires_at timestamptz
);
CREATE INDEX IF NOT EXISTS cache_kv_logged_expires_at ON cache_kv_logged (expires_at) WHERE expires_at IS NOT NULL;

-- +goose Down
DROP TABLE IF EXISTS cache_kv_logged;
DROP TABLE IF EXISTS cache_kv;
