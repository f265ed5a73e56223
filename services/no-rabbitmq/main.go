package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// self is the service's row in the pair table.
var self = pairs.Get("no-rabbitmq")

// Defaults and limits of Config; the docs' env table (docs/queue.md) is
// checked against them.
const (
	// DefaultSchema is DATABASE_SCHEMA's default.
	DefaultSchema = "queue"
	// DefaultClaimBatch is CLAIM_BATCH's default: the rabbitmq side's
	// PREFETCH, so that an instance of either side holds about as many
	// tasks at once (WORKERS + CLAIM_BATCH against PREFETCH); with 64 the
	// window of 72, not the database, bounded processing under intake
	// (docs/queue.md, "Batch intake"). MaxClaimBatch is its largest
	// accepted value.
	DefaultClaimBatch, MaxClaimBatch = 256, 10000
	// DefaultClaimLinger is CLAIM_LINGER's default (the rabbitmq side's
	// RECORD_LINGER default); MaxClaimLinger its largest accepted value.
	DefaultClaimLinger, MaxClaimLinger = time.Millisecond, 100 * time.Millisecond
	// DefaultLease is LEASE's default; MinLease its smallest accepted
	// value.
	DefaultLease, MinLease = 30 * time.Second, 300 * time.Millisecond
	// DefaultPollInterval is POLL_INTERVAL's default; MinPollInterval its
	// smallest accepted value.
	DefaultPollInterval, MinPollInterval = time.Second, 10 * time.Millisecond
	// DefaultQueueTable is QUEUE_TABLE's default.
	DefaultQueueTable = "unlogged"
	// DefaultFanoutDesign is FANOUT_DESIGN's default: DesignCopies.
	DefaultFanoutDesign = DesignCopies
	// DefaultVacuumInterval is VACUUM_INTERVAL's default; MinVacuumInterval
	// its smallest accepted value but 0 (no vacuum by the service).
	DefaultVacuumInterval, MinVacuumInterval = time.Second, 100 * time.Millisecond
	// WorkerConns is the size of the queue machinery's own pool, beside
	// the DATABASE_MAX_CONNS of the requests: one connection each for the
	// fetcher (claims), the completer, the lease keeper, a rebuild, the
	// backlog count of MAX_BACKLOG and the vacuumer (VACUUM_INTERVAL),
	// each a sequential user, so none waits for a connection. Sharing the
	// requests' pool starved them under overload: every claim and every
	// completion queued behind hundreds of enqueues waiting for the same
	// 16 connections, and processing fell to a fifth of the accepted
	// rate.
	WorkerConns = 6
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8082),
	// BODY_LIMIT, the HTTP timeouts, BACKEND_TIMEOUT (each backend call
	// of a request), LOG_LEVEL and LOG_FORMAT.
	service.Common
	// Postgres holds DATABASE_URL, DATABASE_SCHEMA (default
	// DefaultSchema), DATABASE_MAX_CONNS and DATABASE_CONNECT_TIMEOUT.
	Postgres postgres.Config
	// Worker holds WORKERS, WORK_MS, RETRY_BASE, MAX_ATTEMPTS,
	// PAYLOAD_LIMIT, FAULTS and FANOUT, shared with the rabbitmq side
	// (defaults in package queue). A task of a kind with subscribers
	// (FANOUT) becomes its copies in the handler; the enqueue statement
	// inserts them with the rest of the request, in its one transaction.
	Worker queue.WorkerConfig
	// FanoutDesign is how a task of a kind with subscribers (FANOUT) is
	// stored, the contract the same either way (docs/queue.md,
	// "Fan-out"). copies (DesignCopies): one task row and one queue row
	// per subscriber, inserted by the enqueue statement. cursors
	// (DesignCursors): one fanout_messages row, read by a cursor per
	// subscriber below the xid watermark; only a copy that fails gets
	// rows of its own. Env FANOUT_DESIGN; default DefaultFanoutDesign.
	FanoutDesign string
	// Retention holds TASK_RETENTION (default
	// records.DefaultTaskRetention; 0 keeps every record),
	// RETENTION_INTERVAL and RETENTION_BATCH: done task records are
	// removed that long after processing, as on the other side of the
	// pair.
	Retention cleaner.Config
	// ListenURL is the connection string of the dedicated LISTEN
	// connection. It must reach Postgres directly: through pgbouncer in
	// transaction mode LISTEN succeeds and then silently receives nothing.
	// Env DATABASE_LISTEN_URL (formerly LISTEN_DATABASE_URL, still read
	// with a warning); default DATABASE_URL.
	ListenURL string
	// ClaimBatch is the most rows one claim statement takes (LIMIT of the
	// SKIP LOCKED select). Env CLAIM_BATCH; default DefaultClaimBatch, at
	// most MaxClaimBatch. The service holds
	// at most WORKERS + CLAIM_BATCH tasks at once, plus, with
	// FANOUT_DESIGN=cursors, up to CLAIM_BATCH copies per subscriber's
	// batch (the most messages one batch reads).
	ClaimBatch int
	// ClaimLinger is how long the fetcher waits after a poke (an enqueue,
	// a completion freeing capacity, the listener's sweep) before it
	// claims, so that what comes meanwhile shares one claim statement (the
	// counterpart of the rabbitmq side's RECORD_LINGER): it adds up to
	// that much to the delivery latency. Wake-ups by the timer (next due
	// row, fallback poll) claim at once.
	// Env CLAIM_LINGER; default DefaultClaimLinger, at most
	// MaxClaimLinger; 0 claims at once.
	ClaimLinger time.Duration
	// Lease is how long a claimed task stays locked (queue_jobs.locked_until)
	// before another worker may rescue it; the service renews the leases of
	// the tasks it holds every Lease/3, so only a dead worker's lease
	// expires. Env LEASE; default DefaultLease, at least MinLease.
	Lease time.Duration
	// PollInterval is the fallback poll: the longest a task waits if every
	// notification is missed. Env POLL_INTERVAL; default
	// DefaultPollInterval, at least MinPollInterval.
	PollInterval time.Duration
	// QueueTable is the queue table's durability, applied at start with
	// ALTER TABLE queue_jobs SET UNLOGGED / SET LOGGED. unlogged: no WAL
	// for the queue (faster), emptied by crash recovery, not replicated,
	// not in base backups (the service rebuilds it from the logged task
	// records at start). logged: an ordinary table. Env QUEUE_TABLE;
	// default DefaultQueueTable.
	QueueTable string
	// VacuumInterval is how often the service vacuums queue_jobs itself
	// while tasks finish (vacuum.go: autovacuum comes at most once a
	// minute, and the claim walks every dead entry it leaves). Env
	// VACUUM_INTERVAL; default DefaultVacuumInterval, at least
	// MinVacuumInterval; 0 leaves the table to autovacuum.
	VacuumInterval time.Duration
	// Notify is how enqueues wake the workers of every instance
	// (NOTIFY_MODE, NOTIFY_INTERVAL): in commit mode, pg_notify in the
	// enqueue's transaction; debounced, after it. Either way this
	// instance's fetcher is poked directly.
	Notify pglisten.NotifyConfig
	// Admission holds MAX_BACKLOG (default queue.DefaultMaxBacklog, 0:
	// no bound) and BACKLOG_INTERVAL (default
	// queue.DefaultBacklogInterval), shared with the rabbitmq side: an
	// enqueue that would take the backlog, counted here as the rows of
	// queue_jobs (one per open task), past MAX_BACKLOG is shed with 503
	// before anything of it is recorded.
	Admission queue.AdmissionConfig
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:         service.ReadCommon(r, self.Addr(), httpapi.DefaultBodyLimit),
		Postgres:       postgres.ReadConfig(r, DefaultSchema),
		Worker:         queue.ReadWorkerConfig(r),
		Retention:      cleaner.ReadConfig(r, "TASK_RETENTION", records.DefaultTaskRetention),
		ClaimBatch:     r.Int("CLAIM_BATCH", DefaultClaimBatch),
		ClaimLinger:    r.Duration("CLAIM_LINGER", DefaultClaimLinger),
		Lease:          r.Duration("LEASE", DefaultLease),
		PollInterval:   r.Duration("POLL_INTERVAL", DefaultPollInterval),
		QueueTable:     r.Enum("QUEUE_TABLE", DefaultQueueTable, "unlogged", "logged"),
		FanoutDesign:   r.Enum("FANOUT_DESIGN", DefaultFanoutDesign, DesignCopies, DesignCursors),
		VacuumInterval: r.Duration("VACUUM_INTERVAL", DefaultVacuumInterval),
		Notify:         pglisten.ReadNotifyConfig(r),
		Admission:      queue.ReadAdmissionConfig(r),
	}
	r.Rename("LISTEN_DATABASE_URL", "DATABASE_LISTEN_URL")
	c.ListenURL = postgres.ReadListenURL(r, c.Postgres)
	c.validate(r)
	return c, r.Err()
}

