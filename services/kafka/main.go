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
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// self is the service's row in the pair table.
var self = pairs.Get("kafka")

// Defaults and limits of Config; the docs' env table (docs/log.md) is
// checked against them.
const (
	// ConsumerConns is the size of the consumer's own pool, beside the
	// requests' DATABASE_MAX_CONNS: the consumer records one batch of
	// deliveries at a time, and under overload it must not wait for a
	// connection behind the writes it is delivering.
	ConsumerConns = 2
	// DefaultSchema is DATABASE_SCHEMA's default: a schema of its own so
	// that no-kafka's slot, which decodes log.messages, never sees this
	// service's rows when both run side by side.
	DefaultSchema = "log_kafka"
	// DefaultBrokers is KAFKA_BROKERS' default, the stack's broker.
	DefaultBrokers = pairs.DefaultKafkaBrokers
	// DefaultDialTimeout is KAFKA_DIAL_TIMEOUT's default.
	DefaultDialTimeout = 5 * time.Second
	// DefaultTopic is KAFKA_TOPIC's default.
	DefaultTopic = "log-events"
	// DefaultGroup is KAFKA_GROUP's default.
	DefaultGroup = "kafka-log"
	// DefaultPartitions is KAFKA_PARTITIONS' default; MaxPartitions its
	// largest accepted value.
	DefaultPartitions, MaxPartitions = 3, 1000
	// DefaultReplicationFactor is KAFKA_REPLICATION_FACTOR's default (the
	// stack has one broker).
	DefaultReplicationFactor = 1
	// DefaultMinInsyncReplicas is KAFKA_MIN_INSYNC_REPLICAS' default: 0,
	// the topic is created without its own min.insync.replicas and the
	// broker's applies (1 on the stack, 2 on the cluster profile).
	DefaultMinInsyncReplicas = 0
	// DefaultAcks is KAFKA_ACKS' default: acks=all.
	DefaultAcks = AcksAll
	// DefaultWriteTimeout is KAFKA_WRITE_TIMEOUT's default.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultBatchTimeout is KAFKA_BATCH_TIMEOUT's default.
	DefaultBatchTimeout = time.Millisecond
	// DefaultProducer is KAFKA_PRODUCER's default: franz-go.
	DefaultProducer = ProducerFranz
	// DefaultCommitInterval is KAFKA_COMMIT_INTERVAL's default: once a
	// second, as no-kafka confirms its slot (STANDBY_STATUS_INTERVAL).
	DefaultCommitInterval = time.Second
	// DefaultMaxGroups is MAX_GROUPS' default.
	DefaultMaxGroups = logc.DefaultMaxGroups
	// DefaultGroupPoll is GROUP_POLL_INTERVAL's default.
	DefaultGroupPoll = 2 * time.Second
)

