package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// rawLookupKeys is how many product values the Redis loop reads from
// (written before it starts, under rawLookupPrefix).
const (
	rawLookupKeys   = 1000
	rawLookupPrefix = "wpe:loadtests:rawlookup:"
)

// The sides of the raw lookup point (CacheRawScenario): the engines
// themselves, not services.
const (
	RawSidePostgres = "postgres"
	RawSideRedis    = "redis"
)

// RawLookupSpec is what a raw lookup reads and for how long.
type RawLookupSpec struct {
	// PostgresURL and Schema locate the products table of the
	// "postgres" side; RedisURL is the "redis" side's server.
	PostgresURL, RedisURL, Schema string
	// Keys is how many products there are (ids 1 to Keys).
	Keys int
	// Duration is how long the loop runs.
	Duration time.Duration
	// Progress draws the loop (nil: not drawn).
	Progress *driver.Progress
}

// RawLookup measures a lookup by key without HTTP, one connection, one
// lookup at a time for sp.Duration: side "postgres" is a pgx SELECT of a
// product by primary key from Schema.products (ids 1 to Keys), side
// "redis" a go-redis GET of a product's JSON (written first). Latencies
// are each lookup's round trip.
func RawLookup(ctx context.Context, side string, sp RawLookupSpec) (driver.ClientResult, error) {
	pgURL, redisURL, schema, keys := sp.PostgresURL, sp.RedisURL, sp.Schema, sp.Keys
	d, progress := sp.Duration, sp.Progress
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var op func(ctx context.Context, w int, n uint64) (int, error)
	r := rand.New(rand.NewPCG(3, 4))
	ids := make([]int, 1<<14)
	for i := range ids {
		ids[i] = 1 + r.IntN(max(keys, 1))
	}
	switch side {
	case RawSidePostgres:
		conn, err := pgx.Connect(cctx, pgURL)
		if err != nil {
			return driver.ClientResult{}, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		q := fmt.Sprintf(`SELECT id, name, price_cents, stock, updated_at FROM %s.products WHERE id = $1`, pgx.Identifier{schema}.Sanitize())
		op = func(ctx context.Context, _ int, n uint64) (int, error) {
			var id, price, stock int64
			var name string
			var at time.Time
			if err := conn.QueryRow(ctx, q, ids[n%uint64(len(ids))]).Scan(&id, &name, &price, &stock, &at); err != nil {
				return 0, err
			}
			return 200, nil
		}
	case RawSideRedis:
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			return driver.ClientResult{}, err
		}
		opt.PoolSize, opt.ReadTimeout, opt.WriteTimeout = 1, 5*time.Second, 5*time.Second
		c := redis.NewClient(opt)
		defer c.Close()
		pipe := c.Pipeline()
		for i := range rawLookupKeys {
			pipe.Set(cctx, rawLookupPrefix+strconv.Itoa(i),
				fmt.Sprintf(`{"id":%d,"name":"product %d","price_cents":%d,"stock":%d,"updated_at":"2026-01-01T00:00:00Z"}`, i, i, 100+i, i), 10*time.Minute)
		}
		if _, err := pipe.Exec(cctx); err != nil {
			return driver.ClientResult{}, err
		}
		op = func(ctx context.Context, _ int, n uint64) (int, error) {
			if _, err := c.Get(ctx, rawLookupPrefix+strconv.Itoa(ids[n%uint64(len(ids))]%rawLookupKeys)).Result(); err != nil {
				return 0, err
			}
			return 200, nil
		}
	default:
		return driver.ClientResult{}, fmt.Errorf("raw lookup: unknown side %q (postgres or redis)", side)
	}
	res := driver.Loop(ctx, driver.LoopSpec{Name: side + " lookup by key", Workers: 1, Duration: d, Op: op, Progress: progress})
	if res.OK == 0 {
		return res, fmt.Errorf("raw lookup on %s: no lookup succeeded (%d errors)", side, res.Errors)
	}
	return res, nil
}
