package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// self is the service's row in the pair table.
var self = pairs.Get("no-mongodb")

// DefaultSchema is DATABASE_SCHEMA's default.
const DefaultSchema = "documents"

// DefaultToastCompression is TOAST_COMPRESSION's default: Postgres' own
// default_toast_compression.
const DefaultToastCompression = "pglz"

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8086),
	// BODY_LIMIT (default documents.DefaultBodyLimit), the HTTP timeouts,
	// LOG_LEVEL, LOG_FORMAT and BACKEND_TIMEOUT, which bounds each store
	// call (context.WithTimeout around every query; pgx cancels the query
	// on the server when it expires). BACKEND_TIMEOUT was
	// DATABASE_TIMEOUT, still read with a warning.
	service.Common
	// Postgres holds DATABASE_URL, DATABASE_SCHEMA (default
	// DefaultSchema), DATABASE_MAX_CONNS and DATABASE_CONNECT_TIMEOUT.
	Postgres postgres.Config
	// SearchMaxBytes bounds one search page in bytes of JSON. Env
	// SEARCH_MAX_BYTES; default documents.DefaultSearchMaxBytes, at least
	// documents.MinSearchMaxBytes.
	SearchMaxBytes int64
	// ToastCompression compresses the profiles Postgres moves out of line
	// (server setting default_toast_compression, sent at every
	// connection's start; it applies to values written from then on).
	// pglz is Postgres' default; lz4 (PostgreSQL 14+, built with lz4)
	// compresses and decompresses faster at about the same size, which
	// the results' rewrite points measure as a variant. Env
	// TOAST_COMPRESSION (pglz or lz4); default DefaultToastCompression.
	ToastCompression string
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:           readCommon(r),
		Postgres:         postgres.ReadConfig(r, DefaultSchema),
		SearchMaxBytes:   documents.ReadSearchMaxBytes(r),
		ToastCompression: r.String("TOAST_COMPRESSION", DefaultToastCompression),
	}
	if c.ToastCompression != "pglz" && c.ToastCompression != "lz4" {
		r.Fail("TOAST_COMPRESSION", "%q: want pglz or lz4", c.ToastCompression)
	}
	c.Postgres.Params = map[string]string{"default_toast_compression": c.ToastCompression}
	return c, r.Err()
}

// readCommon reads Common, accepting BACKEND_TIMEOUT's old name.
func readCommon(r *config.Reader) service.Common {
	r.Rename("DATABASE_TIMEOUT", "BACKEND_TIMEOUT")
	return service.ReadCommon(r, self.Addr(), documents.DefaultBodyLimit)
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

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
	logger.Info("backend", "server", "PostgreSQL "+version, "index", "users_profile_path_ops (GIN jsonb_path_ops)", "toast_compression", cfg.ToastCompression)
	svc := service.New(info, cfg.HTTP, logger, documents.Latencies, documents.Counters)
	postgres.Register(svc, pool)
	documents.Mount(svc.Router, &store{pool: pool}, documents.Options{
		Stats:          svc.Stats,
		Timeout:        cfg.BackendTimeout,
		Info:           documents.BackendInfo{Backend: info.Backend, Server: "PostgreSQL " + version},
		SearchMaxBytes: cfg.SearchMaxBytes,
	})
	return svc, nil
}

func main() { service.Start(self, readConfig, build) }