// The producer's acknowledgements (KAFKA_ACKS).
const (
	// AcksAll is acks=all (franz-go AllISRAcks, with the idempotent
	// producer; kafka-go RequireAll): the leader answers once every
	// in-sync replica has the write, and refuses it when fewer than the
	// topic's min.insync.replicas are in sync.
	AcksAll = "all"
	// AcksLeader is acks=1 (franz-go LeaderAck, idempotence disabled as
	// franz-go requires; kafka-go RequireOne): the leader answers once it
	// has appended the write itself; a write acknowledged so and not yet
	// copied is lost if another replica takes over.
	AcksLeader = "1"
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8083),
	// BODY_LIMIT, the HTTP timeouts, BACKEND_TIMEOUT (each backend call
	// of a request), LOG_LEVEL and LOG_FORMAT.
	service.Common
	// Postgres holds DATABASE_URL, DATABASE_SCHEMA (default
	// DefaultSchema: the events are recorded there too),
	// DATABASE_MAX_CONNS and DATABASE_CONNECT_TIMEOUT.
	Postgres postgres.Config
	// Brokers are the Kafka bootstrap servers. Env KAFKA_BROKERS, comma
	// separated; default DefaultBrokers.
	Brokers []string
	// DialTimeout bounds each broker connection (kafka-go Dialer.Timeout).
	// Env KAFKA_DIAL_TIMEOUT; default DefaultDialTimeout.
	DialTimeout time.Duration
	// Topic is the event log (created at start if missing). Env
	// KAFKA_TOPIC; default DefaultTopic.
	Topic string
	// Group is the consumer group id; the group's committed offsets are
	// the consumer's position. Env KAFKA_GROUP; default DefaultGroup.
	Group string
	// Partitions is the topic's partition count when this service creates
	// it (num.partitions). Env KAFKA_PARTITIONS; default
	// DefaultPartitions, at most MaxPartitions.
	Partitions int
	// ReplicationFactor is the topic's replication factor when created.
	// Env KAFKA_REPLICATION_FACTOR; default DefaultReplicationFactor.
	ReplicationFactor int
	// MinInsyncReplicas is the topic's min.insync.replicas when this
	// service creates it; 0 leaves it to the broker's setting. When set,
	// a topic that exists with another value is refused at start. Env
	// KAFKA_MIN_INSYNC_REPLICAS; default DefaultMinInsyncReplicas, at
	// most ReplicationFactor.
	MinInsyncReplicas int
	// Acks is the producer's acknowledgement (AcksAll or AcksLeader).
	// Env KAFKA_ACKS; default DefaultAcks.
	Acks string
	// WriteTimeout bounds each produce: the answer (a 503 when it
	// passes), how long its records may wait in the producer (franz-go's
	// record context and RecordDeliveryTimeout, failing them when that is
	// safe) and the broker's wait for the replicas (ProduceRequestTimeout;
	// kafka-go: all attempts). It also bounds handing a batch's offsets to
	// the reader (the commit itself with KAFKA_COMMIT_INTERVAL=0). Env
	// KAFKA_WRITE_TIMEOUT; default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// BatchTimeout is the producer's linger (linger.ms; franz-go
	// ProducerLinger, kafka-go Writer.BatchTimeout): how long a
	// partition's first buffered record waits for others. franz-go's
	// ProduceSync ends the linger of its partitions once the request's
	// records are all buffered, so it never delays a request beyond that.
	// Env KAFKA_BATCH_TIMEOUT; default DefaultBatchTimeout.
	BatchTimeout time.Duration
	// Producer is the producer's library: ProducerFranz, or
	// ProducerKafkaGo, the producer before franz-go, kept only to measure
	// the two side by side in one load-driver run. Env KAFKA_PRODUCER;
	// default DefaultProducer.
	Producer string
	// CommitInterval is how often the consumers commit the offsets of the
	// batches they recorded (kafka-go ReaderConfig.CommitInterval); 0
	// commits synchronously after every batch, as before (kept to measure
	// it). A stop commits what was handled; a crash loses at most one
	// interval of commits, whose records are redelivered and
	// deduplicated. Env KAFKA_COMMIT_INTERVAL; default
	// DefaultCommitInterval.
	CommitInterval time.Duration
	// SynchronousCommit is the Postgres write's synchronous_commit (SET
	// LOCAL per transaction). Env SYNCHRONOUS_COMMIT (on, off, local,
	// remote_write, remote_apply); default logc.DefaultSynchronousCommit.
	SynchronousCommit string
	// MaxBatch caps the records the consumer records and commits at once.
	// Env CONSUMER_MAX_BATCH; default logc.DefaultMaxBatch, at most
	// logc.MaxMaxBatch.
	MaxBatch int
	// Retention holds EVENT_RETENTION (default
	// logc.DefaultEventRetention; 0 keeps every event),
	// RETENTION_INTERVAL and RETENTION_BATCH: delivered events and then
	// their deliveries rows are removed that long after delivery, as on
	// the other side of the pair.
	Retention cleaner.Config
	// MaxGroups bounds the consumer groups, the default one included;
	// each is a Kafka consumer group on the topic. Env MAX_GROUPS;
	// default DefaultMaxGroups, at most logc.MaxMaxGroups.
	MaxGroups int
	// GroupPoll is how often an instance reconciles its group readers
	// with the groups table (groups created or deleted through another
	// instance). Env GROUP_POLL_INTERVAL; default DefaultGroupPoll.
	GroupPoll time.Duration
	// ConsumeGroups is the groups other than the default one that this
	// instance consumes: every group (logc.AllGroups, "*") or a list. A
	// group not listed is created (its start offsets committed by PUT
	// here as by any instance), listed and deleted here like any other,
	// but no reader of it joins its Kafka group from this instance: the
	// instances that list it consume it (or none: it lags meanwhile). The
	// default group is always consumed. Env CONSUME_GROUPS; default
	// logc.AllGroups.
	ConsumeGroups logc.ConsumeGroups
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:      service.ReadCommon(r, self.Addr(), httpapi.DefaultBodyLimit),
		Postgres:    postgres.ReadConfig(r, DefaultSchema),
		Brokers:     strings.Split(r.String("KAFKA_BROKERS", DefaultBrokers), ","),
		DialTimeout: r.Duration("KAFKA_DIAL_TIMEOUT", DefaultDialTimeout),
		Topic:       r.String("KAFKA_TOPIC", DefaultTopic),
		Group:       r.String("KAFKA_GROUP", DefaultGroup),
		Partitions:  r.Int("KAFKA_PARTITIONS", DefaultPartitions),
		// Named so for the test: the one broker of the stack.
		ReplicationFactor: r.Int("KAFKA_REPLICATION_FACTOR", DefaultReplicationFactor),
		MinInsyncReplicas: r.Int("KAFKA_MIN_INSYNC_REPLICAS", DefaultMinInsyncReplicas),
		Acks:              r.Enum("KAFKA_ACKS", DefaultAcks, AcksAll, AcksLeader),
		WriteTimeout:      r.Duration("KAFKA_WRITE_TIMEOUT", DefaultWriteTimeout),
		BatchTimeout:      r.Duration("KAFKA_BATCH_TIMEOUT", DefaultBatchTimeout),
		Producer:          r.Enum("KAFKA_PRODUCER", DefaultProducer, ProducerFranz, ProducerKafkaGo),
		CommitInterval:    r.Duration("KAFKA_COMMIT_INTERVAL", DefaultCommitInterval),
		SynchronousCommit: r.Enum("SYNCHRONOUS_COMMIT", logc.DefaultSynchronousCommit, logc.SynchronousCommits...),
		MaxBatch:          r.Int("CONSUMER_MAX_BATCH", logc.DefaultMaxBatch),
		Retention:         cleaner.ReadConfig(r, "EVENT_RETENTION", logc.DefaultEventRetention),
		MaxGroups:         r.Int("MAX_GROUPS", DefaultMaxGroups),
		GroupPoll:         r.Duration("GROUP_POLL_INTERVAL", DefaultGroupPoll),
		ConsumeGroups:     logc.ReadConsumeGroups(r),
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
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		r.Fail("KAFKA_PARTITIONS", "must be between 1 and %d, got %d", MaxPartitions, c.Partitions)
	}
	if c.ReplicationFactor < 1 {
		r.Fail("KAFKA_REPLICATION_FACTOR", "must be at least 1, got %d", c.ReplicationFactor)
	}
	if c.MinInsyncReplicas < 0 || c.MinInsyncReplicas > max(c.ReplicationFactor, 1) {
		r.Fail("KAFKA_MIN_INSYNC_REPLICAS", "must be between 0 (the broker's setting) and KAFKA_REPLICATION_FACTOR (%d), got %d", c.ReplicationFactor, c.MinInsyncReplicas)
	}
	if c.WriteTimeout <= 0 {
		r.Fail("KAFKA_WRITE_TIMEOUT", "must be positive, got %v", c.WriteTimeout)
	}
	if c.BatchTimeout <= 0 {
		r.Fail("KAFKA_BATCH_TIMEOUT", "must be positive, got %v", c.BatchTimeout)
	}
	if c.CommitInterval < 0 {
		r.Fail("KAFKA_COMMIT_INTERVAL", "must be 0 (commit after every batch) or positive, got %v", c.CommitInterval)
	}
	if c.MaxBatch < 1 || c.MaxBatch > logc.MaxMaxBatch {
		r.Fail("CONSUMER_MAX_BATCH", "must be between 1 and %d, got %d", logc.MaxMaxBatch, c.MaxBatch)
	}
	if c.MaxGroups < 1 || c.MaxGroups > logc.MaxMaxGroups {
		r.Fail("MAX_GROUPS", "must be between 1 and %d, got %d", logc.MaxMaxGroups, c.MaxGroups)
	}
	if c.GroupPoll <= 0 {
		r.Fail("GROUP_POLL_INTERVAL", "must be positive, got %v", c.GroupPoll)
	}
}

var topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// info names the service in /stats and /metrics.
var info = service.Info(self)

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

// app is the assembled service's parts, for tests.
type app struct {
	backend  *backend
	consumer *consumer
	groups   *groupManager
}

// build connects the backends and assembles the service.
var build = service.WithoutParts(assemble)

// assemble is build, also returning the service's parts.
func assemble(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, *app, error) {
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout*2)
	defer cancel()
	if err := ping(cfg)(pctx); err != nil {
		return nil, nil, err
	}
	client := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Timeout: cfg.WriteTimeout,
		Transport: &kafkago.Transport{DialTimeout: cfg.DialTimeout, ClientID: info.Service}}
	slogger := logger.With("service", info.Service)
	if err := ensureTopic(ctx, cfg, client, slogger); err != nil {
		return nil, nil, err
	}
	maxBytes, err := describeTopic(ctx, cfg, client)
	if err != nil {
		return nil, nil, err
	}
	prod, err := newProducer(cfg, cfg.Brokers, maxBytes, slogger)
	if err != nil {
		return nil, nil, err
	}
	closeProducer := func() {
		cctx, cancel := context.WithTimeout(context.Background(), cfg.WriteTimeout)
		defer cancel()
		_ = prod.Close(cctx)
	}
	pools, err := postgres.OpenPools(ctx, cfg.Postgres, migrations.MustFS("log"), logger)
	if err != nil {
		closeProducer()
		return nil, nil, err
	}
	pool := pools.Main
	cpool, err := pools.Reserve(ctx, "consumer's", ConsumerConns)
	if err != nil {
		closeProducer()
		return nil, nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, logc.Latencies, logc.Counters)
	store := logc.NewRecords(pool, cfg.SynchronousCommit)
	hub := new(waiter.Hub)
	cons := &consumer{
		cfg:     cfg,
		deliver: &logc.Deliverer{Records: logc.NewRecords(cpool, cfg.SynchronousCommit), Hub: hub, Stats: svc.Stats},
		stats:   svc.Stats,
		logger:  svc.Logger,
		reader:  newReader(cfg, cfg.Group, svc.Logger),
	}
	b := &backend{cfg: cfg, store: store, client: client, cons: cons, logger: slogger, maxMessageBytes: maxBytes,
		probe: &kafkago.Transport{DialTimeout: cfg.DialTimeout, ClientID: info.Service}}
	b.swapProducer(prod)
	groups := &groupManager{cfg: cfg, b: b, records: logc.NewRecords(cpool, cfg.SynchronousCommit), hub: hub, stats: svc.Stats, logger: svc.Logger}
	b.groups = groups
	logc.Mount(svc.Router, b, logc.Options{Records: store, Hub: hub, Stats: svc.Stats, Stopping: svc.Stopping(), Timeout: cfg.BackendTimeout})
	// OnStop runs LIFO: the consumer (finishing and committing its batch,
	// leaving the group) and the producer stop before the pool closes.
	pools.Register(svc)
	svc.OnStop("kafka producer", func(ctx context.Context) error { return b.producing().Close(ctx) })
	svc.OnStop("kafka consumer", cons.Stop)
	svc.ReadyBackend("kafka", "KAFKA_BROKERS", strings.Join(cfg.Brokers, ","), ping(cfg))
	cons.Start()
	groups.start()
	svc.OnStop("consumer groups", groups.stop)
	// Last: its Close hook runs first, before the pools close.
	cleaner.Attach(svc, cfg.Retention, store.CleanerJobs()...)
	return svc, &app{backend: b, consumer: cons, groups: groups}, nil
}

func main() { service.Start(self, readConfig, build) }
