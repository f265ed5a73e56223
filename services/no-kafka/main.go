package main

import (
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// self is the service's row in the pair table.
var self = pairs.Get("no-kafka")

// Defaults and limits of Config; the docs' env table (docs/log.md) is
// checked against them.
const (
	// ConsumerConns is the size of the consumer's own pool, beside the
	// requests' DATABASE_MAX_CONNS: the consumer records one batch of
	// deliveries at a time, and under overload it must not wait for a
	// connection behind the writes it is delivering.
	ConsumerConns = 2
	// DefaultSchema is DATABASE_SCHEMA's default.
	DefaultSchema = "log"
	// DefaultSlot is SLOT_NAME's default.
	DefaultSlot = "no_kafka"
	// DefaultSlotPlugin is SLOT_PLUGIN's default: what every figure so
	// far measured, and the stack's 15 has it.
	DefaultSlotPlugin = PluginWal2json
	// DefaultStatusInterval is STANDBY_STATUS_INTERVAL's default
	// (pg_recvlogical --status-interval).
	DefaultStatusInterval = time.Second
	// DefaultSlotCreateTimeout is SLOT_CREATE_TIMEOUT's default.
	DefaultSlotCreateTimeout = 30 * time.Second
	// DefaultMaxGroups is MAX_GROUPS' default.
	DefaultMaxGroups = logc.DefaultMaxGroups
	// DefaultGroupPoll is GROUP_POLL_INTERVAL's default.
	DefaultGroupPoll = 2 * time.Second
	// DefaultGroupsDesign is GROUPS_DESIGN's default.
	DefaultGroupsDesign = DesignSlots
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8084),
	// BODY_LIMIT, the HTTP timeouts, BACKEND_TIMEOUT (each backend call
	// of a request), LOG_LEVEL and LOG_FORMAT.
	service.Common
	// Postgres holds DATABASE_URL, DATABASE_SCHEMA (default
	// DefaultSchema), DATABASE_MAX_CONNS and DATABASE_CONNECT_TIMEOUT.
	Postgres postgres.Config
	// ReplicationURL is where the consumer opens its replication
	// connection (the service adds replication=database). It must reach
	// Postgres directly, never through pgbouncer. Env REPLICATION_URL;
	// default DATABASE_URL. Server options may ride along, e.g.
	// ?options=-c%20wal_sender_timeout%3D10s.
	ReplicationURL string
	// Slot is the logical replication slot (created with SlotPlugin if
	// missing, persistent). One slot serves one consumer. With pgoutput
	// it also names the publication of the messages table. Env SLOT_NAME;
	// default DefaultSlot.
	Slot string
	// SlotPlugin is the logical decoding output plugin the slots are
	// created with and decoded as: PluginWal2json ("wal2json", an
	// extension the server must have) or PluginPgoutput ("pgoutput",
	// built into PostgreSQL; the service creates the publication it
	// needs). There is no "auto": a slot's plugin is fixed at its
	// creation, and a benchmark must say what it decoded, so the choice
	// is explicit; an existing slot of the other plugin stops the start
	// with an error naming SLOT_PLUGIN. Env SLOT_PLUGIN; default
	// DefaultSlotPlugin.
	SlotPlugin string
	// StatusInterval is how often the consumer sends a standby status
	// update (its confirmed position), besides answering the server's
	// keepalive requests at once; it must be well below the server's
	// wal_sender_timeout (default 60s). Env STANDBY_STATUS_INTERVAL;
	// default DefaultStatusInterval.
	StatusInterval time.Duration
	// SynchronousCommit is the write path's synchronous_commit (SET LOCAL
	// per transaction): off acknowledges before the WAL is flushed, and
	// logical decoding only sees flushed WAL, so delivery then waits for
	// the WAL writer (wal_writer_delay). Env SYNCHRONOUS_COMMIT (on, off,
	// local, remote_write, remote_apply); default
	// logc.DefaultSynchronousCommit.
	SynchronousCommit string
	// MaxBatch caps the events the consumer records in one deliveries
	// INSERT. Env CONSUMER_MAX_BATCH; default logc.DefaultMaxBatch, at
	// most logc.MaxMaxBatch.
	MaxBatch int
	// Retention holds EVENT_RETENTION (default
	// logc.DefaultEventRetention; 0 keeps every event),
	// RETENTION_INTERVAL and RETENTION_BATCH: delivered events and then
	// their deliveries rows are removed that long after delivery, as on
	// the other side of the pair.
	Retention cleaner.Config
	// SlotCreateTimeout bounds creating the slot at start (it waits for
	// transactions running at that moment to end). Env
	// SLOT_CREATE_TIMEOUT; default DefaultSlotCreateTimeout.
	SlotCreateTimeout time.Duration
	// MaxGroups bounds the consumer groups, the default one included;
	// each group other than the default one is a replication slot of its
	// own (which decodes all of the database's WAL) in design slots, a
	// row of group_cursors in design cursors. Env MAX_GROUPS; default
	// DefaultMaxGroups, at most logc.MaxMaxGroups.
	MaxGroups int
	// GroupsDesign is how the groups other than the default one are
	// served: DesignSlots ("slots"), a replication slot per group, or
	// DesignCursors ("cursors"), one cursor per group over the deliveries
	// the default group's slot records, read below the xid watermark
	// (cursors.go; docs/log.md, "Consumer groups"). In design cursors each
	// group's consumer, and one LISTEN per instance, hold a session of
	// their own on REPLICATION_URL. Groups are not carried from one design
	// to the other: delete them and create them again. Env GROUPS_DESIGN;
	// default DefaultGroupsDesign.
	GroupsDesign string
	// GroupPoll is how often an instance reconciles its group consumers
	// with the groups table (groups created or deleted through another
	// instance, set-ups left unfinished, slots of deleted groups). Env
	// GROUP_POLL_INTERVAL; default DefaultGroupPoll.
	GroupPoll time.Duration
	// ConsumeGroups is the groups other than the default one that this
	// instance consumes: every group (logc.AllGroups, "*") or a list. A
	// group not listed is created (its slot, or cursor row, made by PUT
	// here as by any instance, retaining from then on), listed and deleted
	// here like any other, and never dropped as an orphan, but its
	// consumer runs only on the instances that list it (or nowhere: it
	// lags meanwhile). The default group is always consumed. Env
	// CONSUME_GROUPS; default logc.AllGroups.
	ConsumeGroups logc.ConsumeGroups
}

