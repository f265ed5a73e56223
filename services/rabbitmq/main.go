package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
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
	// DATABASE_SCHEMA (default "queue"; the business records live there),
	// DATABASE_MAX_CONNS (16) and DATABASE_CONNECT_TIMEOUT (5s).
	Postgres postgres.Config
	// RabbitMQURL is the AMQP 0-9-1 URL. Env RABBITMQ_URL; default
	// amqp://guest:guest@localhost:5672/ (the stack's broker).
	RabbitMQURL string
	// DialTimeout bounds the AMQP connection handshake (amqp091
	// Config.Dial). Env RABBITMQ_DIAL_TIMEOUT; default 5s.
	DialTimeout time.Duration
	// Heartbeat is the AMQP heartbeat interval, which detects a dead
	// broker connection. Env RABBITMQ_HEARTBEAT; default 10s.
	Heartbeat time.Duration
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:      service.ReadCommon(r, ":8081", 1<<20),
		Postgres:    postgres.ReadConfig(r, "queue"),
		RabbitMQURL: r.URL("RABBITMQ_URL", "amqp://guest:guest@localhost:5672/", "amqp", "amqps"),
		DialTimeout: r.Duration("RABBITMQ_DIAL_TIMEOUT", 5*time.Second),
		Heartbeat:   r.Duration("RABBITMQ_HEARTBEAT", 10*time.Second),
	}
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
}

// info names the service in /stats and /metrics.
var info = stats.Info{Service: "rabbitmq", Pair: "queue", Backend: "rabbitmq"}

// dial opens an AMQP connection with the configured timeouts.
func dial(c Config) (*amqp.Connection, error) {
	conn, err := amqp.DialConfig(c.RabbitMQURL, amqp.Config{
		Dial:       amqp.DefaultDial(c.DialTimeout),
		Heartbeat:  c.Heartbeat,
		Properties: amqp.Table{"connection_name": info.Service},
	})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq unreachable (RABBITMQ_URL): %w", err)
	}
	return conn, nil
}

// build connects the backends and assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("queue"), logger)
	if err != nil {
		return nil, err
	}
	conn, err := dial(cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, nil, nil)
	svc.OnStop("postgres pool", func(context.Context) error { pool.Close(); return nil })
	svc.OnStop("rabbitmq connection", func(context.Context) error {
		if err := conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
			return err
		}
		return nil
	})
	svc.Ready("postgres", postgres.Ping(pool))
	svc.Ready("rabbitmq", func(context.Context) error {
		if conn.IsClosed() {
			return errors.New("connection closed")
		}
		return nil
	})
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
