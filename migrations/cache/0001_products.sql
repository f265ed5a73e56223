-- The cache pair: the source of truth both sides cache, one products table
-- seeded with 100,000 rows (ids 1..100000; package memory's Seed gives the
-- same values).

-- +goose Up
CREATE TABLE IF NOT EXISTS products (
    id          bigint      PRIMARY KEY,
    name        text        NOT NULL,
    price_cents bigint      NOT NULL CHECK (price_cents >= 0),
    stock       bigint      NOT NULL CHECK (stock >= 0),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

INSERT INTO products (id, name, price_cents, stock, updated_at)
SELECT i, 'product ' || i, 100 + i % 10000, i % 1000, timestamptz '2026-01-01 00:00:00+00'
FROM generate_series(1, 100000) AS i
ON CONFLICT (id) DO NOTHING;

-- +goose Down
DROP TABLE IF EXISTS products;
