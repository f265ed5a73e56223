package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/pgorigin"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// self is the service's row in the pair table.
var self = pairs.Get("redis")

// Defaults of Config; the docs' env table (docs/cache.md) is checked
// against them.
const (
	// DefaultRedisURL is REDIS_URL's default: the stack's Redis.
	DefaultRedisURL = pairs.DefaultRedisURL
	// DefaultKeyPrefix is REDIS_KEY_PREFIX's default.
	DefaultKeyPrefix = "cache:"
	// DefaultCacheMode is CACHE_MODE's default, and its only value: GET
	// and SET with a TTL. (Client-side caching with RESP3 tracking, which
	// issue 10 also names, is not built.)
	DefaultCacheMode = "redis"
	// DefaultRedisTimeout is REDIS_TIMEOUT's default: it bounds dialing,
	// and each read and write on a Redis connection, so that a Redis that
	// hangs turns into a bypass quickly rather than at BACKEND_TIMEOUT.
	DefaultRedisTimeout = 500 * time.Millisecond
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8087),
	// BODY_LIMIT (default cache.DefaultBodyLimit), the HTTP timeouts,
	// LOG_LEVEL, LOG_FORMAT and BACKEND_TIMEOUT, which bounds each
	// Redis and Postgres call.
	service.Common
	// Postgres holds DATABASE_URL, DATABASE_SCHEMA (default
	// pgorigin.DefaultSchema, the table no-redis caches too),
	// DATABASE_MAX_CONNS and DATABASE_CONNECT_TIMEOUT.
	Postgres postgres.Config
	// Origin holds ORIGIN_WORK_MS and PRODUCT_TTL.
	Origin pgorigin.Config
	// RedisURL is the Redis server. Env REDIS_URL; default
	// DefaultRedisURL.
	RedisURL string
	// KeyPrefix is prepended to every key, so that services and tests
	// share one Redis without meeting. Env REDIS_KEY_PREFIX; default
	// DefaultKeyPrefix.
	KeyPrefix string
	// Mode is the caching mode. Env CACHE_MODE; default (and only value)
	// DefaultCacheMode.
	Mode string
	// RedisTimeout bounds dialing and each read and write on a Redis
	// connection. Env REDIS_TIMEOUT; default DefaultRedisTimeout.
	RedisTimeout time.Duration
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:       service.ReadCommon(r, self.Addr(), cache.DefaultBodyLimit),
		Postgres:     postgres.ReadConfig(r, pgorigin.DefaultSchema),
		Origin:       pgorigin.ReadConfig(r),
		RedisURL:     r.URL("REDIS_URL", DefaultRedisURL, "redis", "rediss"),
		KeyPrefix:    r.String("REDIS_KEY_PREFIX", DefaultKeyPrefix),
		Mode:         r.Enum("CACHE_MODE", DefaultCacheMode, "redis"),
		RedisTimeout: r.Duration("REDIS_TIMEOUT", DefaultRedisTimeout),
	}
	if c.RedisTimeout <= 0 {
		r.Fail("REDIS_TIMEOUT", "must be above 0, got %v", c.RedisTimeout)
	}
	return c, r.Err()
}

// info names the service in /stats and /metrics.
var info = stats.Info{Service: self.Name, Pair: self.Pair, Backend: self.Backend}

// newClient returns the go-redis client of cfg. It does not connect: the
// first command does.
func newClient(cfg Config) (*redis.Client, error) {
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = cfg.RedisTimeout, cfg.RedisTimeout, cfg.RedisTimeout
	// One attempt: a Redis that is down is bypassed at once, not after
	// retries with backoff.
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	return redis.NewClient(opt), nil
}

// build connects and migrates Postgres, creates the Redis client and
// assembles the service. A Redis that does not answer at start is logged,
// not fatal: reads bypass it until it answers.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("cache"), logger)
	if err != nil {
		return nil, err
	}
	client, err := newClient(cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.RedisTimeout)
	version, err := client.Info(pctx, "server").Result()
	cancel()
	if err != nil {
		logger.Warn("redis does not answer; product reads bypass it until it does", "err", err)
	} else {
		logger.Info("backend", "server", "Redis "+infoField(version, "redis_version"), "prefix", cfg.KeyPrefix)
	}
	svc := service.New(info, cfg.HTTP, logger, cache.Latencies, cache.Counters)
	postgres.Register(svc, pool)
	st := &store{client: client, prefix: cfg.KeyPrefix, genTTL: cfg.Origin.ProductTTL + cfg.BackendTimeout + time.Hour}
	svc.OnStop("redis", func(context.Context) error { return st.Close() })
	cache.Mount(svc.Router, st, cache.Options{
		Stats: svc.Stats, Timeout: cfg.BackendTimeout, Layer: "redis", Logger: logger,
		Origin: pgorigin.New(pool, cfg.Origin.Work), ProductTTL: cfg.Origin.ProductTTL,
	})
	return svc, nil
}

func main() { service.Start(readConfig, build) }
