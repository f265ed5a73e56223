-- The documents pair: fixed columns for what every user has, one jsonb
-- document for the free-form rest.

-- +goose Up
CREATE TABLE IF NOT EXISTS users (
    id         uuid        PRIMARY KEY,
    email      text        NOT NULL UNIQUE,
    name       text        NOT NULL,
    plan       text        NOT NULL,
    profile    jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- jsonb_path_ops rather than the default jsonb_ops: it indexes hashes of
-- whole paths to values, so the index is smaller and containment (@>) is
-- faster, but it serves ONLY @> and the jsonpath operators @? and @@ — not
-- key existence (?, ?|, ?&). The contract's search is containment, which
-- is what MongoDB's wildcard index is compared against.
CREATE INDEX IF NOT EXISTS users_profile_path_ops ON users USING gin (profile jsonb_path_ops);

-- +goose Down
DROP TABLE IF EXISTS users;
