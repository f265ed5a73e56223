package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/pgorigin"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// self is the service's row in the pair table.
var self = pairs.Get("no-redis")

// Modes and tables.
const (
	// ModeLocal: an in-process cache invalidated by NOTIFY.
	ModeLocal = "local"
	// ModeUnlogged: a table shared by every instance.
	ModeUnlogged = "unlogged"
	// TableUnlogged is CACHE_TABLE's UNLOGGED table, cache_kv.
	TableUnlogged = "unlogged"
	// TableLogged is CACHE_TABLE's WAL-logged table, cache_kv_logged.
	TableLogged = "logged"
)

// Defaults of Config; the docs' env table (docs/cache.md) is checked
// against them.
const (
	// DefaultCacheMode is CACHE_MODE's default.
	DefaultCacheMode = ModeLocal
	// DefaultCacheTable is CACHE_TABLE's default.
	DefaultCacheTable = TableUnlogged
	// DefaultLocalCacheBytes is LOCAL_CACHE_BYTES' default: the bound of
	// the in-process cache, keys and values counted (plus entryOverhead
	// each).
	DefaultLocalCacheBytes = 256 << 20
	// MinLocalCacheBytes is LOCAL_CACHE_BYTES' smallest value: a 1 MiB
	// kv value must fit.
	MinLocalCacheBytes = 2 << 20
	// DefaultExpiredRetention is EXPIRED_RETENTION's default: how long
	// after its expiry the reaper removes a row of the cache table (reads
	// ignore it from its expiry on); 0s disables the reaper.
	DefaultExpiredRetention = time.Minute
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8088),
	// BODY_LIMIT (default cache.DefaultBodyLimit), the HTTP timeouts,
	// LOG_LEVEL, LOG_FORMAT and BACKEND_TIMEOUT, which bounds each
	// Postgres call.
	service.Common
	// Postgres holds DATABASE_URL, DATABASE_SCHEMA (default
	// pgorigin.DefaultSchema, the table redis caches too),
	// DATABASE_MAX_CONNS and DATABASE_CONNECT_TIMEOUT.
	Postgres postgres.Config
	// Origin holds ORIGIN_WORK_MS and PRODUCT_TTL.
	Origin pgorigin.Config
	// Mode is ModeLocal or ModeUnlogged. Env CACHE_MODE; default
	// DefaultCacheMode.
	Mode string
	// Table is the cache table of ModeUnlogged: TableUnlogged or
	// TableLogged. Env CACHE_TABLE; default DefaultCacheTable.
	Table string
	// LocalCacheBytes bounds the in-process cache of ModeLocal. Env
	// LOCAL_CACHE_BYTES; default DefaultLocalCacheBytes, at least
	// MinLocalCacheBytes.
	LocalCacheBytes int64
	// ListenURL is the connection LISTEN uses: the pub/sub role's in every
	// mode, and ModeLocal's invalidations. It must reach Postgres
	// directly: through pgbouncer in transaction mode LISTEN "works" and
	// then receives nothing. Env DATABASE_LISTEN_URL; default
	// DATABASE_URL.
	ListenURL string
	// Reaper paces the removal of expired rows: the cache table's
	// (ModeUnlogged), and in every mode the lock rows whose lease ended
	// and the rate-limit rows whose window ended. EXPIRED_RETENTION
	// (default DefaultExpiredRetention), RETENTION_INTERVAL and
	// RETENTION_BATCH.
	Reaper cleaner.Config
	// Roles bounds the pub/sub subscriptions: SUBSCRIBERS_MAX and
	// SUBSCRIBER_BUFFER_BYTES (cache.ReadRolesConfig).
	Roles cache.RolesConfig
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:          service.ReadCommon(r, self.Addr(), cache.DefaultBodyLimit),
		Postgres:        postgres.ReadConfig(r, pgorigin.DefaultSchema),
		Origin:          pgorigin.ReadConfig(r),
		Mode:            r.Enum("CACHE_MODE", DefaultCacheMode, ModeLocal, ModeUnlogged),
		Table:           r.Enum("CACHE_TABLE", DefaultCacheTable, TableUnlogged, TableLogged),
		LocalCacheBytes: r.Bytes("LOCAL_CACHE_BYTES", DefaultLocalCacheBytes),
		Reaper:          cleaner.ReadConfig(r, "EXPIRED_RETENTION", DefaultExpiredRetention),
		Roles:           cache.ReadRolesConfig(r),
	}
	c.ListenURL = postgres.ReadListenURL(r, c.Postgres)
	if c.LocalCacheBytes < MinLocalCacheBytes {
		r.Fail("LOCAL_CACHE_BYTES", "must be at least %d bytes, got %d", MinLocalCacheBytes, c.LocalCacheBytes)
	}
	return c, r.Err()
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

