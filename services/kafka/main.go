package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default :8083), BODY_LIMIT (default 1MiB), the
	// HTTP timeouts, LOG_LEVEL (info) and LOG_FORMAT (text).
	service.Common
	// Postgres holds DATABASE_URL (default the stack's Postgres),
	// DATABASE_SCHEMA (default "log_kafka": the events are recorded there
	// too, in a schema of its own so that no-kafka's slot, which decodes
	// log.messages, never sees this service's rows when both run side by
	// side), DATABASE_MAX_CONNS (16) and DATABASE_CONNECT_TIMEOUT (5s).
	Postgres postgres.Config
	// Brokers are the Kafka bootstrap servers. Env KAFKA_BROKERS, comma
	// separated; default localhost:9092 (the stack's broker).
	Brokers []string
	// DialTimeout bounds each broker connection (kafka-go Dialer.Timeout).
	// Env KAFKA_DIAL_TIMEOUT; default 5s.
	DialTimeout time.Duration
	// Topic is the event log (created at start if missing). Env
	// KAFKA_TOPIC; default log-events.
	Topic string
	// Group is the consumer group id; the group's committed offsets are
	// the consumer's position. Env KAFKA_GROUP; default kafka-log.
	Group string
	// Partitions is the topic's partition count when this service creates
	// it (num.partitions). Env KAFKA_PARTITIONS; default 3.
	Partitions int
	// ReplicationFactor is the topic's replication factor when created.
	// Env KAFKA_REPLICATION_FACTOR; default 1 (the stack has one broker).
	ReplicationFactor int
	// WriteTimeout bounds each produce (all attempts) and each offset
	// commit. Env KAFKA_WRITE_TIMEOUT; default 10s.
	WriteTimeout time.Duration
	// BatchTimeout is how long the producer waits to fill a batch
	// (kafka-go Writer.BatchTimeout, linger.ms). Env KAFKA_BATCH_TIMEOUT;
	// default 1ms.
	BatchTimeout time.Duration
	// SynchronousCommit is the Postgres write's synchronous_commit (SET
	// LOCAL per transaction). Env SYNCHRONOUS_COMMIT (on, off, local,
	// remote_write, remote_apply); default on.
	SynchronousCommit string
	// MaxBatch caps the records the consumer records and commits at once.
	// Env CONSUMER_MAX_BATCH; default 5000.
	MaxBatch int
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:      service.ReadCommon(r, ":8083", 1<<20),
		Postgres:    postgres.ReadConfig(r, "log_kafka"),
		Brokers:     strings.Split(r.String("KAFKA_BROKERS", "localhost:9092"), ","),
		DialTimeout: r.Duration("KAFKA_DIAL_TIMEOUT", 5*time.Second),
		Topic:       r.String("KAFKA_TOPIC", "log-events"),
		Group:       r.String("KAFKA_GROUP", "kafka-log"),
		Partitions:  r.Int("KAFKA_PARTITIONS", 3),
		// Named so for the test: the one broker of the stack.
		ReplicationFactor: r.Int("KAFKA_REPLICATION_FACTOR", 1),
		WriteTimeout:      r.Duration("KAFKA_WRITE_TIMEOUT", 10*time.Second),
		BatchTimeout:      r.Duration("KAFKA_BATCH_TIMEOUT", time.Millisecond),
		SynchronousCommit: r.Enum("SYNCHRONOUS_COMMIT", "on", logc.SynchronousCommits...),
		MaxBatch:          r.Int("CONSUMER_MAX_BATCH", 5000),
	}
	for i, b := range c.Brokers {
		c.Brokers[i] = strings.TrimSpace(b)
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
	if !topicRE.MatchString(c.Topic) {
		r.Fail("KAFKA_TOPIC", "%q must be 1-249 characters of a-z, A-Z, 0-9, '.', '_' and '-'", c.Topic)
	}
	if c.Group == "" {
		r.Fail("KAFKA_GROUP", "must not be empty")
	}
	if c.Partitions < 1 || c.Partitions > 1000 {
		r.Fail("KAFKA_PARTITIONS", "must be between 1 and 1000, got %d", c.Partitions)
	}
	if c.ReplicationFactor < 1 {
		r.Fail("KAFKA_REPLICATION_FACTOR", "must be at least 1, got %d", c.ReplicationFactor)
	}
	if c.WriteTimeout <= 0 {
		r.Fail("KAFKA_WRITE_TIMEOUT", "must be positive, got %v", c.WriteTimeout)
	}
	if c.BatchTimeout <= 0 {
		r.Fail("KAFKA_BATCH_TIMEOUT", "must be positive, got %v", c.BatchTimeout)
	}
	if c.MaxBatch < 1 || c.MaxBatch > 100000 {
		r.Fail("CONSUMER_MAX_BATCH", "must be between 1 and 100000, got %d", c.MaxBatch)
	}
}

var topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

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

// app is the assembled service with its parts, for tests.
type app struct {
	svc      *service.Service
	backend  *backend
	consumer *consumer
}

// build connects the backends and assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	a, err := assemble(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	return a.svc, nil
}

func assemble(ctx context.Context, cfg Config, logger *slog.Logger) (*app, error) {
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout*2)
	defer cancel()
	if err := ping(cfg)(pctx); err != nil {
		return nil, err
	}
	client := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Timeout: cfg.WriteTimeout,
		Transport: &kafkago.Transport{DialTimeout: cfg.DialTimeout, ClientID: info.Service}}
	if err := ensureTopic(ctx, cfg, client, logger.With("service", info.Service)); err != nil {
		return nil, err
	}
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("log"), logger)
	if err != nil {
		return nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, logc.Latencies, logc.Counters)
	store := logc.NewRecords(pool, cfg.SynchronousCommit)
	hub := new(waiter.Hub)
	cons := &consumer{
		cfg:     cfg,
		deliver: &logc.Deliverer{Records: store, Hub: hub, Stats: svc.Stats},
		stats:   svc.Stats,
		logger:  svc.Logger,
		reader:  newReader(cfg),
	}
	b := &backend{cfg: cfg, store: store, client: client, cons: cons}
	b.writer.Store(newWriter(cfg, cfg.Brokers))
	logc.Mount(svc.Router, b, logc.Options{Records: store, Hub: hub, Stats: svc.Stats, Stopping: svc.Stopping()})
	// OnStop runs LIFO: the consumer (finishing and committing its batch,
	// leaving the group) and the producer stop before the pool closes.
	svc.OnStop("postgres pool", func(context.Context) error { pool.Close(); return nil })
	svc.OnStop("kafka producer", func(context.Context) error { return b.writer.Load().Close() })
	svc.OnStop("kafka consumer", cons.Stop)
	svc.Ready("postgres", postgres.Ping(pool))
	svc.Ready("kafka", ping(cfg))
	cons.Start()
	return &app{svc: svc, backend: b, consumer: cons}, nil
}

func main() { service.Start(readConfig, build) }
