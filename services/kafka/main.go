package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default :8083), BODY_LIMIT (default 1MiB), the
	// HTTP timeouts, LOG_LEVEL (info) and LOG_FORMAT (text).
	service.Common
	// Postgres holds DATABASE_URL (default the stack's Postgres),
	// DATABASE_SCHEMA (default "log"; the events are recorded there too),
	// DATABASE_MAX_CONNS (16) and DATABASE_CONNECT_TIMEOUT (5s).
	Postgres postgres.Config
	// Brokers are the Kafka bootstrap servers. Env KAFKA_BROKERS, comma
	// separated; default localhost:9092 (the stack's broker).
	Brokers []string
	// DialTimeout bounds each broker connection (kafka-go Dialer.Timeout).
	// Env KAFKA_DIAL_TIMEOUT; default 5s.
	DialTimeout time.Duration
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:      service.ReadCommon(r, ":8083", 1<<20),
		Postgres:    postgres.ReadConfig(r, "log"),
		Brokers:     strings.Split(r.String("KAFKA_BROKERS", "localhost:9092"), ","),
		DialTimeout: r.Duration("KAFKA_DIAL_TIMEOUT", 5*time.Second),
	}
	c.validate(r)
	return c, r.Err()
}

func (c Config) validate(r *config.Reader) {
	for _, b := range c.Brokers {
		if _, port, ok := strings.Cut(strings.TrimSpace(b), ":"); !ok || port == "" {
			r.Fail("KAFKA_BROKERS", "%q is not host:port", b)
		}
	}
	if c.DialTimeout <= 0 {
		r.Fail("KAFKA_DIAL_TIMEOUT", "must be positive, got %v", c.DialTimeout)
	}
}

// info names the service in /stats and /metrics.
var info = stats.Info{Service: "kafka", Pair: "log", Backend: "kafka"}

// ping asks the first broker that answers for the cluster's brokers: a
// real metadata round trip, not just an open port.
func ping(c Config) func(context.Context) error {
	dialer := &kafkago.Dialer{Timeout: c.DialTimeout, ClientID: info.Service}
	return func(ctx context.Context) error {
		var errs []error
		for _, b := range c.Brokers {
			conn, err := dialer.DialContext(ctx, "tcp", strings.TrimSpace(b))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			_ = conn.SetDeadline(time.Now().Add(c.DialTimeout))
			brokers, err := conn.Brokers()
			_ = conn.Close()
			if err == nil && len(brokers) > 0 {
				return nil
			}
			errs = append(errs, fmt.Errorf("%s: metadata: %w", b, err))
		}
		return fmt.Errorf("kafka unreachable (KAFKA_BROKERS): %w", errors.Join(errs...))
	}
}

// build connects the backends and assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout*2)
	defer cancel()
	if err := ping(cfg)(pctx); err != nil {
		return nil, err
	}
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("log"), logger)
	if err != nil {
		return nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, nil, nil)
	svc.OnStop("postgres pool", func(context.Context) error { pool.Close(); return nil })
	svc.Ready("postgres", postgres.Ping(pool))
	svc.Ready("kafka", ping(cfg))
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
