package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// enqueueOutcome is one POST /tasks as a goroutine saw it.
type enqueueOutcome struct {
	status     int
	retryAfter string
	id, err    string
}

// enqueue posts one task with its own client, safe off the test's
// goroutine (it never fails the test itself).
func enqueue(base string) enqueueOutcome {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Post(base+"/tasks", "application/json", bytes.NewReader([]byte(`{"kind":"shed"}`)))
	if err != nil {
		return enqueueOutcome{err: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	o := enqueueOutcome{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	var body struct {
		ID    string `json:"id"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		o.err = "not JSON: " + string(raw)
	}
	o.id = body.ID
	if o.err == "" {
		o.err = body.Error
	}
	return o
}

// TestShedsWith503AndLosesNothingAccepted saturates MAX_IN_FLIGHT=2 with
// two enqueues held by a table lock, so that every further enqueue is shed:
// 503, Retry-After, counted in /stats, and nothing of it stored. Once the
// lock goes, every accepted task is processed.
func TestShedsWith503AndLosesNothingAccepted(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	in := sc.start(t, conformance.Settings{Workers: 2, Work: time.Millisecond},
		map[string]string{"MAX_IN_FLIGHT": "2", "MAX_IN_FLIGHT_WAIT": "0"})
	ctx := kittest.Context(t, time.Minute)
	tx, err := sc.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// SHARE ROW EXCLUSIVE conflicts with the enqueue's INSERT: the two
	// requests below hold their slots until the lock goes.
	if _, err := tx.Exec(ctx, `LOCK TABLE tasks IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	held := make([]enqueueOutcome, 2)
	var wg sync.WaitGroup
	for i := range held {
		wg.Go(func() { held[i] = enqueue(in.URL()) })
	}
	kittest.Eventually(t, 20*time.Second, "two enqueues waiting on the lock", func() bool {
		// The fetcher's claim may wait on the lock too: count enqueues.
		return scalar[int](t, sc.pool, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		 WHERE NOT l.granted AND l.relation = 'tasks'::regclass AND a.query LIKE '%INSERT INTO tasks%'`) == 2
	})

	const extra = 20
	shed := make([]enqueueOutcome, extra)
	var swg sync.WaitGroup
	for i := range shed {
		swg.Go(func() { shed[i] = enqueue(in.URL()) })
	}
	swg.Wait()
	for i, o := range shed {
		if o.status != http.StatusServiceUnavailable || o.retryAfter == "" || o.err == "" || o.id != "" {
			t.Errorf("request %d while full: %+v, want 503 with Retry-After and an error", i, o)
		}
	}
	// Probes and the progress endpoint answer while the service sheds.
	for _, p := range []string{"/healthz", "/stats", "/queue"} {
		if s, raw := kittest.Do(t, http.MethodGet, in.URL()+p, nil, nil); s != http.StatusOK {
			t.Errorf("GET %s while full: %d %s", p, s, raw)
		}
	}
	var st struct {
		Counters map[string]int64 `json:"counters"`
	}
	kittest.Do(t, http.MethodGet, in.URL()+"/stats", nil, &st)
	if st.Counters[service.CounterShed] != extra {
		t.Errorf("/stats counts %d shed, want %d", st.Counters[service.CounterShed], extra)
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	accepted := map[string]bool{}
	for _, o := range held {
		if o.status != http.StatusAccepted || o.id == "" {
			t.Fatalf("held enqueue: %+v, want 202 with an id", o)
		}
		accepted[o.id] = true
	}
	// Accepted and then more: the slots are free again.
	for range 3 {
		o := enqueue(in.URL())
		if o.status != http.StatusAccepted {
			t.Fatalf("enqueue after the overload: %+v", o)
		}
		accepted[o.id] = true
	}
	kittest.Eventually(t, 30*time.Second, "every accepted task done", func() bool {
		return doneCount(t, sc.pool) == len(accepted)
	})
	if n := scalar[int](t, sc.pool, `SELECT count(*) FROM tasks`); n != len(accepted) {
		t.Errorf("%d task records, want the %d accepted: a shed request left a record", n, len(accepted))
	}
	for id := range accepted {
		var tk queue.Task
		if s, raw := kittest.Do(t, http.MethodGet, in.URL()+"/tasks/"+id, nil, &tk); s != http.StatusOK || tk.Status != "done" {
			t.Errorf("task %s: %d %s", id, s, raw)
		}
	}
}