// app is what build assembles and the tests reach into.
type app struct {
	svc      *service.Service
	pool     *pgxpool.Pool
	local    *localStore // nil in ModeUnlogged
	listener *pglisten.Listener
}

// assemble connects and migrates Postgres and assembles the service in
// cfg.Mode, with the roles beyond the cache (locks, pub/sub, rate
// limits). It returns once the process' listener listens, so that
// nothing is cached before invalidations can arrive and no subscription
// is refused at start.
func assemble(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, *app, error) {
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("cache"), logger)
	if err != nil {
		return nil, nil, err
	}
	cc, err := postgres.ListenConnConfig(cfg.ListenURL, cfg.Postgres, ListenerName(cfg.Postgres.Schema))
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, cache.Latencies, cache.Counters)
	// First, so that the pool closes after every hook registered below
	// (hooks run in reverse order).
	postgres.Register(svc, pool)
	a := &app{svc: svc, pool: pool}
	var backend cache.Backend
	var layer string
	jobs := rolesReapJobs(pool)
	switch cfg.Mode {
	case ModeLocal:
		a.local = newLocalStore(cfg, svc.Stats, logger)
		backend, layer = a.local, ModeLocal
	default:
		t := newTableStore(pool, cfg.Table)
		backend, layer = t, cfg.Table
		jobs = append([]cleaner.Job{t.reapJob()}, jobs...)
	}
	ps := newPubSub(pool, cfg.Postgres.Schema)
	a.listener = newListener(cc, pool, a.local, ps, logger)
	ps.ln = a.listener
	if a.local != nil {
		a.local.ln = a.listener
	}
	svc.OnStop("cache", func(context.Context) error { return backend.Close() })
	logger.Info("backend", "mode", cfg.Mode, "layer", layer, "local_cache_bytes", cfg.LocalCacheBytes, "message_limit", ps.MessageLimit())
	cache.Mount(svc.Router, backend, cache.Options{
		Stats: svc.Stats, Timeout: cfg.BackendTimeout, Layer: layer, Logger: logger,
		Origin: pgorigin.New(pool, cfg.Origin.Work), ProductTTL: cfg.Origin.ProductTTL,
		Locks: &pgLocks{pool: pool}, Limits: &pgLimits{pool: pool}, PubSub: ps,
		Roles: cfg.Roles, Stopping: svc.Stopping(),
	})
	// After Mount attached the fan-out; the service does not serve yet.
	if err := a.listener.Start(); err != nil {
		pool.Close()
		return nil, nil, err
	}
	svc.OnStop("listener", a.listener.Close)
	if err := postgres.AwaitListening(ctx, cfg.Postgres.ConnectTimeout*2+5*time.Second, a.listener); err != nil {
		_ = a.listener.Close(context.Background()) // no deadline: Run's close of its connection is bounded
		pool.Close()
		return nil, nil, err
	}
	svc.Ready("listener", func(context.Context) error {
		if err := a.listener.ListenErr(); err != nil {
			return fmt.Errorf("LISTEN connection down: %w", err)
		}
		return nil
	})
	c := cleaner.New(cfg.Reaper, svc.Stats, logger, jobs...)
	c.Start()
	svc.OnStop("reaper", c.Close)
	return svc, a, nil
}

func main() { service.Start(self, readConfig, service.WithoutParts(assemble)) }
