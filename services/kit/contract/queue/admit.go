package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// Defaults and limits of AdmissionConfig, the same on both sides.
const (
	// DefaultMaxBacklog is MAX_BACKLOG's default: 0, no bound (the queue
	// takes whatever it is offered, and the backlog grows without limit).
	DefaultMaxBacklog = 0
	// MinMaxBacklog is MAX_BACKLOG's smallest value other than 0: one
	// full batch (MaxBatch) always fits an empty queue.
	MinMaxBacklog = MaxBatch
	// MaxMaxBacklog is MAX_BACKLOG's largest accepted value.
	MaxMaxBacklog = 100_000_000
	// DefaultBacklogInterval is BACKLOG_INTERVAL's default: the least pause
	// between two counts of the backlog (Pause). MinBacklogInterval and
	// MaxBacklogInterval bound it.
	DefaultBacklogInterval = 100 * time.Millisecond
	MinBacklogInterval     = 10 * time.Millisecond
	MaxBacklogInterval     = 10 * time.Second
	// CountCostFactor paces the backlog counts: after a count that took
	// d, the next starts no sooner than CountCostFactor × d later (and
	// no sooner than BACKLOG_INTERVAL), so counting takes at most about a
	// tenth of one backend however large the backlog is.
	CountCostFactor = 10
)

// AdmissionConfig is the backlog bound of the enqueues, read with the same
// variable names and defaults on both sides.
type AdmissionConfig struct {
	// MaxBacklog is the most open tasks (queued, running, or waiting for
	// a retry) the queue may hold: an enqueue whose tasks would take the
	// backlog past it is shed (503, Retry-After, Error-Kind: shed) and
	// nothing of it is recorded. Env MAX_BACKLOG; default
	// DefaultMaxBacklog (0: no bound), else MinMaxBacklog to
	// MaxMaxBacklog.
	MaxBacklog int
	// BacklogInterval is the least pause between two counts of the
	// backlog (a slow count waits longer: Pause); between two counts, the
	// tasks this instance accepted are added to it and those it finished
	// taken off. Env BACKLOG_INTERVAL; default DefaultBacklogInterval,
	// MinBacklogInterval to MaxBacklogInterval.
	BacklogInterval time.Duration
}

// ReadAdmissionConfig reads AdmissionConfig and records an error naming
// each bad variable.
func ReadAdmissionConfig(r *config.Reader) AdmissionConfig {
	c := AdmissionConfig{
		MaxBacklog:      r.Int("MAX_BACKLOG", DefaultMaxBacklog),
		BacklogInterval: r.Duration("BACKLOG_INTERVAL", DefaultBacklogInterval),
	}
	c.validate(r)
	return c
}

func (c AdmissionConfig) validate(r *config.Reader) {
	if c.MaxBacklog != 0 && (c.MaxBacklog < MinMaxBacklog || c.MaxBacklog > MaxMaxBacklog) {
		r.Fail("MAX_BACKLOG", "must be 0 (no bound) or between %d (one full batch) and %d, got %d", MinMaxBacklog, MaxMaxBacklog, c.MaxBacklog)
	}
	if c.BacklogInterval < MinBacklogInterval || c.BacklogInterval > MaxBacklogInterval {
		r.Fail("BACKLOG_INTERVAL", "must be between %v and %v, got %v", MinBacklogInterval, MaxBacklogInterval, c.BacklogInterval)
	}
}

// BacklogCounter counts a side's open tasks (queued, running, or waiting
// for a retry). It may stop counting at limit and return limit.
type BacklogCounter func(ctx context.Context, limit int64) (int64, error)

// Admission sheds enqueues that would take the queue's backlog past
// MAX_BACKLOG, so that the intake cannot take the resources (CPU, WAL,
// locks) the workers need to process what was already accepted: at twice
// what the queue sustains, an unbounded intake accepts everything and the
// workers fall behind ever further; with the bound, once the backlog is
// full the intake follows the processed rate and the rest is shed, cheaply
// and before anything is recorded.
//
// The backlog is the side's own count (BacklogCounter), plus the tasks
// this instance accepted since that count began, plus the tasks of the
// enqueues it has admitted and not yet finished, minus the tasks this
// instance finished (Finished) since that count ended. Every error is an
// over-count (a task accepted while a count runs may be in it twice, one
// finished while a count runs is not taken off): it sheds early rather
// than late. What other instances accept or finish is seen at the next
// count.
//
// A count reads the whole backlog, so its cost grows with it (62 ms for
// 20,000 open tasks on the Postgres side under load here, taken every
// 100 ms: over half a CPU, the workers' CPU, and the queue processed a
// tenth of what it drained alone). Counts are therefore paced: the next
// one starts BACKLOG_INTERVAL or CountCostFactor times the last count's
// duration later, whichever is longer, so counting takes at most about
// 1/CountCostFactor of one backend; between counts the instance's own
// accepts and finishes keep the estimate current.
//
// A nil *Admission admits everything. Its methods are safe for concurrent
// use.
type Admission struct {
	max      int64
	interval time.Duration
	count    BacklogCounter
	onShed   func()
	logger   *slog.Logger

	counted  atomic.Int64 // the last count
	since    atomic.Int64 // tasks committed by this instance since that count began
	finished atomic.Int64 // tasks this instance finished since that count ended
	inflight atomic.Int64 // tasks of admitted enqueues not yet finished
	cost     atomic.Int64 // the last count's duration, in nanoseconds
	shed     atomic.Int64
	logged   atomic.Int64 // unix nanos of the last shed or count warning
}

