package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default :8091), BODY_LIMIT (default 1MiB), the
	// HTTP timeouts, LOG_LEVEL (info) and LOG_FORMAT (text).
	service.Common
	// Brokers are the bootstrap brokers. Env KAFKA_BROKERS
	// (comma-separated); default localhost:9092.
	Brokers []string
	// Topic holds every event; it is created with ONE partition if missing
	// (a topic with more partitions is refused: only within one partition
	// is the offset a global order). Env KAFKA_TOPIC; default "eventstore".
	Topic string
	// ReplicationFactor is used when creating the topic (topic setting
	// replication.factor). Env KAFKA_REPLICATION_FACTOR; default 1.
	ReplicationFactor int
	// FetchMaxBytes caps one fetch response (fetch.max.bytes). Env
	// KAFKA_FETCH_MAX_BYTES; default 4MiB.
	FetchMaxBytes int64
	// LongPoll is how long a live subscription's fetch waits on the broker
	// for new records (fetch.max.wait.ms). Env KAFKA_FETCH_MAX_WAIT;
	// default 500ms.
	LongPoll time.Duration
	// BackendTimeout bounds each Kafka request. Env BACKEND_TIMEOUT;
	// default 10s.
	BackendTimeout time.Duration
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:            service.ReadCommon(r, ":8091", 1<<20),
		Topic:             r.String("KAFKA_TOPIC", "eventstore"),
		ReplicationFactor: r.Int("KAFKA_REPLICATION_FACTOR", 1),
		FetchMaxBytes:     r.Bytes("KAFKA_FETCH_MAX_BYTES", 4<<20),
		LongPoll:          r.Duration("KAFKA_FETCH_MAX_WAIT", 500*time.Millisecond),
		BackendTimeout:    r.Duration("BACKEND_TIMEOUT", 10*time.Second),
	}
	for _, b := range strings.Split(r.String("KAFKA_BROKERS", "localhost:9092"), ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	validate(r, c)
	return c, r.Err()
}

// validate records out-of-range values, naming the variable.
func validate(r *config.Reader, c Config) {
	if len(c.Brokers) == 0 {
		r.Fail("KAFKA_BROKERS", "no broker given")
	}
	if c.Topic == "" || len(c.Topic) > 249 || strings.Trim(c.Topic, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		r.Fail("KAFKA_TOPIC", "%q is not a Kafka topic name ([a-zA-Z0-9._-], 1-249 characters)", c.Topic)
	}
	if c.ReplicationFactor < 1 {
		r.Fail("KAFKA_REPLICATION_FACTOR", "must be at least 1, got %d", c.ReplicationFactor)
	}
	if c.FetchMaxBytes < 64<<10 {
		r.Fail("KAFKA_FETCH_MAX_BYTES", "must be at least 64KiB, got %d", c.FetchMaxBytes)
	}
	if c.LongPoll < 10*time.Millisecond || c.LongPoll > 30*time.Second {
		r.Fail("KAFKA_FETCH_MAX_WAIT", "must be between 10ms and 30s, got %v", c.LongPoll)
	}
	if c.BackendTimeout <= c.LongPoll {
		r.Fail("BACKEND_TIMEOUT", "must exceed KAFKA_FETCH_MAX_WAIT (%v), got %v", c.LongPoll, c.BackendTimeout)
	}
}

// info names the service in /stats and /metrics.
var info = stats.Info{Service: "kafka-eventstore", Pair: "eventstore", Backend: "kafka"}

// build connects to Kafka, ensures the topic and assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	st, err := openStore(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, eventstore.LatencyNames, slices.Concat(eventstore.CounterNames, []string{SkippedCounter}))
	st.stats = svc.Stats
	svc.OnStop("kafka client", func(context.Context) error { st.close(); return nil })
	svc.Ready("kafka", st.ping)
	eventstore.Mount(svc.Router, st, eventstore.Options{Stats: svc.Stats, Stopping: svc.Stopping(), Timeout: cfg.BackendTimeout})
	return svc, nil
}

func main() { service.Start(readConfig, build) }