func (c Config) validate(r *config.Reader) {
	if c.ClaimBatch < 1 || c.ClaimBatch > MaxClaimBatch {
		r.Fail("CLAIM_BATCH", "must be between 1 and %d, got %d", MaxClaimBatch, c.ClaimBatch)
	}
	if c.ClaimLinger < 0 || c.ClaimLinger > MaxClaimLinger {
		r.Fail("CLAIM_LINGER", "must be between 0 and %v, got %v", MaxClaimLinger, c.ClaimLinger)
	}
	if c.Lease < MinLease {
		r.Fail("LEASE", "must be at least %v, got %v", MinLease, c.Lease)
	}
	if c.PollInterval < MinPollInterval {
		r.Fail("POLL_INTERVAL", "must be at least %v, got %v", MinPollInterval, c.PollInterval)
	}
	if c.VacuumInterval != 0 && c.VacuumInterval < MinVacuumInterval {
		r.Fail("VACUUM_INTERVAL", "must be 0 (autovacuum only) or at least %v, got %v", MinVacuumInterval, c.VacuumInterval)
	}
	if _, err := pgx.ParseConfig(c.ListenURL); err != nil {
		r.Fail("DATABASE_LISTEN_URL", "not a Postgres connection string")
	}
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

// build connects and migrates the backend and assembles the service.
var build = service.WithoutParts(assemble)

// assemble is build, also returning the queue (tests crash it).
func assemble(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, *pgQueue, error) {
	pools, err := postgres.OpenPools(ctx, cfg.Postgres, migrations.MustFS("queue"), logger)
	if err != nil {
		return nil, nil, err
	}
	wpool, err := pools.Reserve(ctx, "workers'", WorkerConns)
	if err != nil {
		return nil, nil, err
	}
	// The debounced NOTIFYs get a connection of their own: queued behind
	// the requests' enqueues they would wake the workers late, the more so
	// the busier the service.
	npool, err := pools.ReserveNotify(ctx, cfg.Notify)
	if err != nil {
		return nil, nil, err
	}
	// The fan-out cursors' batches hold a transaction each while their
	// copies run: one connection per cursor.
	var cpool *pgxpool.Pool
	if n := len(newCursors(cfg)); n > 0 {
		if cpool, err = pools.Reserve(ctx, "fan-out cursors'", n); err != nil {
			return nil, nil, err
		}
	}
	svc := service.New(info, cfg.HTTP, logger, queue.Latencies, queue.Counters)
	q, err := newPGQueue(queuePools{requests: pools.Main, workers: wpool, notify: npool, cursors: cpool}, cfg, svc.Stats, svc.Logger)
	if err != nil {
		pools.Close()
		return nil, nil, err
	}
	if err := q.prepare(ctx); err != nil {
		pools.Close()
		return nil, nil, err
	}
	// OnStop hooks run in reverse, after the HTTP drain: the queue stops
	// (workers finish, the completions flush), then the last enqueues'
	// NOTIFY is flushed, then the pools close.
	pools.Register(svc)
	if npool != nil {
		svc.OnStop("notifier", q.notifier.Close)
	}
	svc.OnStop("queue workers", q.Stop)
	svc.Ready("listen", q.listenReady)
	admission := queue.NewAdmission(cfg.Admission, q.countBacklog, func() { svc.Stats.Inc(service.CounterShed) }, svc.Logger)
	q.admission = admission
	queue.Mount(svc.Router, q, queue.Options{
		Stats: svc.Stats, Hub: q.hub, Stopping: svc.Stopping(),
		PayloadLimit: cfg.Worker.PayloadLimit, Faults: cfg.Worker.Faults,
		Timeout: cfg.BackendTimeout, Admission: admission, Fanout: cfg.Worker.Fanout,
	})
	q.Start()
	if err := q.awaitListening(ctx, 2*cfg.Postgres.ConnectTimeout+time.Second); err != nil {
		_ = q.Stop(ctx)
		pools.Close()
		return nil, nil, err
	}
	svc.OnStop("backlog count (MAX_BACKLOG)", admission.Start())
	// Last: its Close hook runs first, before the pools close. With
	// cursors, the messages go first (a message is kept until every
	// subscriber has passed it), then the batch rows they leave.
	var jobs []cleaner.Job
	if cfg.FanoutDesign == DesignCursors {
		jobs = cursorCleanerJobs(pools.Main)
	}
	cleaner.Attach(svc, cfg.Retention, append(jobs, records.Store{Pool: pools.Main}.CleanerJob())...)
	return svc, q, nil
}

func main() { service.Start(self, readConfig, build) }
