package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default :8090), BODY_LIMIT (default 1MiB), the
	// HTTP timeouts, LOG_LEVEL (info) and LOG_FORMAT (text).
	service.Common
	// Postgres holds DATABASE_URL (default the stack's Postgres),
	// DATABASE_SCHEMA (default "eventstore"), DATABASE_MAX_CONNS (16) and
	// DATABASE_CONNECT_TIMEOUT (5s).
	Postgres postgres.Config
	// ListenURL is the connection LISTEN uses. It must reach Postgres
	// directly: through pgbouncer in transaction mode LISTEN "works" and
	// then receives nothing. Env DATABASE_LISTEN_URL; default DATABASE_URL.
	ListenURL string
	// PollInterval is the fallback poll of live subscriptions, for wake-ups
	// a notification cannot give (a listener reconnecting, a watermark held
	// back by an unrelated transaction). Env POLL_INTERVAL; default 1s.
	PollInterval time.Duration
	// PageSize is how many events a subscription reads per query. Env
	// SUBSCRIBE_PAGE_SIZE; default 500.
	PageSize int
	// BackendTimeout bounds each query. Env BACKEND_TIMEOUT; default 10s.
	BackendTimeout time.Duration
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:         service.ReadCommon(r, ":8090", 1<<20),
		Postgres:       postgres.ReadConfig(r, "eventstore"),
		PollInterval:   r.Duration("POLL_INTERVAL", time.Second),
		PageSize:       r.Int("SUBSCRIBE_PAGE_SIZE", 500),
		BackendTimeout: r.Duration("BACKEND_TIMEOUT", 10*time.Second),
	}
	c.ListenURL = r.URL("DATABASE_LISTEN_URL", c.Postgres.URL, "postgres", "postgresql")
	validate(r, c)
	return c, r.Err()
}

// validate records out-of-range values, naming the variable.
func validate(r *config.Reader, c Config) {
	if c.PollInterval < 10*time.Millisecond || c.PollInterval > time.Hour {
		r.Fail("POLL_INTERVAL", "must be between 10ms and 1h, got %v", c.PollInterval)
	}
	if c.PageSize < 1 || c.PageSize > 10000 {
		r.Fail("SUBSCRIBE_PAGE_SIZE", "must be between 1 and 10000, got %d", c.PageSize)
	}
	if c.BackendTimeout <= 0 {
		r.Fail("BACKEND_TIMEOUT", "must be positive, got %v", c.BackendTimeout)
	}
}

// info names the service in /stats and /metrics.
var info = stats.Info{Service: "no-kurrentdb", Pair: "eventstore", Backend: "postgres"}

// build connects and migrates the backend, starts the listener and
// assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, *store, error) {
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("eventstore"), logger)
	if err != nil {
		return nil, nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, eventstore.LatencyNames, eventstore.CounterNames)
	// Registered first, so stopped last (OnStop hooks run LIFO).
	svc.OnStop("postgres pool", func(context.Context) error { pool.Close(); return nil })
	st := newStore(pool, cfg, logger)
	if err := st.startListener(ctx); err != nil {
		pool.Close()
		return nil, nil, err
	}
	svc.OnStop("listener", st.stopListener)
	svc.Ready("postgres", postgres.Ping(pool))
	eventstore.Mount(svc.Router, st, eventstore.Options{Stats: svc.Stats, Stopping: svc.Stopping(), Timeout: cfg.BackendTimeout})
	return svc, st, nil
}

func main() {
	service.Start(readConfig, func(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
		svc, _, err := build(ctx, cfg, logger)
		return svc, err
	})
}
