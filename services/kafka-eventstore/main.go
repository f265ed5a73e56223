package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// self is the service's row in the pair table.
var self = pairs.Get("kafka-eventstore")

// Defaults and limits of Config; the docs' env table (docs/eventstore.md)
// is checked against them.
const (
	// DefaultBrokers is KAFKA_BROKERS' default, the stack's broker.
	DefaultBrokers = pairs.DefaultKafkaBrokers
	// DefaultTopic is KAFKA_TOPIC's default.
	DefaultTopic = "eventstore"
	// DefaultReplicationFactor is KAFKA_REPLICATION_FACTOR's default.
	DefaultReplicationFactor = 1
	// DefaultFetchMaxBytes is KAFKA_FETCH_MAX_BYTES' default;
	// MinFetchMaxBytes its smallest accepted value.
	DefaultFetchMaxBytes, MinFetchMaxBytes = 4 << 20, 64 << 10
	// DefaultLongPoll is KAFKA_FETCH_MAX_WAIT's default; MinLongPoll and
	// MaxLongPoll bound it.
	DefaultLongPoll, MinLongPoll, MaxLongPoll = 500 * time.Millisecond, 10 * time.Millisecond, 30 * time.Second
	// DefaultPartitions is KAFKA_PARTITIONS' default: one partition, the
	// reference's design; MaxPartitions its largest accepted value.
	DefaultPartitions, MaxPartitions = 1, 256
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8091),
	// BODY_LIMIT, the HTTP timeouts, LOG_LEVEL, LOG_FORMAT and
	// BACKEND_TIMEOUT, which bounds each Kafka request and must exceed
	// KAFKA_FETCH_MAX_WAIT.
	service.Common
	// Brokers are the bootstrap brokers. Env KAFKA_BROKERS
	// (comma-separated); default DefaultBrokers.
	Brokers []string
	// Topic holds every event; it is created with Partitions partitions
	// if missing, and a topic with another count is refused (the stream
	// to partition hash depends on the count). Env KAFKA_TOPIC; default
	// DefaultTopic.
	Topic string
	// Partitions is the topic's partition count. 1 is the reference's
	// design: the offset is a global order, and a point read scans every
	// event. More is the keyed design: a stream's records go to the
	// partition murmur2(stream id) picks (Kafka's default partitioner),
	// a point read scans that partition only, and a subscription merges
	// the partitions, ordered within each (docs/eventstore.md, *A keyed
	// Kafka store*). Env KAFKA_PARTITIONS; default DefaultPartitions, at
	// most MaxPartitions.
	Partitions int
	// ReplicationFactor is used when creating the topic (topic setting
	// replication.factor). Env KAFKA_REPLICATION_FACTOR; default
	// DefaultReplicationFactor.
	ReplicationFactor int
	// FetchMaxBytes caps one fetch response (fetch.max.bytes). Env
	// KAFKA_FETCH_MAX_BYTES; default DefaultFetchMaxBytes, at least
	// MinFetchMaxBytes.
	FetchMaxBytes int64
	// LongPoll is how long a live subscription's fetch waits on the broker
	// for new records (fetch.max.wait.ms). Env KAFKA_FETCH_MAX_WAIT;
	// default DefaultLongPoll, between MinLongPoll and MaxLongPoll.
	LongPoll time.Duration
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:            service.ReadCommon(r, self.Addr(), httpapi.DefaultBodyLimit),
		Topic:             r.String("KAFKA_TOPIC", DefaultTopic),
		ReplicationFactor: r.Int("KAFKA_REPLICATION_FACTOR", DefaultReplicationFactor),
		FetchMaxBytes:     r.Bytes("KAFKA_FETCH_MAX_BYTES", DefaultFetchMaxBytes),
		LongPoll:          r.Duration("KAFKA_FETCH_MAX_WAIT", DefaultLongPoll),
		Partitions:        r.Int("KAFKA_PARTITIONS", DefaultPartitions),
	}
	for _, b := range strings.Split(r.String("KAFKA_BROKERS", DefaultBrokers), ",") {
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
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		r.Fail("KAFKA_PARTITIONS", "must be between 1 and %d, got %d", MaxPartitions, c.Partitions)
	}
	if c.FetchMaxBytes < MinFetchMaxBytes {
		r.Fail("KAFKA_FETCH_MAX_BYTES", "must be at least %d bytes, got %d", MinFetchMaxBytes, c.FetchMaxBytes)
	}
	if c.LongPoll < MinLongPoll || c.LongPoll > MaxLongPoll {
		r.Fail("KAFKA_FETCH_MAX_WAIT", "must be between %v and %v, got %v", MinLongPoll, MaxLongPoll, c.LongPoll)
	}
	if c.BackendTimeout <= c.LongPoll {
		r.Fail("BACKEND_TIMEOUT", "must exceed KAFKA_FETCH_MAX_WAIT (%v), got %v", c.LongPoll, c.BackendTimeout)
	}
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

// build connects to Kafka, ensures the topic and assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	st, err := openStore(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, eventstore.LatencyNames, slices.Concat(eventstore.CounterNames, []string{SkippedCounter}))
	st.stats = svc.Stats
	svc.OnStop("kafka client", func(context.Context) error { st.close(); return nil })
	svc.ReadyBackend("kafka", "KAFKA_BROKERS", strings.Join(cfg.Brokers, ","), st.ping)
	eventstore.Mount(svc.Router, st, eventstore.Options{Stats: svc.Stats, Stopping: svc.Stopping(), Timeout: cfg.BackendTimeout})
	return svc, nil
}

func main() { service.Start(self, readConfig, build) }
