package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// task is one task record and what the workers need of it.
type task struct {
	rec       queue.Task
	payload   json.RawMessage
	failTimes int
	due       time.Time // a queued task is not claimed before
}

// Payment is one payment record.
type Payment struct {
	ID, TaskID string
	Amount     int64
	Currency   string
}

// Store holds the records that outlive an instance: tasks in enqueue
// order and payments. Safe for concurrent use; the zero value is empty.
type Store struct {
	mu       sync.Mutex
	tasks    map[string]*task
	order    []*task
	payments []Payment
}

// Task is one task record with its payload.
type Task struct {
	queue.Task
	Payload json.RawMessage
}

// Tasks returns a copy of every task record, in enqueue order.
func (s *Store) Tasks() []Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Task, len(s.order))
	for i, t := range s.order {
		out[i] = Task{Task: t.rec, Payload: t.payload}
	}
	return out
}

// Payments returns a copy of every payment record.
func (s *Store) Payments() []Payment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.payments)
}

// insertLocked records the tasks as queued; s.mu is held.
func (s *Store) insertLocked(tasks []queue.NewTask) {
	if s.tasks == nil {
		s.tasks = map[string]*task{}
	}
	for _, n := range tasks {
		t := &task{rec: queue.Task{ID: n.ID, Kind: n.Kind, Status: queue.StatusQueued, EnqueuedAt: n.EnqueuedAt},
			payload: n.Payload, failTimes: n.FailTimes, due: n.EnqueuedAt}
		s.tasks[n.ID] = t
		s.order = append(s.order, t)
	}
}

// Config is what a Backend's workers do: queue.WorkerConfig's meaning.
type Config struct {
	Workers     int
	Work        time.Duration
	RetryBase   time.Duration
	MaxAttempts int
}

// Backend is one instance's side of the pair on a Store: the handlers'
// calls, and Config.Workers workers that claim queued tasks. The records
// and the transport are one (as on no-rabbitmq), so Pay is atomic.
type Backend struct {
	store *Store
	cfg   Config
	hub   *waiter.Hub
	stats *stats.Recorder

	stopClaims context.CancelFunc // Stop: claim nothing more
	crash      context.CancelFunc // Crash: abandon the tasks held
	workers    sync.WaitGroup
}

var (
	_ queue.Backend        = (*Backend)(nil)
	_ queue.FinishedReader = (*Backend)(nil)
)

// New returns a Backend on s that wakes long polls on hub and records
// delivery and processing on st. Every task left running by an earlier
// instance (one that crashed) is queued again: only one instance runs on
// a Store at a time, so nobody else holds it. Call Start.
func New(s *Store, cfg Config, hub *waiter.Hub, st *stats.Recorder) *Backend {
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = queue.DefaultRetryBase
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = queue.DefaultMaxAttempts
	}
	s.mu.Lock()
	for _, t := range s.order {
		if t.rec.Status == queue.StatusRunning {
			t.rec.Status, t.due = queue.StatusQueued, time.Now()
		}
	}
	s.mu.Unlock()
	return &Backend{store: s, cfg: cfg, hub: hub, stats: st}
}

// Start runs the workers until Stop or Crash.
func (b *Backend) Start() {
	claims, stopClaims := context.WithCancel(context.Background())
	work, crash := context.WithCancel(context.Background())
	b.stopClaims, b.crash = stopClaims, crash
	for range b.cfg.Workers {
		b.workers.Go(func() { b.work(claims, work) })
	}
}

// Stop lets every worker finish the task it holds, then returns.
func (b *Backend) Stop() {
	b.stopClaims()
	b.workers.Wait()
	b.crash()
}

// Crash makes the workers drop the tasks they hold, unfinished and still
// running in the records, as a killed process would.
func (b *Backend) Crash() {
	b.crash()
	b.stopClaims()
	b.workers.Wait()
}

// claim takes the oldest due queued task, or returns nil.
func (b *Backend) claim() (t *task, attempt int) {
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, t := range s.order {
		if t.rec.Status == queue.StatusQueued && !t.due.After(now) {
			t.rec.Status = queue.StatusRunning
			t.rec.Attempts++
			if t.rec.DeliveredAt == nil {
				at := now.UTC()
				t.rec.DeliveredAt = &at
			}
			return t, t.rec.Attempts
		}
	}
	return nil, 0
}

