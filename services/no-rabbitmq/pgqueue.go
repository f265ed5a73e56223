package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// job is a claimed task in memory, from the fetcher to a worker.
type job struct {
	id         string
	attempts   int
	failTimes  int
	enqueuedAt time.Time
	// reply, for a copy run by a fan-out cursor's batch (cursor.go),
	// takes its outcome instead of the completer; buffered for the whole
	// batch, so a worker never waits on it.
	reply chan<- result
}

// result is a job's outcome, from a worker to the completer.
type result struct {
	job
	err error
}

// pgQueue is the Postgres-side queue: the queue.Backend for the handlers,
// and the in-process workers. Its Backend methods are safe for concurrent
// use. Start it once; Stop (graceful) or Crash ends it, once. Its code is
// split by concern (the package doc lists the files).
type pgQueue struct {
	records.Store
	// admission is the backlog bound (nil: none); finished tasks come
	// off its estimate (set before Start, read by the completers).
	admission *queue.Admission
	// pool serves the HTTP requests (Enqueue, Pay, the records); wpool,
	// of WorkerConns connections, serves the queue's own machinery
	// (claims, completions, leases, rebuilds), so that no number of
	// requests waiting for a connection can starve the workers.
	pool, wpool *pgxpool.Pool
	cfg         Config
	stats       *stats.Recorder
	log         *slog.Logger
	hub         *waiter.Hub
	channel     string // NOTIFY channel, per schema (notifyChannel)
	// notifier sends the debounced NOTIFYs (NOTIFY_MODE=debounced); nil
	// in commit mode, where the enqueue statement notifies.
	notifier *pglisten.Debouncer
	// listener keeps the LISTEN connection that wakes the fetcher
	// (listen.go), and reports its state to /readyz and the start.
	listener *pglisten.Listener
	// leases are the tasks claimed and not yet completed (lease.go).
	leases leases
	// cursors are the subscribers' readers of the cursors design
	// (FANOUT_DESIGN=cursors, cursor.go), none in the copies design;
	// cpool, one connection per cursor, holds their batches'
	// transactions.
	cursors []*cursor
	cpool   *pgxpool.Pool
	// watermarkWaits counts the cursor reads that found committed
	// messages waiting above the xid watermark (tests observe it).
	watermarkWaits atomic.Int64
	pipeline
	stages
}

// pipeline carries claimed tasks from the fetcher (claim.go) to the
// workers, and their outcomes to the completer (complete.go).
type pipeline struct {
	wake     chan struct{} // pokes the fetcher; capacity 1
	capacity int64         // WORKERS + CLAIM_BATCH: the most tasks held at once
	inflight atomic.Int64  // claimed, not yet completed
	finished atomic.Int64  // outcomes flushed (done, retried, dead) or given up: vacuum.go's churn
	vacuums  atomic.Int64  // vacuums of queue_jobs this instance ran (vacuum.go)
	jobs     chan job      // to the workers; never full (capacity)
	results  chan result   // to the completer; never full (capacity)
}

// stages stop the queue's goroutines in order (Stop): the fetcher and
// the listener, then the workers, then the completer and the lease
// keeper.
type stages struct {
	// fetchCtx ends the fetcher and the listener; hardCtx ends everything
	// at once (a crash, or a graceful stop past its deadline).
	fetchCtx, hardCtx       context.Context
	fetchCancel, hardCancel context.CancelFunc
	fetchers, workers       sync.WaitGroup
	completerDone           chan struct{}
	stopOnce                sync.Once
}

// queuePools are the queue's connection pools.
type queuePools struct {
	// requests serves the HTTP requests; workers the workers' machinery.
	requests, workers *pgxpool.Pool
	// notify, if not nil, carries the debounced NOTIFYs; cursors the
	// fan-out cursors' batches (nil without cursors).
	notify, cursors *pgxpool.Pool
}

// newPGQueue returns a stopped queue on pools.
func newPGQueue(pools queuePools, cfg Config, st *stats.Recorder, log *slog.Logger) (*pgQueue, error) {
	capacity := int64(cfg.Worker.Workers + cfg.ClaimBatch)
	pool, npool := pools.requests, pools.notify
	q := &pgQueue{
		Store: records.Store{Pool: pool}, pool: pool, wpool: pools.workers, cfg: cfg, stats: st, log: log,
		hub:     new(waiter.Hub),
		channel: notifyChannel(cfg.Postgres.Schema),
		pipeline: pipeline{
			wake:     make(chan struct{}, 1),
			capacity: capacity,
			jobs:     make(chan job, capacity),
			results:  make(chan result, capacity),
		},
		stages:  stages{completerDone: make(chan struct{})},
		cursors: newCursors(cfg),
		cpool:   pools.cursors,
	}
	if npool != nil {
		q.notifier = &pglisten.Debouncer{
			DB: npool, Channel: q.channel, Interval: cfg.Notify.Interval, Timeout: cfg.BackendTimeout,
			OnError: func(err error) { log.Warn("debounced NOTIFY failed; retrying", "err", err) },
		}
	}
	var err error
	if q.listener, err = q.newListener(); err != nil {
		return nil, err
	}
	q.fetchCtx, q.fetchCancel = context.WithCancel(context.Background())
	q.hardCtx, q.hardCancel = context.WithCancel(context.Background())
	return q, nil
}

// Start starts the listener, the fetcher, the vacuumer, the workers, the
// completer and the lease keeper. With WORKERS=0 it starts nothing: an
// API-only instance.
func (q *pgQueue) Start() {
	if q.cfg.Worker.Workers == 0 {
		close(q.completerDone)
		return
	}
	q.fetchers.Add(3)
	go func() { defer q.fetchers.Done(); q.listen(q.fetchCtx) }()
	go func() { defer q.fetchers.Done(); q.fetch(q.fetchCtx) }()
	go func() { defer q.fetchers.Done(); q.vacuumHot(q.fetchCtx) }()
	for _, c := range q.cursors {
		q.fetchers.Go(func() { q.follow(q.fetchCtx, c) })
	}
	for range q.cfg.Worker.Workers {
		q.workers.Go(q.work)
	}
	go q.complete()
	go q.renewLeases()
}

// Stop stops gracefully: no more claims, the workers finish what they hold
// and the completions are flushed. If ctx ends first, the remaining tasks
// are abandoned as in a crash: their leases expire and another instance
// rescues them.
func (q *pgQueue) Stop(ctx context.Context) error {
	q.stopOnce.Do(func() {
		q.fetchCancel()
		q.fetchers.Wait()
		close(q.jobs)
		workersDone := make(chan struct{})
		go func() { q.workers.Wait(); close(workersDone) }()
		queue.AwaitOrAbort(ctx, workersDone, q.hardCancel)
		close(q.results)
		queue.AwaitOrAbort(ctx, q.completerDone, q.hardCancel)
		q.hardCancel()
	})
	return nil
}

// Crash stops as a crash would: tasks in hand are neither completed nor
// released. For tests.
func (q *pgQueue) Crash() {
	q.hardCancel()
	_ = q.Stop(context.Background())
}

// poke wakes the fetcher; pokes before it looks coalesce into one.
func (q *pgQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}
