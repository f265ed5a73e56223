package main

import (
	"context"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// renewSQL extends the leases of the rows this instance still holds.
const renewSQL = `
UPDATE queue_jobs SET run_at = now() + $2 * interval '1 millisecond', locked_until = now() + $2 * interval '1 millisecond'
 WHERE task_id = ANY($1::uuid[]) AND locked_until IS NOT NULL`

// leases is the set of tasks this instance has claimed and not yet
// completed: the lease keeper renews their leases (renewLeases), and a
// rebuild gives their queue rows back to this instance, leased. The zero
// value is empty and ready; safe for concurrent use.
type leases struct {
	mu   sync.Mutex
	held map[string]struct{}
}

// hold adds the claimed jobs.
func (l *leases) hold(jobs []job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = make(map[string]struct{}, len(jobs))
	}
	for _, j := range jobs {
		l.held[j.id] = struct{}{}
	}
}

// release removes the batch's tasks, completed or given up.
func (l *leases) release(batch []result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range batch {
		delete(l.held, r.id)
	}
}

// ids returns the held tasks' ids, in no order.
func (l *leases) ids() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.held))
	for id := range l.held {
		ids = append(ids, id)
	}
	return ids
}

// renewLeases extends the leases of held tasks every Lease/3 until the
// completer has finished (or a crash).
func (q *pgQueue) renewLeases() {
	t := time.NewTicker(q.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-q.completerDone:
			return
		case <-q.hardCtx.Done():
			return
		case <-t.C:
		}
		ids := q.leases.ids()
		if len(ids) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(q.hardCtx, q.cfg.Lease/3)
		_, err := q.wpool.Exec(ctx, renewSQL, postgres.UUIDs(ids), q.cfg.Lease.Milliseconds())
		cancel()
		if err != nil && q.hardCtx.Err() == nil {
			q.log.Warn("renewing leases failed", "tasks", len(ids), "err", err)
		}
	}
}
