package main

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

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
	// Common holds ADDR (default :8081), BODY_LIMIT (default 1MiB), the
	// HTTP timeouts, LOG_LEVEL (info) and LOG_FORMAT (text).
	service.Common
	// Postgres holds DATABASE_URL (default the stack's Postgres),
	// DATABASE_SCHEMA (default "queue_rabbitmq": the business records live
	// there, apart from no-rabbitmq's "queue" so that both can run on one
	// database), DATABASE_MAX_CONNS (16) and DATABASE_CONNECT_TIMEOUT (5s).
	Postgres postgres.Config
	// Worker holds WORKERS (8), WORK_MS (0), RETRY_BASE (200ms),
	// MAX_ATTEMPTS (5), PAYLOAD_LIMIT (64KiB) and FAULTS (false), shared
	// with the no-rabbitmq side.
	Worker queue.WorkerConfig
	// RabbitMQURL is the AMQP 0-9-1 URL. Env RABBITMQ_URL; default
	// amqp://guest:guest@localhost:5672/ (the stack's broker).
	RabbitMQURL string
	// DialTimeout bounds the AMQP connection handshake (amqp091
	// Config.Dial). Env RABBITMQ_DIAL_TIMEOUT; default 5s.
	DialTimeout time.Duration
	// Heartbeat is the AMQP heartbeat interval, which detects a dead
	// broker connection. Env RABBITMQ_HEARTBEAT; default 10s.
	Heartbeat time.Duration
	// Queue names the work queue; the service also declares <queue>.dlx
	// (the dead-letter exchange), <queue>.dead and one <queue>.retry.<ms>
	// delay queue per backoff step. Env RABBITMQ_QUEUE; default "tasks".
	Queue string
	// QueueType is the x-queue-type of every queue: classic (one node) or
	// quorum (Raft-replicated). Env QUEUE_TYPE; default classic.
	QueueType string
	// Prefetch is the channel's basic.qos prefetch count: unacknowledged
	// deliveries the broker lets the service hold. Env PREFETCH; default
	// WORKERS.
	Prefetch int
}

var queueNameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,200}$`)

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:      service.ReadCommon(r, ":8081", 1<<20),
		Postgres:    postgres.ReadConfig(r, "queue_rabbitmq"),
		Worker:      queue.ReadWorkerConfig(r),
		RabbitMQURL: r.URL("RABBITMQ_URL", "amqp://guest:guest@localhost:5672/", "amqp", "amqps"),
		DialTimeout: r.Duration("RABBITMQ_DIAL_TIMEOUT", 5*time.Second),
		Heartbeat:   r.Duration("RABBITMQ_HEARTBEAT", 10*time.Second),
		Queue:       r.String("RABBITMQ_QUEUE", "tasks"),
		QueueType:   r.Enum("QUEUE_TYPE", "classic", "classic", "quorum"),
	}
	c.Prefetch = r.Int("PREFETCH", max(c.Worker.Workers, 1))
	c.validate(r)
	return c, r.Err()
}

func (c Config) validate(r *config.Reader) {
	if c.DialTimeout <= 0 {
		r.Fail("RABBITMQ_DIAL_TIMEOUT", "must be positive, got %v", c.DialTimeout)
	}
	if c.Heartbeat < time.Second {
		r.Fail("RABBITMQ_HEARTBEAT", "must be at least 1s, got %v", c.Heartbeat)
	}
	if !queueNameRE.MatchString(c.Queue) {
		r.Fail("RABBITMQ_QUEUE", "%q is not a queue name (letters, digits, _ . : -)", c.Queue)
	}
	if c.Prefetch < 1 || c.Prefetch > 65535 {
		r.Fail("PREFETCH", "must be between 1 and 65535, got %d", c.Prefetch)
	}
}

// info names the service in /stats and /metrics.
var info = stats.Info{Service: "rabbitmq", Pair: "queue", Backend: "rabbitmq"}

// build connects the backends and assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	svc, _, err := assemble(ctx, cfg, logger)
	return svc, err
}

// assemble is build, also returning the queue (tests crash it and cut its
// connection).
func assemble(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, *mqQueue, error) {
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("queue"), logger)
	if err != nil {
		return nil, nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, queue.Latencies, queue.Counters)
	q := newMQQueue(pool, cfg, svc.Stats, svc.Logger)
	if err := q.Start(ctx); err != nil {
		pool.Close()
		return nil, nil, err
	}
	// OnStop hooks run in reverse: the consumers stop and the connection
	// closes before the pool does.
	svc.OnStop("postgres pool", func(context.Context) error { pool.Close(); return nil })
	svc.OnStop("rabbitmq consumers and connection", q.Stop)
	svc.Ready("postgres", postgres.Ping(pool))
	svc.Ready("rabbitmq", func(context.Context) error {
		if !q.connected() {
			return fmt.Errorf("connection down (reconnecting)")
		}
		return nil
	})
	queue.Mount(svc.Router, q, queue.Options{
		Stats: svc.Stats, Hub: q.hub, Stopping: svc.Stopping(),
		PayloadLimit: cfg.Worker.PayloadLimit, Faults: cfg.Worker.Faults,
	})
	return svc, q, nil
}

func main() { service.Start(readConfig, build) }