var slotRE = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:            service.ReadCommon(r, self.Addr(), httpapi.DefaultBodyLimit),
		Postgres:          postgres.ReadConfig(r, DefaultSchema),
		Slot:              r.String("SLOT_NAME", DefaultSlot),
		SlotPlugin:        r.Enum("SLOT_PLUGIN", DefaultSlotPlugin, PluginWal2json, PluginPgoutput),
		StatusInterval:    r.Duration("STANDBY_STATUS_INTERVAL", DefaultStatusInterval),
		SynchronousCommit: r.Enum("SYNCHRONOUS_COMMIT", logc.DefaultSynchronousCommit, logc.SynchronousCommits...),
		MaxBatch:          r.Int("CONSUMER_MAX_BATCH", logc.DefaultMaxBatch),
		Retention:         cleaner.ReadConfig(r, "EVENT_RETENTION", logc.DefaultEventRetention),
		SlotCreateTimeout: r.Duration("SLOT_CREATE_TIMEOUT", DefaultSlotCreateTimeout),
		MaxGroups:         r.Int("MAX_GROUPS", DefaultMaxGroups),
		GroupPoll:         r.Duration("GROUP_POLL_INTERVAL", DefaultGroupPoll),
		ConsumeGroups:     logc.ReadConsumeGroups(r),
		GroupsDesign:      r.Enum("GROUPS_DESIGN", DefaultGroupsDesign, DesignSlots, DesignCursors),
	}
	c.ReplicationURL = r.URL("REPLICATION_URL", c.Postgres.URL, "postgres", "postgresql")
	c.validate(r)
	return c, r.Err()
}