// NewAdmission returns the Admission cfg describes, counting the backlog
// with count; nil when cfg.MaxBacklog is 0 (no bound). onShed, if set, is
// called once per shed request (the service counts it in /stats as shed);
// logger, if set, gets at most one warning a second.
func NewAdmission(cfg AdmissionConfig, count BacklogCounter, onShed func(), logger *slog.Logger) *Admission {
	if cfg.MaxBacklog <= 0 {
		return nil
	}
	return &Admission{max: int64(cfg.MaxBacklog), interval: cfg.BacklogInterval, count: count, onShed: onShed, logger: logger}
}

// Run counts the backlog at once and then after every Pause until ctx
// ends. A failed count keeps the last one (plus what was accepted since,
// minus what was finished) and is logged at most once a second.
func (a *Admission) Run(ctx context.Context) {
	if a == nil {
		return
	}
	a.Refresh(ctx)
	a.run(ctx)
}

// run counts the backlog until ctx ends, each count Pause after the last.
func (a *Admission) run(ctx context.Context) {
	t := time.NewTimer(a.Pause())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.Refresh(ctx)
		t.Reset(a.Pause())
	}
}

// Pause is how long Run waits after a count before the next:
// BACKLOG_INTERVAL, or CountCostFactor times the last count's duration
// when that is longer.
func (a *Admission) Pause() time.Duration {
	if a == nil {
		return 0
	}
	return max(a.interval, CountCostFactor*time.Duration(a.cost.Load()))
}

// Start counts the backlog once, so that an instance admits its first
// enqueue against a count (a new instance's tally is empty), then counts
// every BACKLOG_INTERVAL in a goroutine, and returns the function that
// stops that goroutine and waits for it, for the service's OnStop. On a nil *Admission it starts
// nothing.
func (a *Admission) Start() (stop func(context.Context) error) {
	if a == nil {
		return func(context.Context) error { return nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.Refresh(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.run(ctx) }()
	return func(context.Context) error { cancel(); <-done; return nil }
}

// Refresh counts the backlog once (Run calls it every interval).
func (a *Admission) Refresh(ctx context.Context) {
	if a == nil {
		return
	}
	// Committed before the count's snapshot: in it.
	before := a.since.Load()
	// Bounded: a slow count must not hold the start, nor let the
	// estimate go stale for long.
	cctx, cancel := context.WithTimeout(ctx, min(max(2*a.interval, time.Second), 5*time.Second))
	start := time.Now()
	n, err := a.count(cctx, a.max+1)
	cancel()
	a.cost.Store(int64(time.Since(start)))
	if err != nil {
		if ctx.Err() == nil {
			a.warn("counting the backlog failed; the last count stands", "err", err)
		}
		return
	}
	// Finished before the count ended: in it, or (while it ran) perhaps
	// not; either way no longer taken off, which can only over-count.
	finished := a.finished.Load()
	a.counted.Store(n)
	a.since.Add(-before)
	a.finished.Add(-finished)
}

// Finished takes n tasks off the backlog: this instance finished them
// (done or dead) since the last count. Sides call it where they count
// processed and dead tasks; it is safe on a nil *Admission.
func (a *Admission) Finished(n int) {
	if a == nil {
		return
	}
	a.finished.Add(int64(n))
}

// Backlog returns the backlog as admission sees it now: the last count,
// plus the tasks accepted since, plus those of admitted enqueues still
// running, minus those finished since.
func (a *Admission) Backlog() int64 {
	if a == nil {
		return 0
	}
	return max(a.counted.Load()+a.since.Load()+a.inflight.Load()-a.finished.Load(), 0)
}

// Shed returns how many requests the backlog bound shed.
func (a *Admission) Shed() int64 {
	if a == nil {
		return 0
	}
	return a.shed.Load()
}

// Admit reserves room for n tasks and reports whether they fit under
// MAX_BACKLOG. An admitted enqueue must call Done once it is finished.
func (a *Admission) Admit(n int) bool {
	if a == nil {
		return true
	}
	if a.inflight.Add(int64(n))+a.counted.Load()+a.since.Load()-a.finished.Load() > a.max {
		a.inflight.Add(-int64(n))
		return false
	}
	return true
}

// Done ends an admitted enqueue of n tasks; committed says whether they
// were recorded (a failed enqueue's tasks are left to the next count).
func (a *Admission) Done(n int, committed bool) {
	if a == nil {
		return
	}
	a.inflight.Add(-int64(n))
	if committed {
		a.since.Add(int64(n))
	}
}

// WriteShed answers a request Admit refused for n tasks: 503 with
// Retry-After, Error-Kind: shed and a {"error", "kind": "shed"} body
// saying that nothing of it was recorded.
func (a *Admission) WriteShed(w http.ResponseWriter, n int) {
	total := a.shed.Add(1)
	if a.onShed != nil {
		a.onShed()
	}
	backlog := a.Backlog()
	a.warn("backlog full: shedding enqueues with 503 (MAX_BACKLOG)", "max_backlog", a.max, "backlog", backlog, "shed_total", total)
	body, _ := json.Marshal(map[string]string{
		"error": fmt.Sprintf("backlog full: %d open tasks and %d more would pass MAX_BACKLOG (%d); nothing of this request was recorded, retry after %v",
			backlog, n, a.max, httpapi.ShedRetryAfter),
		"kind": string(httpapi.KindShed),
	})
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(int(httpapi.ShedRetryAfter/time.Second)))
	h.Set("Content-Type", "application/json")
	h.Set(httpapi.KindHeader, string(httpapi.KindShed))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(append(body, '\n'))
}

// warn logs msg at most once a second: under overload a line per shed
// would itself be a load.
func (a *Admission) warn(msg string, args ...any) {
	if a.logger == nil {
		return
	}
	now := time.Now().UnixNano()
	if last := a.logged.Load(); now-last >= int64(time.Second) && a.logged.CompareAndSwap(last, now) {
		a.logger.Warn(msg, args...)
	}
}
