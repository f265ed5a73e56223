package cleaner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Defaults and limits of Config.
const (
	// DefaultInterval is RETENTION_INTERVAL's default; MinInterval its
	// smallest accepted value.
	DefaultInterval, MinInterval = time.Minute, 10 * time.Millisecond
	// DefaultBatch is RETENTION_BATCH's default: rows per delete
	// statement. MaxBatch is its largest accepted value.
	DefaultBatch, MaxBatch = 1000, 100000
	// StatementTimeout bounds each delete statement.
	StatementTimeout = 30 * time.Second
)

// Names in /stats.
const (
	// StatRemovedPrefix + a job's name counts the rows the job removed.
	StatRemovedPrefix = "retention_removed_"
	// StatPasses counts finished passes (with or without errors).
	StatPasses = "retention_passes"
	// StatErrors counts failed delete statements.
	StatErrors = "retention_errors"
	// StatLastRun is the Unix time, in seconds, at which the last pass
	// ended (0 before the first pass and after POST /stats/reset).
	StatLastRun = "retention_last_run_unix"
	// StatBatch is the latency of each delete statement.
	StatBatch = "retention_batch"
)

// Config is a cleaner's pacing and its retention.
type Config struct {
	// Retention is how long a finished record is kept; zero keeps
	// everything (the cleaner does not run). Env: the pair's variable
	// (TASK_RETENTION, EVENT_RETENTION), read by ReadConfig.
	Retention time.Duration
	// Interval is the pause between passes. Env RETENTION_INTERVAL;
	// default DefaultInterval, at least MinInterval.
	Interval time.Duration
	// Batch is the most rows one delete statement removes. Env
	// RETENTION_BATCH; default DefaultBatch, between 1 and MaxBatch.
	Batch int
}

// ReadConfig reads Config: the retention from retentionVar (default
// defRetention; "0s" disables the cleaner), RETENTION_INTERVAL and
// RETENTION_BATCH, and records an error naming each bad variable.
func ReadConfig(r *config.Reader, retentionVar string, defRetention time.Duration) Config {
	c := Config{
		Retention: r.Duration(retentionVar, defRetention),
		Interval:  r.Duration("RETENTION_INTERVAL", DefaultInterval),
		Batch:     r.Int("RETENTION_BATCH", DefaultBatch),
	}
	if c.Retention < 0 {
		r.Fail(retentionVar, "must not be negative (0 keeps everything), got %v", c.Retention)
	}
	if c.Interval < MinInterval {
		r.Fail("RETENTION_INTERVAL", "must be at least %v, got %v", MinInterval, c.Interval)
	}
	if c.Batch < 1 || c.Batch > MaxBatch {
		r.Fail("RETENTION_BATCH", "must be between 1 and %d, got %d", MaxBatch, c.Batch)
	}
	return c
}

// Job is one kind of row a cleaner removes.
type Job struct {
	// Name names the job in /stats (StatRemovedPrefix+Name) and logs:
	// the table it deletes from.
	Name string
	// Delete removes at most limit rows whose retention (olderThan) is
	// over, and returns how many it removed. It must never remove a row
	// that is not finished, whatever olderThan. ctx carries the
	// statement's deadline.
	Delete func(ctx context.Context, olderThan time.Duration, limit int) (int64, error)
}

// Execer runs one statement; *pgxpool.Pool satisfies it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// SQLJob is the Job of a Postgres table: its Delete runs sql on db with
// $1 the retention in microseconds (olderThan.Microseconds()) and $2 the
// limit, and returns the rows it affected. sql must remove at most $2
// finished rows older than $1, and never an unfinished one, whatever $1.
func SQLJob(name string, db Execer, sql string) Job {
	return Job{Name: name, Delete: func(ctx context.Context, olderThan time.Duration, limit int) (int64, error) {
		tag, err := db.Exec(ctx, sql, olderThan.Microseconds(), limit)
		return tag.RowsAffected(), err
	}}
}

