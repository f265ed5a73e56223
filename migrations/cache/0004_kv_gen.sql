-- Invalidation generations of the table cache (CACHE_MODE=unlogged), so
-- that a read-through fill that read the old row before an update
-- committed cannot store it after that update's invalidation
-- (services/no-redis/table.go has the ordering argument). A key's
-- generation is the row of its stripe, hashtext(key) & 4095: at most
-- 4096 rows whatever the number of keys, and an absent row is generation
-- 0. An invalidation bumps it in the transaction that deletes the key; a
-- fill stores only if it is unchanged since the miss. Each cache table
-- has its own, with the same persistence: cache_kv_gen is UNLOGGED (crash
-- recovery empties it together with cache_kv), cache_kv_logged_gen is
-- written to the WAL.

-- +goose Up
CREATE UNLOGGED TABLE IF NOT EXISTS cache_kv_gen (
    stripe int    PRIMARY KEY,
    gen    bigint NOT NULL
);

CREATE TABLE IF NOT EXISTS cache_kv_logged_gen (
    stripe int    PRIMARY KEY,
    gen    bigint NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS cache_kv_logged_gen;
DROP TABLE IF EXISTS cache_kv_gen;
