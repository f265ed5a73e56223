package log

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
)

// TestReadConsumeGroups: CONSUME_GROUPS reads "*" (and unset) as every
// group, a list as those groups and the default one; a malformed list
// fails the config read (the service's start) naming the variable.
func TestReadConsumeGroups(t *testing.T) {
	t.Parallel()
	for _, good := range []struct{ value, back string }{{"", "*"}, {"*", "*"}, {" * ", "*"}, {"a", "a"}, {"a, b_2 ,c", "a,b_2,c"}, {"default", "default"}} {
		r := config.FromMap(map[string]string{ConsumeGroupsVar: good.value})
		c := ReadConsumeGroups(r)
		if err := r.Err(); err != nil || c.String() != good.back {
			t.Errorf("CONSUME_GROUPS=%q: %q %v, want %q", good.value, c, err, good.back)
		}
	}
	all, _ := ParseConsumeGroups("*")
	some, _ := ParseConsumeGroups("a,b")
	none, _ := ParseConsumeGroups("default")
	for _, c := range []struct {
		set  ConsumeGroups
		name string
		want bool
	}{{all, "x", true}, {all, DefaultGroup, true}, {some, "a", true}, {some, "b", true}, {some, "c", false},
		{some, DefaultGroup, true}, {none, "a", false}, {none, DefaultGroup, true}, {ConsumeGroups{}, "x", true}} {
		if got := c.set.Has(c.name); got != c.want {
			t.Errorf("CONSUME_GROUPS=%s: Has(%q) = %v, want %v", c.set, c.name, got, c.want)
		}
	}
	for bad, says := range map[string]string{
		",":                         "element 1 is empty",
		"a,,b":                      "element 2 is empty",
		"a,":                        "element 2 is empty",
		"a,b,a":                     "listed twice",
		"a,*":                       "stands alone",
		"A":                         GroupNameRule,
		"a,b-c":                     GroupNameRule,
		"1a":                        GroupNameRule,
		strings.Repeat("a", 33):     GroupNameRule,
		"a;b":                       GroupNameRule,
		"billing, ops team, audits": GroupNameRule,
	} {
		r := config.FromMap(map[string]string{ConsumeGroupsVar: bad})
		ReadConsumeGroups(r)
		if err := r.Err(); err == nil || !strings.Contains(err.Error(), ConsumeGroupsVar+":") || !strings.Contains(err.Error(), says) {
			t.Errorf("CONSUME_GROUPS=%q: %v, want an error naming CONSUME_GROUPS and saying %q", bad, err, says)
		}
	}
	r := config.FromMap(nil)
	ReadConsumeGroups(r)
	if v := r.Vars(); len(v) != 1 || v[0].Name != ConsumeGroupsVar || v[0].Default != AllGroups {
		t.Errorf("read %+v, want CONSUME_GROUPS with default %q", v, AllGroups)
	}
}

// TestGroupRunnerConsumesOnlyItsGroups: with Consumes set, the runner
// starts consumers of the groups it accepts only (Run refuses the others
// too), yet hands a group it does not consume that is still not ready to
// Pending (its set-up is done here all the same) and passes every group
// of the table to Reconciled (nothing of an unconsumed group is dropped).
func TestGroupRunnerConsumesOnlyItsGroups(t *testing.T) {
	t.Parallel()
	consume, err := ParseConsumeGroups("a")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	pending, reconciled := map[string]bool{}, map[string]bool{}
	var reconciles atomic.Int64
	r := &GroupRunner[*fakeConsumer]{
		Rows: func(context.Context) ([]GroupRow, error) {
			return []GroupRow{{Name: DefaultGroup, Ready: true}, {Name: "a", Ready: true}, {Name: "b", Ready: true},
				{Name: "old", CreatedAt: time.Now().Add(-time.Hour)}}, nil
		},
		New:      func(string) *fakeConsumer { return new(fakeConsumer) },
		Consumes: consume.Has,
		Pending: func(_ context.Context, g GroupRow) {
			mu.Lock()
			defer mu.Unlock()
			pending[g.Name] = true
		},
		Reconciled: func(_ context.Context, want map[string]bool) error {
			mu.Lock()
			defer mu.Unlock()
			for name := range want {
				reconciled[name] = true
			}
			reconciles.Add(1)
			return nil
		},
		PendingAfter: time.Minute, Poll: 10 * time.Millisecond, ReadTimeout: time.Second, StopTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	}
	r.Start()
	defer func() { _ = r.Close(context.Background()) }()
	for deadline := time.Now().Add(5 * time.Second); reconciles.Load() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for three reconciles")
		}
	}
	r.Run("b")
	if cs := r.Consumers(); len(cs) != 1 || cs["a"] == nil || !cs["a"].started.Load() {
		t.Errorf("consumers %v, want a's alone (CONSUME_GROUPS=a)", cs)
	}
	mu.Lock()
	defer mu.Unlock()
	if !pending["old"] {
		t.Errorf("Pending got %v: an unready group this instance does not consume must still be set up", pending)
	}
	if !reconciled["a"] || !reconciled["b"] || !reconciled["old"] {
		t.Errorf("Reconciled got %v, want every group of the table", reconciled)
	}
}