func (c Config) validate(r *config.Reader) {
	if !slotRE.MatchString(c.Slot) {
		r.Fail("SLOT_NAME", "%q must be 1-63 characters of a-z, 0-9 and _", c.Slot)
	}
	if c.StatusInterval <= 0 {
		r.Fail("STANDBY_STATUS_INTERVAL", "must be positive, got %v", c.StatusInterval)
	}
	if c.MaxBatch < 1 || c.MaxBatch > logc.MaxMaxBatch {
		r.Fail("CONSUMER_MAX_BATCH", "must be between 1 and %d, got %d", logc.MaxMaxBatch, c.MaxBatch)
	}
	if c.SlotCreateTimeout <= 0 {
		r.Fail("SLOT_CREATE_TIMEOUT", "must be positive, got %v", c.SlotCreateTimeout)
	}
	if c.MaxGroups < 1 || c.MaxGroups > logc.MaxMaxGroups {
		r.Fail("MAX_GROUPS", "must be between 1 and %d, got %d", logc.MaxMaxGroups, c.MaxGroups)
	}
	if c.GroupPoll <= 0 {
		r.Fail("GROUP_POLL_INTERVAL", "must be positive, got %v", c.GroupPoll)
	}
	if u, err := url.Parse(c.ReplicationURL); err == nil && u.Port() == "6432" {
		r.Fail("REPLICATION_URL", "port 6432 is pgbouncer, which cannot carry replication: point it at Postgres")
	}
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

// backend appends with a plain INSERT: the WAL is the transport.
type backend struct {
	store    *logc.Records
	consumer *consumer
	groups   *groupManager
}

// PutGroup implements logc.GroupBackend.
func (b *backend) PutGroup(ctx context.Context, name, from string) (bool, error) {
	return b.groups.put(ctx, name, from)
}

// Groups implements logc.GroupBackend.
func (b *backend) Groups(ctx context.Context) (logc.GroupList, error) { return b.groups.list(ctx) }

// DeleteGroup implements logc.GroupBackend.
func (b *backend) DeleteGroup(ctx context.Context, name string) error {
	return b.groups.remove(ctx, name)
}

// Append implements logc.Backend.
func (b *backend) Append(ctx context.Context, events []logc.NewEvent) ([]logc.Created, error) {
	return b.store.Insert(ctx, events)
}

// Consumer implements logc.Backend.
func (b *backend) Consumer(ctx context.Context) (logc.ConsumerStatus, error) {
	return b.consumer.status(ctx)
}

// build connects and migrates the backend and assembles the service.
var build = service.WithoutParts(assemble)

// assemble is build, also returning the consumer, for tests.
func assemble(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, *consumer, error) {
	pools, err := postgres.OpenPools(ctx, cfg.Postgres, migrations.MustFS("log"), logger)
	if err != nil {
		return nil, nil, err
	}
	pool := pools.Main
	created, err := ensureSlot(ctx, cfg, pool, logger.With("service", info.Service))
	if err != nil {
		pools.Close()
		return nil, nil, err
	}
	cpool, err := pools.Reserve(ctx, "consumer's", ConsumerConns)
	if err != nil {
		return nil, nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, logc.Latencies, logc.Counters)
	store := logc.NewRecords(pool, cfg.SynchronousCommit)
	hub := new(waiter.Hub)
	cons := &consumer{
		cfg:     cfg,
		slot:    cfg.Slot,
		pool:    pool,
		deliver: &logc.Deliverer{Records: logc.NewRecords(cpool, cfg.SynchronousCommit), Hub: hub, Stats: svc.Stats},
		stats:   svc.Stats,
		logger:  svc.Logger,
	}
	groups := &groupManager{cfg: cfg, store: store, records: logc.NewRecords(cpool, cfg.SynchronousCommit), pool: pool,
		hub: hub, stats: svc.Stats, logger: svc.Logger, def: cons}
	cons.onAbort = groups.abort
	cons.onMissing = remakeSlot(cfg, pool, cpool, cons, svc.Logger)
	if cfg.GroupsDesign == DesignCursors {
		if err := announceToCursors(ctx, pools, groups, cons); err != nil {
			return nil, nil, err
		}
	}
	logc.Mount(svc.Router, &backend{store: store, consumer: cons, groups: groups}, logc.Options{Records: store, Hub: hub, Stats: svc.Stats, Stopping: svc.Stopping(), Timeout: cfg.BackendTimeout})
	// OnStop runs LIFO: the consumer stops (recording and confirming what
	// it read) before the pool it records with closes.
	pools.Register(svc)
	svc.OnStop("replication consumer", cons.Stop)
	svc.Ready("replication", cons.ready)
	if created {
		// A new slot streams nothing written before it: deliver what the
		// messages table holds undelivered (resync says why).
		n, err := resync(ctx, cpool, cons.deliver)
		if err != nil {
			pools.Close()
			return nil, nil, err
		}
		if n > 0 {
			svc.Logger.Warn("new replication slot: delivered the events written while no slot existed, from the messages table",
				"slot", cfg.Slot, "events", n)
		}
	}
	cons.Start()
	groups.start()
	svc.OnStop("consumer groups", groups.stop)
	if groups.notify != nil {
		l, err := groups.listen(ctx)
		if err != nil {
			cons.Abort()
			pools.Close()
			return nil, nil, err
		}
		svc.OnStop("cursor groups' notify", groups.notify.Close)
		svc.OnStop("cursor groups' listener", l.Close)
	}
	// Last: its Close hook runs first, before the pools close.
	cleaner.Attach(svc, cfg.Retention, store.CleanerJobs()...)
	return svc, cons, nil
}

// remakeSlot is the consumer's onMissing: the slot is made again, and
// the events it had not delivered are delivered from the messages table
// (resync), unless another instance made it first (that one resyncs).
func remakeSlot(cfg Config, pool, cpool *pgxpool.Pool, cons *consumer, logger *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		created, err := ensureSlot(ctx, cfg, pool, logger)
		if err != nil || !created {
			return err // !created: another instance made it, and resyncs
		}
		n, err := resync(ctx, cpool, cons.deliver)
		if err != nil {
			return err
		}
		logger.Warn("made the missing replication slot again and delivered the events it had not, from the messages table",
			"slot", cfg.Slot, "events", n)
		return nil
	}
}

// announceToCursors makes the default consumer's batches the shared log
// of the cursor groups: each one recorded wakes the cursor consumers,
// here and (debounced NOTIFY, on a connection of its own) on the other
// instances. The Debouncer's settings and log are groups'.
func announceToCursors(ctx context.Context, pools *postgres.Pools, groups *groupManager, cons *consumer) error {
	npool, err := pools.Reserve(ctx, "notify", 1)
	if err != nil {
		return err
	}
	cfg, logger := groups.cfg, groups.logger
	groups.notify = &pglisten.Debouncer{DB: npool, Channel: notifyChannel(cfg.Postgres.Schema), Timeout: cfg.BackendTimeout,
		OnError: func(err error) {
			logger.Warn("announcing the log's growth to the cursor groups failed; retrying", "err", err)
		}}
	cons.deliver.Records = announcing{DeliveryRecorder: cons.deliver.Records, after: groups.announce}
	return nil
}

func main() { service.Start(self, readConfig, build) }