func (b *Backend) work(claims, work context.Context) {
	for claims.Err() == nil {
		t, attempt := b.claim()
		if t == nil {
			select {
			case <-claims.Done():
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		b.stats.Inc(queue.CounterDelivered)
		if attempt == 1 {
			b.stats.Since(queue.LatencyDelivery, t.rec.EnqueuedAt)
		}
		err := queue.Work(work, b.cfg.Work, attempt, t.failTimes)
		if work.Err() != nil {
			return // crashed: the task stays running
		}
		b.finish(t, attempt, err)
	}
}

// finish records the outcome of an attempt.
func (b *Backend) finish(t *task, attempt int, err error) {
	s := b.store
	s.mu.Lock()
	now := time.Now().UTC()
	outcome := queue.Decide(err, attempt, b.cfg.MaxAttempts)
	if err != nil {
		msg := err.Error()
		t.rec.LastError = &msg
	}
	switch outcome {
	case queue.OutcomeDone:
		t.rec.Status, t.rec.ProcessedAt = queue.StatusDone, &now
	case queue.OutcomeRetry:
		t.rec.Status, t.due = queue.StatusQueued, now.Add(queue.Backoff(b.cfg.RetryBase, attempt))
	case queue.OutcomeDead:
		t.rec.Status = queue.StatusDead
	}
	enqueued := t.rec.EnqueuedAt
	s.mu.Unlock()
	switch outcome {
	case queue.OutcomeDone:
		b.stats.Inc(queue.CounterProcessed)
		b.stats.Since(queue.LatencyProcessing, enqueued)
	case queue.OutcomeRetry:
		b.stats.Inc(queue.CounterRetried)
		return
	case queue.OutcomeDead:
		b.stats.Inc(queue.CounterDead)
	}
	b.hub.Wake(t.rec.ID)
}

// Enqueue records the tasks as queued.
func (b *Backend) Enqueue(_ context.Context, tasks []queue.NewTask) error {
	b.store.mu.Lock()
	defer b.store.mu.Unlock()
	b.store.insertLocked(tasks)
	return nil
}

// Pay records the payment and its task together; with fault set it
// records neither, as a transaction that never committed.
func (b *Backend) Pay(_ context.Context, p queue.NewPayment, fault bool) error {
	if fault {
		return queue.ErrFaultInjected
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.payments = append(s.payments, Payment{ID: p.ID, TaskID: p.Task.ID, Amount: p.Amount, Currency: p.Currency})
	s.insertLocked([]queue.NewTask{p.Task})
	return nil
}

// Get returns the task's record.
func (b *Backend) Get(_ context.Context, id string) (queue.Task, error) {
	b.store.mu.Lock()
	defer b.store.mu.Unlock()
	t, ok := b.store.tasks[id]
	if !ok {
		return queue.Task{}, fmt.Errorf("task %s: %w", id, httpapi.ErrNotFound)
	}
	return t.rec, nil
}

// Finished returns those of ids whose task is done or dead
// (queue.FinishedReader: the waits share their re-reads, as on the
// services).
func (b *Backend) Finished(_ context.Context, ids []string) ([]string, error) {
	b.store.mu.Lock()
	defer b.store.mu.Unlock()
	var out []string
	for _, id := range ids {
		if t, ok := b.store.tasks[id]; ok && t.rec.Terminal() {
			out = append(out, id)
		}
	}
	return out, nil
}

// Depth counts the tasks by status.
func (b *Backend) Depth(context.Context) (queue.Depth, error) {
	b.store.mu.Lock()
	defer b.store.mu.Unlock()
	var d queue.Depth
	var oldest time.Time
	for _, t := range b.store.order {
		switch t.rec.Status {
		case queue.StatusQueued:
			d.Queued++
			if oldest.IsZero() || t.rec.EnqueuedAt.Before(oldest) {
				oldest = t.rec.EnqueuedAt
			}
		case queue.StatusRunning:
			d.Running++
		case queue.StatusDead:
			d.Dead++
		}
	}
	if !oldest.IsZero() {
		d.OldestQueuedAgeSeconds = time.Since(oldest).Seconds()
	}
	return d, nil
}
