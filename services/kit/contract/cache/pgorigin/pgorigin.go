// Package pgorigin is the cache pair's origin on Postgres: the products
// table of migrations/cache, which both services read through and update.
// It also reads the settings both services share about it (ReadConfig).
package pgorigin

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// DefaultSchema is DATABASE_SCHEMA's default on both sides: they cache
// the same table.
const DefaultSchema = "cache"

// DefaultOriginWorkMS is ORIGIN_WORK_MS' default: no added work.
const DefaultOriginWorkMS = 0

// Config is what both services read about the origin and the products'
// cache entries.
type Config struct {
	// Work is slept by Postgres in every origin load (pg_sleep in the
	// query), to model an expensive query. Env ORIGIN_WORK_MS; default
	// DefaultOriginWorkMS, at most cache.MaxOriginWork.
	Work time.Duration
	// ProductTTL is how long a cached product lives. Env PRODUCT_TTL;
	// default cache.DefaultProductTTL.
	ProductTTL time.Duration
}

// ReadConfig reads Config and records an error naming each bad variable.
func ReadConfig(r *config.Reader) Config {
	ms := r.Int("ORIGIN_WORK_MS", DefaultOriginWorkMS)
	c := Config{Work: time.Duration(ms) * time.Millisecond, ProductTTL: r.Duration("PRODUCT_TTL", cache.DefaultProductTTL)}
	if ms < 0 || c.Work > cache.MaxOriginWork {
		r.Fail("ORIGIN_WORK_MS", "must be between 0 and %d, got %d", cache.MaxOriginWork.Milliseconds(), ms)
	}
	if c.ProductTTL <= 0 || c.ProductTTL > cache.MaxTTL {
		r.Fail("PRODUCT_TTL", "must be above 0 and at most %v, got %v", cache.MaxTTL, c.ProductTTL)
	}
	return c
}

// Origin reads and updates the products table. Safe for concurrent use;
// the pool belongs to the caller.
type Origin struct {
	pool *pgxpool.Pool
	work time.Duration
}

var _ cache.Origin = (*Origin)(nil)

// New returns the origin on pool (whose search_path holds the products
// table), adding work to every Load.
func New(pool *pgxpool.Pool, work time.Duration) *Origin { return &Origin{pool: pool, work: work} }

const cols = `id, name, price_cents, stock, updated_at`

// LoadSQL is the origin query; $2 is the added work in seconds (0 sleeps
// not at all).
const LoadSQL = `SELECT p.id, p.name, p.price_cents, p.stock, p.updated_at FROM products p, pg_sleep($2::float8) WHERE p.id = $1`

func scan(row pgx.Row, id int64) (cache.Product, error) {
	var p cache.Product
	err := row.Scan(&p.ID, &p.Name, &p.PriceCents, &p.Stock, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, cache.NotFound(id)
	}
	p.UpdatedAt = p.UpdatedAt.UTC()
	return p, postgres.MapError("products", err)
}

// Load reads one product.
func (o *Origin) Load(ctx context.Context, id int64) (cache.Product, error) {
	return scan(o.pool.QueryRow(ctx, LoadSQL, id, o.work.Seconds()), id)
}

// Update sets the product's fields and updated_at; the products trigger
// announces it (migrations/cache/0002).
func (o *Origin) Update(ctx context.Context, id int64, u cache.ProductUpdate) (cache.Product, error) {
	return scan(o.pool.QueryRow(ctx,
		`UPDATE products SET name = $2, price_cents = $3, stock = $4, updated_at = clock_timestamp() WHERE id = $1 RETURNING `+cols,
		id, u.Name, u.PriceCents, u.Stock), id)
}
