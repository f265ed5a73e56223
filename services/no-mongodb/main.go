package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default :8086), BODY_LIMIT (default 4MiB (the documents pair stores profiles of several MB)),
	// the HTTP timeouts, LOG_LEVEL (info) and LOG_FORMAT (text).
	service.Common
	// Postgres holds DATABASE_URL (default the stack's Postgres),
	// DATABASE_SCHEMA (default "documents"), DATABASE_MAX_CONNS (16) and
	// DATABASE_CONNECT_TIMEOUT (5s).
	Postgres postgres.Config
	// Timeout bounds each store call (context.WithTimeout around every
	// query; pgx cancels the query on the server when it expires). Env
	// DATABASE_TIMEOUT; default 10s.
	Timeout time.Duration
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:   service.ReadCommon(r, ":8086", 4<<20),
		Postgres: postgres.ReadConfig(r, "documents"),
		Timeout:  r.Duration("DATABASE_TIMEOUT", 10*time.Second),
	}
	if c.Timeout <= 0 {
		r.Fail("DATABASE_TIMEOUT", "must be positive, got %v", c.Timeout)
	}
	return c, r.Err()
}

// info names the service in /stats and /metrics.
var info = stats.Info{Service: "no-mongodb", Pair: "documents", Backend: "postgres"}

// build connects and migrates the backend and assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("documents"), logger)
	if err != nil {
		return nil, err
	}
	var version string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	logger.Info("backend", "server", "PostgreSQL "+version, "index", "users_profile_path_ops (GIN jsonb_path_ops)")
	svc := service.New(info, cfg.HTTP, logger, documents.Latencies, documents.Counters)
	svc.OnStop("postgres pool", func(context.Context) error { pool.Close(); return nil })
	svc.Ready("postgres", postgres.Ping(pool))
	documents.Mount(svc.Router, &store{pool: pool}, documents.Options{
		Stats:   svc.Stats,
		Timeout: cfg.Timeout,
		Info:    documents.BackendInfo{Backend: info.Backend, Server: "PostgreSQL " + version},
	})
	return svc, nil
}

func main() { service.Start(readConfig, build) }
