-- The roles beyond the cache of no-redis (issue 41, docs/cache.md
-- "Beyond the cache"): locks with leases and fencing tokens, and
-- fixed-window rate limits. Pub/sub needs no table: it is NOTIFY on
-- channel cache_pubsub.
--
-- cache_locks: one row per lock name ever taken (until the reaper removes
-- it, a while after its lease ended). A lock is a lease row, not a
-- session advisory lock: the HTTP API's acquire and release are separate
-- requests, possibly to different instances, and the holder is the
-- client, not a Postgres session, so the lease is what ends a dead
-- holder's lock, on both sides alike. The table is WAL-logged: a held
-- lock survives a Postgres crash (until its lease ends), as the
-- exclusion it promises must.
--
-- cache_lock_tokens: the fencing tokens. A sequence, not a per-name
-- counter: one nextval per grant, taken while the grant holds the row's
-- lock (services/no-redis/roles.go), so grants of one name get strictly
-- increasing tokens in the order they were made; across names the
-- tokens only share the counter. A sequence is WAL-logged too (and may
-- skip up to 32 values after a crash, never go back), so tokens keep
-- increasing across a crash. bigint: 2^63 grants.
--
-- cache_limits: one row per rate-limit key, its window's count and end.
-- UNLOGGED: a take is one upsert, and a counter that crash recovery
-- empties costs at most one window's worth of extra admissions, the
-- trade Redis makes without persistence. Not on a standby (unlogged).

-- +goose Up
CREATE TABLE IF NOT EXISTS cache_locks (
    name       text        PRIMARY KEY,
    owner      text        NOT NULL,
    token      bigint      NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS cache_locks_expires_at ON cache_locks (expires_at);

CREATE SEQUENCE IF NOT EXISTS cache_lock_tokens AS bigint;

CREATE UNLOGGED TABLE IF NOT EXISTS cache_limits (
    key       text        PRIMARY KEY,
    hits      bigint      NOT NULL,
    resets_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS cache_limits_resets_at ON cache_limits (resets_at);

-- +goose Down
DROP TABLE IF EXISTS cache_limits;
DROP SEQUENCE IF EXISTS cache_lock_tokens;
DROP TABLE IF EXISTS cache_locks;
