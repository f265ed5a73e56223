package log

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeConsumer records its start and stop.
type fakeConsumer struct{ started, stopped atomic.Bool }

func (c *fakeConsumer) Start()                     { c.started.Store(true) }
func (c *fakeConsumer) Stop(context.Context) error { c.stopped.Store(true); return nil }

// TestGroupRunnerFollowsTheTable: the runner starts a consumer for each
// ready non-default group, hands an old unready one to Pending, stops the
// consumers of groups gone from the table, does not start again a group
// deleted here, and stops every consumer on Close.
func TestGroupRunnerFollowsTheTable(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	rows := []GroupRow{{Name: DefaultGroup, Ready: true}, {Name: "a", Ready: true}, {Name: "b", Ready: true},
		{Name: "old", CreatedAt: time.Now().Add(-time.Hour)}, {Name: "young", CreatedAt: time.Now()}}
	pending := map[string]bool{}
	var reconciled atomic.Int64
	r := &GroupRunner[*fakeConsumer]{
		Rows: func(context.Context) ([]GroupRow, error) {
			mu.Lock()
			defer mu.Unlock()
			return append([]GroupRow(nil), rows...), nil
		},
		New: func(string) *fakeConsumer { return new(fakeConsumer) },
		Pending: func(_ context.Context, g GroupRow) {
			mu.Lock()
			defer mu.Unlock()
			pending[g.Name] = true
		},
		Reconciled: func(_ context.Context, want map[string]bool) error {
			if want[DefaultGroup] || !want["a"] {
				t.Errorf("Reconciled got %v, want the non-default groups", want)
			}
			reconciled.Add(1)
			return nil
		},
		PendingAfter: time.Minute, Poll: 10 * time.Millisecond, ReadTimeout: time.Second, StopTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	}
	r.Start()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("a and b running", func() bool { return len(r.Consumers()) == 2 })
	cs := r.Consumers()
	if cs["a"] == nil || cs["b"] == nil || !cs["a"].started.Load() {
		t.Fatalf("consumers %v, want a and b started", cs)
	}
	mu.Lock()
	if !pending["old"] || pending["young"] {
		t.Errorf("Pending got %v, want old only", pending)
	}
	rows = rows[:2] // b, old and young gone elsewhere
	mu.Unlock()
	waitFor("b stopped", func() bool { return cs["b"].stopped.Load() })
	if c, ok := r.Removed("a"); !ok || c != cs["a"] {
		t.Fatalf("Removed(a) = %v %v, want its consumer", c, ok)
	}
	n := reconciled.Load()
	waitFor("two more reconciles", func() bool { return reconciled.Load() >= n+2 })
	if len(r.Consumers()) != 0 {
		t.Errorf("consumers %v after a was deleted here, want none", r.Consumers())
	}
	r.Created("a")
	waitFor("a running again once created", func() bool { return len(r.Consumers()) == 1 })
	a := r.Consumers()["a"]
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !a.stopped.Load() || len(r.Consumers()) != 0 {
		t.Error("Close left a consumer running")
	}
	r.Run("a")
	if len(r.Consumers()) != 0 {
		t.Error("Run started a consumer after Close")
	}
}
