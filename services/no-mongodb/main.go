package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
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
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:   service.ReadCommon(r, ":8086", 4<<20),
		Postgres: postgres.ReadConfig(r, "documents"),
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
	svc := service.New(info, cfg.HTTP, logger, nil, nil)
	svc.OnStop("postgres pool", func(context.Context) error { pool.Close(); return nil })
	svc.Ready("postgres", postgres.Ping(pool))
	return svc, nil
}

func main() {
	service.Main(func(ctx context.Context) (*service.Service, error) {
		cfg, err := readConfig(config.FromEnv())
		if err != nil {
			return nil, err
		}
		return build(ctx, cfg, cfg.NewLogger(os.Stderr))
	})
}
