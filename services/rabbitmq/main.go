package main

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// self is the service's row in the pair table.
var self = pairs.Get("rabbitmq")

// Defaults and limits of Config; the docs' env table (docs/queue.md) is
// checked against them.
const (
	// DefaultSchema is DATABASE_SCHEMA's default: apart from no-rabbitmq's
	// "queue", so that both can run on one database.
	DefaultSchema = "queue_rabbitmq"
	// DefaultRabbitMQURL is RABBITMQ_URL's default, the stack's broker
	// (one node).
	DefaultRabbitMQURL = pairs.DefaultRabbitMQURL
	// DefaultDialTimeout is RABBITMQ_DIAL_TIMEOUT's default.
	DefaultDialTimeout = 5 * time.Second
	// DefaultHeartbeat is RABBITMQ_HEARTBEAT's default; MinHeartbeat its
	// smallest accepted value.
	DefaultHeartbeat, MinHeartbeat = 10 * time.Second, time.Second
	// DefaultQueue is RABBITMQ_QUEUE's default.
	DefaultQueue = "tasks"
	// DefaultQueueType is QUEUE_TYPE's default.
	DefaultQueueType = "classic"
	// DefaultQueueVersion is RABBITMQ_QUEUE_VERSION's default: classic
	// queues version 2, whose index and message store RabbitMQ 3.10
	// introduced as the cheaper successor of version 1 (the broker's own
	// default there, which a queue declared without x-queue-version
	// gets).
	DefaultQueueVersion = 2
	// DefaultPrefetch is PREFETCH's default: within the 100–300 range
	// RabbitMQ's consumer prefetch guide names for throughput, and four
	// record batches, so the intake can fill a batch while one is in the
	// workers and one is being completed.
	DefaultPrefetch = 256
	// MaxPrefetch is PREFETCH's largest accepted value (AMQP's is 16 bits).
	MaxPrefetch = 65535
	// DefaultRecordBatch is RECORD_BATCH's default, as no-rabbitmq's
	// CLAIM_BATCH; MaxRecordBatch its largest accepted value.
	DefaultRecordBatch, MaxRecordBatch = 64, 10000
	// DefaultRecordLinger is RECORD_LINGER's default; MaxRecordLinger its
	// largest accepted value.
	DefaultRecordLinger, MaxRecordLinger = time.Millisecond, time.Second
	// PipelineConns is the size of the consumer pipeline's own pool,
	// beside the requests' DATABASE_MAX_CONNS, as no-rabbitmq's
	// WorkerConns: the intake's and the completer's statements, with room
	// for one retry each, and the backlog count of MAX_BACKLOG. Without
	// it, 128 in-flight batch enqueues held the 16 shared connections and
	// the pipeline waited behind them: 328 tasks/s processed while
	// 11,778/s were accepted.
	PipelineConns = 5
	// DefaultPublishMode is PUBLISH_MODE's default: the dual write.
	DefaultPublishMode = PublishDualWrite
	// DefaultDeliveryMode is DELIVERY_MODE's default: persistent
	// messages, written to disk before their confirm.
	DefaultDeliveryMode = DeliveryPersistent
	// DefaultReconcileAfter is RECONCILE_AFTER's default: well above a
	// publish's confirm latency and the broker's normal backlog, so that
	// only a message that is missing, not one merely waiting, is
	// republished.
	DefaultReconcileAfter = time.Minute
	// DefaultReconcileInterval is RECONCILE_INTERVAL's default;
	// MinReconcileInterval its smallest accepted value.
	DefaultReconcileInterval, MinReconcileInterval = 10 * time.Second, 10 * time.Millisecond
	// DefaultReconcileBatch is RECONCILE_BATCH's default; MaxReconcileBatch
	// its largest accepted value.
	DefaultReconcileBatch, MaxReconcileBatch = 500, 10000
	// DefaultOutboxBatch is OUTBOX_BATCH's default; MaxOutboxBatch its
	// largest accepted value.
	DefaultOutboxBatch, MaxOutboxBatch = 256, 10000
	// RelayConns is the size of the outbox relay's and the reconciler's
	// own pool: each relay worker holds one connection for its claim's
	// transaction across the publish, and the reconciler one.
	RelayConns = relayWorkers + 1
)

