package log

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// GroupConsumer is one non-default group's consumer as a GroupRunner runs
// it: a Kafka group's reader, a replication slot's stream.
type GroupConsumer interface {
	// Start begins consuming in the background.
	Start()
	// Stop ends it, finishing what it has in hand, within ctx.
	Stop(ctx context.Context) error
}

// GroupRunner is the part of a service's consumer-group manager that does
// not depend on where the groups live: every Poll it reads the groups
// table (Rows), starts a consumer (New) for each ready group that has none
// here and that this instance consumes (Consumes), hands a group that is
// still not ready PendingAfter after its creation to Pending (consumed
// here or not: its set-up is the group's, not its consumer's), and stops
// the consumers of groups that are gone.
// What a group is on the specialist or on Postgres (its Kafka group, its
// slot) stays in the service, in these hooks.
//
// Context: Start makes the runner's own context, ended by Halt (and so by
// Close); the loop and every hook the loop calls run under it (Rows and
// Pending under a ReadTimeout child of it), and work a hook starts in the
// background should derive from Context so that Halt ends it too.
//
// Concurrency: Run, Created, Removed and Consumers may be called from any
// goroutine (HTTP handlers, background set-ups) while the loop runs; they
// share one mutex, which no hook is called under except New (so New must
// not call back into the runner).
//
// Close rules: set the fields, then call Start once. Halt ends the loop
// (and Drain's work) and may be called more than once; Close halts and
// then stops every consumer within ctx. After Halt, Run starts nothing.
type GroupRunner[C GroupConsumer] struct {
	// Rows reads every group of the groups table.
	Rows func(ctx context.Context) ([]GroupRow, error)
	// New returns the (not started) consumer of group name.
	New func(name string) C
	// Consumes, if set, reports whether this instance consumes group name
	// (CONSUME_GROUPS, ConsumeGroups.Has): Run starts no consumer of a
	// group it refuses. Nil consumes every group. The groups Reconciled
	// gets are every group of the table all the same.
	Consumes func(name string) bool
	// Pending is called, on the loop, for a group that is not ready
	// PendingAfter after its creation (its creator died before its set-up
	// ended); ctx is the reconcile's, bounded by ReadTimeout.
	Pending func(ctx context.Context, g GroupRow)
	// Reconciled, if set, runs at the end of each reconcile with the
	// non-default groups the table holds; its error is the reconcile's.
	Reconciled func(ctx context.Context, want map[string]bool) error
	// Drain, if set, waits, in Halt after the loop ended, for work the
	// hooks started in the background.
	Drain func()
	// PendingAfter is how long after its creation a group that is not
	// ready is handed to Pending.
	PendingAfter time.Duration
	// Poll is how often the table is read (GROUP_POLL_INTERVAL).
	Poll time.Duration
	// ReadTimeout bounds each reconcile's read of the table and its
	// Pending calls.
	ReadTimeout time.Duration
	// StopTimeout bounds the stop of a consumer whose group is gone.
	StopTimeout time.Duration
	// Logger logs the reconciles that fail.
	Logger *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// deleted are the groups this instance deleted: a reconcile that read
	// the table before the DELETE does not start them again.
	deleted   map[string]bool
	consumers map[string]C
}

// Start begins the reconcile loop; its first reconcile runs at once.
func (r *GroupRunner[C]) Start() {
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.done = make(chan struct{})
	r.consumers, r.deleted = map[string]C{}, map[string]bool{}
	go r.loop()
}

// Context is the runner's context: it ends when Halt is called.
func (r *GroupRunner[C]) Context() context.Context { return r.ctx }

// Halt ends the loop, waits for it and for Drain, and leaves the consumers
// running (Take them, or Close instead).
func (r *GroupRunner[C]) Halt() {
	r.cancel()
	<-r.done
	if r.Drain != nil {
		r.Drain()
	}
}

// Take removes every consumer from the runner and returns them.
func (r *GroupRunner[C]) Take() map[string]C {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := r.consumers
	r.consumers = map[string]C{}
	return cs
}

// Close halts the runner and stops every consumer within ctx.
func (r *GroupRunner[C]) Close(ctx context.Context) error {
	r.Halt()
	var errs []error
	for _, c := range r.Take() {
		errs = append(errs, c.Stop(ctx))
	}
	return errors.Join(errs...)
}

func (r *GroupRunner[C]) loop() {
	defer close(r.done)
	t := time.NewTicker(r.Poll)
	defer t.Stop()
	for {
		if err := r.reconcile(r.ctx); err != nil && r.ctx.Err() == nil {
			r.Logger.Warn("reconciling consumer groups failed; retrying", "err", err, "in", r.Poll)
		}
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reconcile makes this instance's consumers match the groups table.
func (r *GroupRunner[C]) reconcile(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, r.ReadTimeout)
	defer cancel()
	rows, err := r.Rows(rctx)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, g := range rows {
		if g.Name == DefaultGroup {
			continue
		}
		want[g.Name] = true
		switch {
		case g.Ready:
			r.Run(g.Name)
		case time.Since(g.CreatedAt) > r.PendingAfter:
			r.Pending(rctx, g)
		}
	}
	r.mu.Lock()
	var gone []C
	for name, c := range r.consumers {
		if !want[name] {
			gone = append(gone, c)
			delete(r.consumers, name)
		}
	}
	r.mu.Unlock()
	for _, c := range gone {
		sctx, cancel := context.WithTimeout(ctx, r.StopTimeout)
		_ = c.Stop(sctx)
		cancel()
	}
	if r.Reconciled != nil {
		return r.Reconciled(ctx, want)
	}
	return nil
}

// Run starts group name's consumer here unless it runs, this instance
// does not consume the group (Consumes), the group was deleted here, or
// the runner is halted.
func (r *GroupRunner[C]) Run(name string) {
	if r.Consumes != nil && !r.Consumes(name) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.consumers[name]; ok || r.deleted[name] || r.ctx.Err() != nil {
		return
	}
	c := r.New(name)
	r.consumers[name] = c
	c.Start()
}

// Created forgets that group name was deleted here: call it once a PUT
// created it again.
func (r *GroupRunner[C]) Created(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.deleted, name)
}

// Removed marks group name deleted here (no reconcile starts it again)
// and returns its consumer, if one ran, for the caller to stop.
func (r *GroupRunner[C]) Removed(name string) (C, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted[name] = true
	c, ok := r.consumers[name]
	delete(r.consumers, name)
	return c, ok
}

// Consumers returns a copy of the running consumers, by group.
func (r *GroupRunner[C]) Consumers() map[string]C {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := make(map[string]C, len(r.consumers))
	for name, c := range r.consumers {
		cs[name] = c
	}
	return cs
}
