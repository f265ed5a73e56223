package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
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

// Defaults of the change feed and the sessions' removal.
const (
	// DefaultChangesRetention is CHANGES_RETENTION's default: how long
	// the change feed keeps a change (a token older than that is a 410).
	DefaultChangesRetention = 24 * time.Hour
	// DefaultExpiredRetention is EXPIRED_RETENTION's default: how long
	// after its expiry the delete job removes a session (reads miss it
	// from its expiry on).
	DefaultExpiredRetention = time.Millisecond
	// DefaultChangesPoll is CHANGES_POLL_INTERVAL's default: how often an
	// open change stream looks for writes this process did not make
	// (its own wake it at once).
	DefaultChangesPoll = 500 * time.Millisecond
	// changesBatch is the most changes one read of the feed takes.
	changesBatch = 500
)

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
	// Cleaner paces the removal of old changes (CHANGES_RETENTION,
	// default DefaultChangesRetention; must be positive, since the same
	// passes remove expired sessions) and of expired sessions, both every
	// RETENTION_INTERVAL (default 1 minute, as MongoDB's TTL monitor),
	// RETENTION_BATCH rows per statement.
	Cleaner cleaner.Config
	// ExpiredRetention is how long after its expiry a session is removed.
	// Env EXPIRED_RETENTION; default DefaultExpiredRetention.
	ExpiredRetention time.Duration
	// ChangesPoll is how often an open change stream polls for other
	// writers' changes. Env CHANGES_POLL_INTERVAL; default
	// DefaultChangesPoll, at least 10ms.
	ChangesPoll time.Duration
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:           readCommon(r),
		Postgres:         postgres.ReadConfig(r, DefaultSchema),
		SearchMaxBytes:   documents.ReadSearchMaxBytes(r),
		ToastCompression: r.String("TOAST_COMPRESSION", DefaultToastCompression),
		Cleaner:          cleaner.ReadConfig(r, "CHANGES_RETENTION", DefaultChangesRetention),
		ExpiredRetention: r.Duration("EXPIRED_RETENTION", DefaultExpiredRetention),
		ChangesPoll:      r.Duration("CHANGES_POLL_INTERVAL", DefaultChangesPoll),
	}
	if c.Cleaner.Retention <= 0 {
		r.Fail("CHANGES_RETENTION", "must be positive: the cleaner that removes old changes also removes expired sessions, got %v", c.Cleaner.Retention)
	}
	if c.ExpiredRetention < 0 {
		r.Fail("EXPIRED_RETENTION", "must not be negative, got %v", c.ExpiredRetention)
	}
	if c.ChangesPoll < 10*time.Millisecond {
		r.Fail("CHANGES_POLL_INTERVAL", "must be at least 10ms, got %v", c.ChangesPoll)
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
	changes := &feed{pool: pool, poll: cfg.ChangesPoll, batch: changesBatch}
	st := &store{pool: pool, changed: changes.wake}
	documents.Mount(svc.Router, st, documents.Options{
		Stats:          svc.Stats,
		Timeout:        cfg.BackendTimeout,
		Info:           documents.BackendInfo{Backend: info.Backend, Server: "PostgreSQL " + version},
		SearchMaxBytes: cfg.SearchMaxBytes,
		Reports:        st, Sessions: st, Changes: changes,
		Stopping: svc.Stopping(),
	})
	c := cleaner.New(cfg.Cleaner, svc.Stats, logger, changesJob(pool), sessionsJob(pool, cfg.ExpiredRetention))
	c.Start()
	svc.OnStop("cleaner", c.Close)
	return svc, nil
}

func main() { service.Start(self, readConfig, build) }