// The values of PUBLISH_MODE.
const (
	// PublishDualWrite commits the record, then publishes.
	PublishDualWrite = "dual-write"
	// PublishOutbox commits the record and an outbox row in one
	// transaction; a relay publishes the row.
	PublishOutbox = "outbox"
	// PublishBrokerOnly publishes the task itself (a persistent,
	// confirmed message) and records nothing: the consumer records the
	// task when it first takes it (brokeronly.go).
	PublishBrokerOnly = "broker-only"
)

// The values of DELIVERY_MODE.
const (
	// DeliveryPersistent publishes the tasks' messages persistent
	// (delivery mode 2): a confirm means the message is on disk.
	DeliveryPersistent = "persistent"
	// DeliveryTransient publishes them transient (delivery mode 1): a
	// confirm means the queue holds the message in memory, and a broker
	// restart loses it; the task's record in Postgres stays, and the
	// reconciler publishes it again.
	DeliveryTransient = "transient"
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8081),
	// BODY_LIMIT, the HTTP timeouts, BACKEND_TIMEOUT (each backend call
	// of a request), LOG_LEVEL and LOG_FORMAT.
	service.Common
	// Postgres holds DATABASE_URL, DATABASE_SCHEMA (default
	// DefaultSchema: the business records live there),
	// DATABASE_MAX_CONNS and DATABASE_CONNECT_TIMEOUT.
	Postgres postgres.Config
	// Worker holds WORKERS, WORK_MS, RETRY_BASE, MAX_ATTEMPTS,
	// PAYLOAD_LIMIT, FAULTS and FANOUT, shared with the no-rabbitmq side
	// (defaults in package queue). Each kind with subscribers (FANOUT) has
	// a fanout exchange <queue>.fanout.<kind> and one durable queue per
	// subscriber, <queue>.fanout.<kind>@<subscriber>, each consumed on a
	// channel of its own with PREFETCH.
	Worker queue.WorkerConfig
	// Retention holds TASK_RETENTION (default
	// records.DefaultTaskRetention; 0 keeps every record),
	// RETENTION_INTERVAL and RETENTION_BATCH: done task records are
	// removed that long after processing, as on the other side of the
	// pair.
	Retention cleaner.Config
	// RabbitMQURLs are the AMQP 0-9-1 URLs of the broker's nodes: one,
	// or the nodes of one cluster, comma-separated. The service connects
	// to the first that answers; when its connection is lost it tries the
	// next node first, so that it carries on on another node of the
	// cluster when its own dies or is cut off (a quorum queue,
	// QUEUE_TYPE=quorum, is what survives a node). Env RABBITMQ_URL;
	// default DefaultRabbitMQURL.
	RabbitMQURLs []string
	// DialTimeout bounds the AMQP connection handshake (amqp091
	// Config.Dial). Env RABBITMQ_DIAL_TIMEOUT; default DefaultDialTimeout.
	DialTimeout time.Duration
	// Heartbeat is the AMQP heartbeat interval, which detects a dead
	// broker connection. Env RABBITMQ_HEARTBEAT; default DefaultHeartbeat,
	// at least MinHeartbeat.
	Heartbeat time.Duration
	// Queue names the work queue; the service also declares <queue>.dlx
	// (the dead-letter exchange), <queue>.dead and one <queue>.retry.<ms>
	// delay queue per backoff step. Env RABBITMQ_QUEUE; default
	// DefaultQueue.
	Queue string
	// QueueType is the x-queue-type of every queue: classic (one node) or
	// quorum (Raft-replicated). Env QUEUE_TYPE; default DefaultQueueType.
	QueueType string
	// QueueVersion is the x-queue-version of every classic queue the
	// service declares (the work queue, <queue>.dead, the delay queues
	// and the subscribers' queues): 1 or 2. Ignored with
	// QUEUE_TYPE=quorum, whose queues have no version (the broker refuses
	// the argument there). RabbitMQ does not change a queue's arguments:
	// a queue declared with another version, or before the service set
	// one, makes the start fail naming this variable. Env
	// RABBITMQ_QUEUE_VERSION; default DefaultQueueVersion.
	QueueVersion int
	// Prefetch is the channel's basic.qos prefetch count: unacknowledged
	// deliveries the broker lets the service hold. Env PREFETCH; default
	// DefaultPrefetch; at most MaxPrefetch. Below about 3×RecordBatch
	// batches cannot fill and wait out RecordLinger.
	Prefetch int
	// RecordBatch is the most deliveries (or outcomes) one Postgres
	// statement records: the consumer groups record writes across
	// workers. Env RECORD_BATCH; default DefaultRecordBatch, 1 to
	// MaxRecordBatch.
	RecordBatch int
	// RecordLinger is how long a batch waits to fill after its first
	// delivery (or outcome) before it is written anyway; 0 takes only
	// what is already there. Env RECORD_LINGER; default
	// DefaultRecordLinger, at most MaxRecordLinger.
	RecordLinger time.Duration
	// PublishMode is how an enqueue reaches the broker: PublishDualWrite
	// (commit the record, then publish with confirms; the broker must be
	// up, else 503 before anything is recorded), PublishOutbox (the
	// record and an outbox row commit in one transaction and the 202
	// follows the commit; a relay publishes the outbox rows in batches
	// with pipelined confirms and deletes them after the confirms, so
	// writes are accepted while the broker is down) or PublishBrokerOnly
	// (the task itself is the message, persistent and confirmed, and
	// nothing is recorded before the 202: the consumer records the task
	// when it first takes it, so GET /tasks/{id} answers 404 until then;
	// POST /payments stays the dual write, its payment row needing
	// Postgres anyway). Env PUBLISH_MODE; default DefaultPublishMode.
	PublishMode string
	// DeliveryMode is how the tasks' messages are published:
	// DeliveryPersistent, or DeliveryTransient, whose messages a broker
	// restart loses: the task records in Postgres are the durable truth
	// then, and the reconciler (RECONCILE_AFTER, which must be on)
	// publishes again what was lost. It applies to what an enqueue
	// publishes (directly, through the outbox relay, or again through
	// the reconciler); a retry's message is always persistent, because
	// the reconciler does not republish a task waiting for a retry.
	// Refused with QUEUE_TYPE=quorum, which keeps every message as a
	// persistent one. Env DELIVERY_MODE; default DefaultDeliveryMode.
	DeliveryMode string
	// ReconcileAfter is how long a task may stay queued and never
	// delivered before the reconciler publishes its message again (the
	// dual write's repair: a publish lost after its record committed);
	// 0 turns the reconciler off. Env RECONCILE_AFTER; default
	// DefaultReconcileAfter.
	ReconcileAfter time.Duration
	// ReconcileInterval is the pause between the reconciler's passes.
	// Env RECONCILE_INTERVAL; default DefaultReconcileInterval, at least
	// MinReconcileInterval.
	ReconcileInterval time.Duration
	// ReconcileBatch is the most records one reconciler statement claims
	// (a pass claims batches until one is short). Env RECONCILE_BATCH;
	// default DefaultReconcileBatch, 1 to MaxReconcileBatch.
	ReconcileBatch int
	// OutboxBatch is the most outbox rows the relay publishes per
	// transaction (PUBLISH_MODE=outbox). Env OUTBOX_BATCH; default
	// DefaultOutboxBatch, 1 to MaxOutboxBatch.
	OutboxBatch int
	// Admission holds MAX_BACKLOG (default queue.DefaultMaxBacklog, 0:
	// no bound) and BACKLOG_INTERVAL (default
	// queue.DefaultBacklogInterval), shared with the no-rabbitmq side: an
	// enqueue that would take the backlog, counted here as the open task
	// records (queued or running) in Postgres, past MAX_BACKLOG is shed
	// with 503 before anything of it is recorded or published. With
	// PUBLISH_MODE=broker-only the backlog is counted as the broker's
	// ready messages plus the running records (brokerBacklog).
	Admission queue.AdmissionConfig
}

var queueNameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,200}$`)

// maxAMQPName is the longest queue or exchange name AMQP 0-9-1 allows
// (a short string), in bytes.
const maxAMQPName = 255

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:       service.ReadCommon(r, self.Addr(), httpapi.DefaultBodyLimit),
		Postgres:     postgres.ReadConfig(r, DefaultSchema),
		Worker:       queue.ReadWorkerConfig(r),
		Retention:    cleaner.ReadConfig(r, "TASK_RETENTION", records.DefaultTaskRetention),
		RabbitMQURLs: r.URLs("RABBITMQ_URL", DefaultRabbitMQURL, "amqp", "amqps"),
		DialTimeout:  r.Duration("RABBITMQ_DIAL_TIMEOUT", DefaultDialTimeout),
		Heartbeat:    r.Duration("RABBITMQ_HEARTBEAT", DefaultHeartbeat),
		Queue:        r.String("RABBITMQ_QUEUE", DefaultQueue),
		QueueType:    r.Enum("QUEUE_TYPE", DefaultQueueType, "classic", "quorum"),
		QueueVersion: r.Int("RABBITMQ_QUEUE_VERSION", DefaultQueueVersion),
	}
	c.Prefetch = r.Int("PREFETCH", DefaultPrefetch)
	c.RecordBatch = r.Int("RECORD_BATCH", DefaultRecordBatch)
	c.RecordLinger = r.Duration("RECORD_LINGER", DefaultRecordLinger)
	c.PublishMode = r.Enum("PUBLISH_MODE", DefaultPublishMode, PublishDualWrite, PublishOutbox, PublishBrokerOnly)
	c.DeliveryMode = r.Enum("DELIVERY_MODE", DefaultDeliveryMode, DeliveryPersistent, DeliveryTransient)
	c.ReconcileAfter = r.Duration("RECONCILE_AFTER", DefaultReconcileAfter)
	c.ReconcileInterval = r.Duration("RECONCILE_INTERVAL", DefaultReconcileInterval)
	c.ReconcileBatch = r.Int("RECONCILE_BATCH", DefaultReconcileBatch)
	c.OutboxBatch = r.Int("OUTBOX_BATCH", DefaultOutboxBatch)
	c.Admission = queue.ReadAdmissionConfig(r)
	c.validate(r)
	return c, r.Err()
}

func (c Config) validate(r *config.Reader) {
	for i, u := range c.RabbitMQURLs {
		if j := slices.Index(c.RabbitMQURLs[:i], u); j >= 0 {
			r.Fail("RABBITMQ_URL", "entry %d repeats entry %d: list each node once", i+1, j+1)
		}
	}
	if c.DialTimeout <= 0 {
		r.Fail("RABBITMQ_DIAL_TIMEOUT", "must be positive, got %v", c.DialTimeout)
	}
	if c.Heartbeat < MinHeartbeat {
		r.Fail("RABBITMQ_HEARTBEAT", "must be at least %v, got %v", MinHeartbeat, c.Heartbeat)
	}
	if c.QueueVersion != 1 && c.QueueVersion != 2 {
		// Checked whatever QUEUE_TYPE says: a value that would be
		// refused on classic queues is a mistake on quorum ones too.
		r.Fail("RABBITMQ_QUEUE_VERSION", "must be 1 or 2 (classic queue versions; ignored with QUEUE_TYPE=quorum), got %d", c.QueueVersion)
	}
	if !queueNameRE.MatchString(c.Queue) {
		r.Fail("RABBITMQ_QUEUE", "%q is not a queue name (letters, digits, _ . : -)", c.Queue)
	}
	for _, kind := range c.Worker.Fanout.Kinds() {
		for _, sub := range c.Worker.Fanout.Subscribers(kind) {
			if name := fanoutQueue(c.Queue, kind, sub); len(name) > maxAMQPName {
				r.Fail("FANOUT", "the queue of %s, %q, is longer than RabbitMQ's %d bytes: shorten the names or RABBITMQ_QUEUE", queue.CopyKind(kind, sub), name, maxAMQPName)
			}
		}
	}
	if c.Prefetch < 1 || c.Prefetch > MaxPrefetch {
		r.Fail("PREFETCH", "must be between 1 and %d, got %d", MaxPrefetch, c.Prefetch)
	}
	if c.RecordBatch < 1 || c.RecordBatch > MaxRecordBatch {
		r.Fail("RECORD_BATCH", "must be between 1 and %d, got %d", MaxRecordBatch, c.RecordBatch)
	}
	if c.RecordLinger < 0 || c.RecordLinger > MaxRecordLinger {
		r.Fail("RECORD_LINGER", "must be between 0 and %v, got %v", MaxRecordLinger, c.RecordLinger)
	}
	if c.ReconcileAfter < 0 {
		r.Fail("RECONCILE_AFTER", "must not be negative (0 turns the reconciler off), got %v", c.ReconcileAfter)
	}
	if c.DeliveryMode == DeliveryTransient {
		switch {
		case c.ReconcileAfter == 0:
			r.Fail("DELIVERY_MODE", "transient needs the reconciler, which publishes again what a broker restart lost: set RECONCILE_AFTER above 0 (it is 0, off)")
		case c.QueueType == "quorum":
			r.Fail("DELIVERY_MODE", "transient changes nothing with QUEUE_TYPE=quorum: a quorum queue keeps every message as a persistent one")
		case c.PublishMode == PublishBrokerOnly:
			r.Fail("DELIVERY_MODE", "transient cannot go with PUBLISH_MODE=broker-only: the message is the only copy of the task there, and a broker restart would lose it with nothing to publish it again")
		}
	}
	if c.ReconcileInterval < MinReconcileInterval {
		r.Fail("RECONCILE_INTERVAL", "must be at least %v, got %v", MinReconcileInterval, c.ReconcileInterval)
	}
	if c.ReconcileBatch < 1 || c.ReconcileBatch > MaxReconcileBatch {
		r.Fail("RECONCILE_BATCH", "must be between 1 and %d, got %d", MaxReconcileBatch, c.ReconcileBatch)
	}
	if c.OutboxBatch < 1 || c.OutboxBatch > MaxOutboxBatch {
		r.Fail("OUTBOX_BATCH", "must be between 1 and %d, got %d", MaxOutboxBatch, c.OutboxBatch)
	}
}

// redactURLs is urls comma-separated, each with its password masked.
func redactURLs(urls []string) string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = service.Redact(u)
	}
	return strings.Join(out, ",")
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

// build connects the backends and assembles the service.
var build = service.WithoutParts(assemble)

// assemble is build, also returning the queue (tests crash it and cut its
// connection).
func assemble(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, *mqQueue, error) {
	pools, err := postgres.OpenPools(ctx, cfg.Postgres, migrations.MustFS("queue"), logger)
	if err != nil {
		return nil, nil, err
	}
	pool := pools.Main
	ppool, err := pools.Reserve(ctx, "consumer pipeline's", PipelineConns)
	if err != nil {
		return nil, nil, err
	}
	rpool, err := pools.Reserve(ctx, "outbox relay's and reconciler's", RelayConns)
	if err != nil {
		return nil, nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, queue.Latencies, append(slices.Clone(queue.Counters), CounterRepublished, CounterRelayed))
	q := newMQQueue(pool, ppool, cfg, svc.Stats, svc.Logger)
	q.relayPool = rpool
	count := records.Store{Pool: ppool}.CountOpen
	if cfg.PublishMode == PublishBrokerOnly {
		count = q.brokerBacklog // the broker holds the tasks not yet taken
	}
	admission := queue.NewAdmission(cfg.Admission, count, func() { svc.Stats.Inc(service.CounterShed) }, svc.Logger)
	q.admission = admission
	if err := q.Start(ctx); err != nil {
		pools.Close()
		return nil, nil, err
	}
	// OnStop hooks run in reverse: the consumers stop and the connection
	// closes before the pools do.
	pools.Register(svc)
	svc.OnStop("rabbitmq consumers and connection", q.Stop)
	svc.Ready("rabbitmq", func(context.Context) error {
		if q.connected() {
			return nil
		}
		if cfg.PublishMode == PublishOutbox {
			// Enqueues still commit (to the outbox) and the relay
			// publishes them on reconnect: the service does its job,
			// late, so it stays in rotation and says why it is late.
			return service.Degraded(service.Unreachable("rabbitmq", "RABBITMQ_URL", redactURLs(cfg.RabbitMQURLs),
				errors.New("connection down (reconnecting); enqueues are kept in the outbox until the relay can publish them")))
		}
		return service.Unreachable("rabbitmq", "RABBITMQ_URL", redactURLs(cfg.RabbitMQURLs), errors.New("connection down (reconnecting)"))
	})
	queue.Mount(svc.Router, q, queue.Options{
		Stats: svc.Stats, Hub: q.hub, Stopping: svc.Stopping(),
		PayloadLimit: cfg.Worker.PayloadLimit, Faults: cfg.Worker.Faults,
		Timeout: cfg.BackendTimeout, Admission: admission, Fanout: cfg.Worker.Fanout,
		LateRecords: cfg.PublishMode == PublishBrokerOnly,
	})
	svc.OnStop("backlog count (MAX_BACKLOG)", admission.Start())
	// Last: its Close hook runs first, before the pool closes.
	cleaner.Attach(svc, cfg.Retention, records.Store{Pool: pool}.CleanerJob())
	return svc, q, nil
}

func main() { service.Start(self, readConfig, build) }