// Cleaner runs its jobs' deletes in bounded batches, one pass per
// interval, until Close. Safe for concurrent use.
type Cleaner struct {
	cfg    Config
	jobs   []Job
	stats  *stats.Recorder
	logger *slog.Logger

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// New returns a cleaner of jobs; its counters appear in st at zero. Call
// Start to run it.
func New(cfg Config, st *stats.Recorder, logger *slog.Logger, jobs ...Job) *Cleaner {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	for _, n := range Counters(jobs...) {
		st.Add(n, 0)
	}
	return &Cleaner{cfg: cfg, jobs: jobs, stats: st, logger: logger.With("component", "cleaner")}
}

// Counters returns the /stats counter names a cleaner of jobs keeps.
func Counters(jobs ...Job) []string {
	names := []string{StatPasses, StatErrors, StatLastRun}
	for _, j := range jobs {
		names = append(names, StatRemovedPrefix+j.Name)
	}
	return names
}

// Start runs the loop in a goroutine: a first pass at once, then one per
// interval. It does nothing when the retention is zero, after Close, or
// when already started.
func (c *Cleaner) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed || c.cfg.Retention <= 0 {
		return
	}
	c.started = true
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go c.loop(ctx)
}

// Close stops the loop, cancelling a statement in flight, and waits for it
// to end or for ctx. Safe to call twice and without Start.
func (c *Cleaner) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cleaner did not stop: %w", ctx.Err())
	}
}

func (c *Cleaner) loop(ctx context.Context) {
	defer close(c.done)
	c.logger.Info("cleaner started", "retention", c.cfg.Retention, "interval", c.cfg.Interval, "batch", c.cfg.Batch)
	for {
		_, _ = c.RunOnce(ctx)
		if backoff.Sleep(ctx, c.cfg.Interval) != nil {
			return
		}
	}
}

// RunOnce runs one pass: each job deletes batches until one removes fewer
// than Batch rows, fails, or ctx ends. It returns the rows removed and the
// first error (a failed job does not stop the others). With a zero
// retention it removes nothing.
func (c *Cleaner) RunOnce(ctx context.Context) (int64, error) {
	if c.cfg.Retention <= 0 {
		return 0, nil
	}
	var total int64
	var first error
	for _, j := range c.jobs {
		n, err := c.runJob(ctx, j)
		total += n
		if err != nil && ctx.Err() == nil {
			c.stats.Inc(StatErrors)
			c.logger.Warn("retention delete failed", "job", j.Name, "removed", n, "err", err)
			if first == nil {
				first = fmt.Errorf("cleaner %s: %w", j.Name, err)
			}
		} else if n > 0 {
			c.logger.Info("removed rows past retention", "job", j.Name, "removed", n, "retention", c.cfg.Retention)
		}
	}
	if ctx.Err() != nil {
		return total, ctx.Err()
	}
	c.stats.Inc(StatPasses)
	c.markRun(time.Now().Unix())
	return total, first
}

// runJob deletes j's rows in batches until a batch is short.
func (c *Cleaner) runJob(ctx context.Context, j Job) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		start := time.Now()
		sctx, cancel := context.WithTimeout(ctx, StatementTimeout)
		n, err := j.Delete(sctx, c.cfg.Retention, c.cfg.Batch)
		cancel()
		if err != nil {
			return total, err
		}
		c.stats.Since(StatBatch, start)
		total += n
		c.stats.Add(StatRemovedPrefix+j.Name, n)
		if n < int64(c.cfg.Batch) {
			return total, nil
		}
	}
	return total, ctx.Err()
}

// markRun sets StatLastRun to unix. Recorder counters only add, and POST
// /stats/reset zeroes them, so the delta is taken from the counter's
// current value.
func (c *Cleaner) markRun(unix int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.stats.Snapshot().Counters[StatLastRun]
	if d := unix - cur; d > 0 {
		c.stats.Add(StatLastRun, d)
	}
}

// Attach creates the service's cleaner of jobs on its /stats, registers
// Close as an OnStop hook and starts it. Call it last in a service's
// assembly, after the pool the jobs use is registered, so that the hooks,
// which run in reverse, stop the cleaner before that pool closes.
func Attach(svc *service.Service, cfg Config, jobs ...Job) *Cleaner {
	c := New(cfg, svc.Stats, svc.Logger, jobs...)
	svc.OnStop("retention cleaner", c.Close)
	c.Start()
	return c
}
