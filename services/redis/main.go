package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/pgorigin"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
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
	// DefaultCacheMode is CACHE_MODE's default: ModeRedis.
	DefaultCacheMode = ModeRedis
	// ModeRedis is CACHE_MODE=redis: GET and SET with a TTL on Redis
	// (go-redis), nothing kept in the process.
	ModeRedis = "redis"
	// ModeClientSide is CACHE_MODE=client-side: Redis 6+ server-assisted
	// client-side caching (rueidis, RESP3 CLIENT TRACKING): each instance
	// keeps a copy of what it read, dropped when Redis pushes an
	// invalidation.
	ModeClientSide = "client-side"
	// DefaultClientCacheBytes is CLIENT_CACHE_BYTES' default, rueidis'
	// ClientOption.CacheSizeEachConn (the mode uses one connection, so
	// it bounds the whole copy): as no-redis' LOCAL_CACHE_BYTES.
	DefaultClientCacheBytes = 256 << 20
	// MinClientCacheBytes is CLIENT_CACHE_BYTES' smallest value: a 1 MiB
	// kv value must fit.
	MinClientCacheBytes = 2 << 20
	// DefaultClientCacheTTL is CLIENT_CACHE_TTL's default: the longest a
	// copy lives in the process (DoMultiCache's ttl); rueidis also keeps
	// it no longer than the key's own PTTL.
	DefaultClientCacheTTL = time.Hour
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
	// Mode is the caching mode, ModeRedis or ModeClientSide. Env
	// CACHE_MODE; default DefaultCacheMode.
	Mode string
	// ClientCacheBytes bounds the in-process copy of ModeClientSide.
	// Env CLIENT_CACHE_BYTES; default DefaultClientCacheBytes, at least
	// MinClientCacheBytes.
	ClientCacheBytes int64
	// ClientCacheTTL is the longest a copy lives in the process in
	// ModeClientSide. Env CLIENT_CACHE_TTL; default
	// DefaultClientCacheTTL.
	ClientCacheTTL time.Duration
	// RedisTimeout bounds dialing and each read and write on a Redis
	// connection. Env REDIS_TIMEOUT; default DefaultRedisTimeout.
	RedisTimeout time.Duration
	// Roles bounds the pub/sub subscriptions: SUBSCRIBERS_MAX and
	// SUBSCRIBER_BUFFER_BYTES (cache.ReadRolesConfig).
	Roles cache.RolesConfig
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:           service.ReadCommon(r, self.Addr(), cache.DefaultBodyLimit),
		Postgres:         postgres.ReadConfig(r, pgorigin.DefaultSchema),
		Origin:           pgorigin.ReadConfig(r),
		RedisURL:         r.URL("REDIS_URL", DefaultRedisURL, "redis", "rediss"),
		KeyPrefix:        r.String("REDIS_KEY_PREFIX", DefaultKeyPrefix),
		Mode:             r.Enum("CACHE_MODE", DefaultCacheMode, ModeRedis, ModeClientSide),
		RedisTimeout:     r.Duration("REDIS_TIMEOUT", DefaultRedisTimeout),
		ClientCacheBytes: r.Bytes("CLIENT_CACHE_BYTES", DefaultClientCacheBytes),
		ClientCacheTTL:   r.Duration("CLIENT_CACHE_TTL", DefaultClientCacheTTL),
		Roles:            cache.ReadRolesConfig(r),
	}
	if c.RedisTimeout <= 0 {
		r.Fail("REDIS_TIMEOUT", "must be above 0, got %v", c.RedisTimeout)
	}
	if c.ClientCacheBytes < MinClientCacheBytes || c.ClientCacheBytes > math.MaxInt32 {
		r.Fail("CLIENT_CACHE_BYTES", "must be %d to %d bytes, got %d", MinClientCacheBytes, math.MaxInt32, c.ClientCacheBytes)
	}
	if c.ClientCacheTTL <= 0 {
		r.Fail("CLIENT_CACHE_TTL", "must be above 0, got %v", c.ClientCacheTTL)
	}
	return c, r.Err()
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

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

