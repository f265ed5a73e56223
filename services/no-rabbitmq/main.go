package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default :8082), BODY_LIMIT (default 1MiB),
	// the HTTP timeouts, LOG_LEVEL (info) and LOG_FORMAT (text).
	service.Common
	// Postgres holds DATABASE_URL (default the stack's Postgres),
	// DATABASE_SCHEMA (default "queue"), DATABASE_MAX_CONNS (16) and
	// DATABASE_CONNECT_TIMEOUT (5s).
	Postgres postgres.Config
	// Worker holds WORKERS (8), WORK_MS (0), RETRY_BASE (200ms),
	// MAX_ATTEMPTS (5), PAYLOAD_LIMIT (64KiB) and FAULTS (false), shared
	// with the rabbitmq side.
	Worker queue.WorkerConfig
	// ListenURL is the connection string of the dedicated LISTEN
	// connection. It must reach Postgres directly: through pgbouncer in
	// transaction mode LISTEN succeeds and then silently receives nothing.
	// Env LISTEN_DATABASE_URL; default DATABASE_URL.
	ListenURL string
	// ClaimBatch is the most rows one claim statement takes (LIMIT of the
	// SKIP LOCKED select). Env CLAIM_BATCH; default 64. The service holds
	// at most WORKERS + CLAIM_BATCH tasks at once.
	ClaimBatch int
	// Lease is how long a claimed task stays locked (queue_jobs.locked_until)
	// before another worker may rescue it; the service renews the leases of
	// the tasks it holds every Lease/3, so only a dead worker's lease
	// expires. Env LEASE; default 30s.
	Lease time.Duration
	// PollInterval is the fallback poll: the longest a task waits if every
	// notification is missed. Env POLL_INTERVAL; default 1s.
	PollInterval time.Duration
	// QueueTable is the queue table's durability, applied at start with
	// ALTER TABLE queue_jobs SET UNLOGGED / SET LOGGED. unlogged: no WAL
	// for the queue (faster), emptied by crash recovery, not replicated,
	// not in base backups (the service rebuilds it from the logged task
	// records at start). logged: an ordinary table. Env QUEUE_TABLE;
	// default unlogged.
	QueueTable string
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:       service.ReadCommon(r, ":8082", 1<<20),
		Postgres:     postgres.ReadConfig(r, "queue"),
		Worker:       queue.ReadWorkerConfig(r),
		ClaimBatch:   r.Int("CLAIM_BATCH", 64),
		Lease:        r.Duration("LEASE", 30*time.Second),
		PollInterval: r.Duration("POLL_INTERVAL", time.Second),
		QueueTable:   r.Enum("QUEUE_TABLE", "unlogged", "unlogged", "logged"),
	}
	c.ListenURL = r.URL("LISTEN_DATABASE_URL", c.Postgres.URL, "postgres", "postgresql")
	c.validate(r)
	return c, r.Err()
}

func (c Config) validate(r *config.Reader) {
	if c.ClaimBatch < 1 || c.ClaimBatch > 10000 {
		r.Fail("CLAIM_BATCH", "must be between 1 and 10000, got %d", c.ClaimBatch)
	}
	if c.Lease < 300*time.Millisecond {
		r.Fail("LEASE", "must be at least 300ms, got %v", c.Lease)
	}
	if c.PollInterval < 10*time.Millisecond {
		r.Fail("POLL_INTERVAL", "must be at least 10ms, got %v", c.PollInterval)
	}
	if _, err := pgx.ParseConfig(c.ListenURL); err != nil {
		r.Fail("LISTEN_DATABASE_URL", "not a Postgres connection string")
	}
}

// info names the service in /stats and /metrics.
var info = stats.Info{Service: "no-rabbitmq", Pair: "queue", Backend: "postgres"}

// build connects and migrates the backend and assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	svc, _, err := assemble(ctx, cfg, logger)
	return svc, err
}

// assemble is build, also returning the queue (tests crash it).
func assemble(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, *pgQueue, error) {
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("queue"), logger)
	if err != nil {
		return nil, nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, queue.Latencies, queue.Counters)
	q := newPGQueue(pool, cfg, svc.Stats, svc.Logger)
	if err := q.prepare(ctx); err != nil {
		pool.Close()
		return nil, nil, err
	}
	// OnStop hooks run in reverse: the queue stops (workers finish, the
	// completions flush) before the pool closes.
	svc.OnStop("postgres pool", func(context.Context) error { pool.Close(); return nil })
	svc.OnStop("queue workers", q.Stop)
	svc.Ready("postgres", postgres.Ping(pool))
	svc.Ready("listen", func(context.Context) error {
		if cfg.Worker.Workers > 0 && !q.listening.Load() {
			return fmt.Errorf("LISTEN connection is down (reconnecting)")
		}
		return nil
	})
	queue.Mount(svc.Router, q, queue.Options{
		Stats: svc.Stats, Hub: q.hub, Stopping: svc.Stopping(),
		PayloadLimit: cfg.Worker.PayloadLimit, Faults: cfg.Worker.Faults,
	})
	q.Start()
	if err := q.awaitListening(ctx, 2*cfg.Postgres.ConnectTimeout+time.Second); err != nil {
		_ = q.Stop(ctx)
		pool.Close()
		return nil, nil, err
	}
	return svc, q, nil
}

func main() { service.Start(readConfig, build) }