// build connects and migrates Postgres, creates the Redis client of the
// mode (go-redis for ModeRedis, rueidis for ModeClientSide) and assembles
// the service. A Redis that does not answer at start is logged, not fatal:
// reads bypass it until it answers.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("cache"), logger)
	if err != nil {
		return nil, err
	}
	genTTL := cfg.Origin.ProductTTL + cfg.BackendTimeout + time.Hour
	var backend interface {
		cache.Backend
		pinger
	}
	layer := ModeRedis
	if cfg.Mode == ModeClientSide {
		client, dialErr, err := newClientSide(cfg)
		if err != nil {
			pool.Close()
			return nil, err
		}
		if dialErr != nil {
			logger.Warn("redis does not answer; product reads bypass it until it does", "err", dialErr)
		} else {
			pctx, cancel := context.WithTimeout(ctx, cfg.RedisTimeout)
			version, _ := client.Do(pctx, client.B().Info().Section("server").Build()).ToString()
			cancel()
			logger.Info("backend", "server", "Redis "+infoField(version, "redis_version"), "prefix", cfg.KeyPrefix,
				"mode", cfg.Mode, "client_cache_bytes", cfg.ClientCacheBytes)
		}
		backend = &csStore{client: client, prefix: cfg.KeyPrefix, genTTL: genTTL, localTTL: cfg.ClientCacheTTL}
		layer = layerLocal
	} else {
		backend, err = newRedisStore(ctx, cfg, genTTL, logger)
		if err != nil {
			pool.Close()
			return nil, err
		}
	}
	svc := service.New(info, cfg.HTTP, logger, cache.Latencies, cache.Counters)
	postgres.Register(svc, pool)
	svc.OnStop("redis", func(context.Context) error { return backend.Close() })
	// Product reads bypass a Redis that is down, but kv requests fail:
	// the service is not ready without it.
	svc.ReadyBackend("redis", "REDIS_URL", cfg.RedisURL, backend.Ping)
	// The roles beyond the cache run on go-redis in both modes: the
	// store's client, or one of their own beside rueidis.
	var rc *redis.Client
	if st, ok := backend.(*store); ok {
		rc = st.client
	} else if rc, err = newClient(cfg); err != nil {
		_ = backend.Close()
		pool.Close()
		return nil, err
	} else {
		svc.OnStop("redis roles", func(context.Context) error { return rc.Close() })
	}
	ps := newPubSub(rc, cfg.KeyPrefix, cfg.RedisTimeout, logger)
	cache.Mount(svc.Router, backend, cache.Options{
		Stats: svc.Stats, Timeout: cfg.BackendTimeout, Layer: layer, Logger: logger,
		Origin: pgorigin.New(pool, cfg.Origin.Work), ProductTTL: cfg.Origin.ProductTTL,
		Locks: &redisLocks{client: rc, prefix: cfg.KeyPrefix}, Limits: &redisLimits{client: rc, prefix: cfg.KeyPrefix}, PubSub: ps,
		Roles: cfg.Roles, Stopping: svc.Stopping(),
	})
	// After Mount attached the fan-out. A Redis that does not answer is
	// not fatal: subscriptions are refused (503) until it does.
	ps.Start()
	svc.OnStop("pubsub", func(context.Context) error { return ps.Close() })
	if !ps.Await(4 * cfg.RedisTimeout) {
		logger.Warn("the pub/sub connection is not subscribed yet; subscriptions are refused until it is")
	}
	return svc, nil
}

// pinger is a Redis backend's readiness check: one PING.
type pinger interface {
	Ping(ctx context.Context) error
}

// Ping implements pinger.
func (s *store) Ping(ctx context.Context) error { return s.client.Ping(ctx).Err() }

// Ping implements pinger.
func (s *csStore) Ping(ctx context.Context) error {
	return s.client.Do(ctx, s.client.B().Ping().Build()).Error()
}

// newRedisStore is the CACHE_MODE=redis Backend on go-redis. A Redis that
// does not answer is logged, not fatal.
func newRedisStore(ctx context.Context, cfg Config, genTTL time.Duration, logger *slog.Logger) (*store, error) {
	client, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.RedisTimeout)
	version, err := client.Info(pctx, "server").Result()
	cancel()
	if err != nil {
		logger.Warn("redis does not answer; product reads bypass it until it does", "err", err)
	} else {
		logger.Info("backend", "server", "Redis "+infoField(version, "redis_version"), "prefix", cfg.KeyPrefix, "mode", cfg.Mode)
	}
	return &store{client: client, prefix: cfg.KeyPrefix, genTTL: genTTL}, nil
}

func main() { service.Start(self, readConfig, build) }
