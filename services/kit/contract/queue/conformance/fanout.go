// Area: fan-out (FANOUT). A task of a kind with subscribers becomes one
// ordinary task per subscriber, each retried and dead on its own, also
// in a batch.

package conformance

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// fanoutSetting is the FANOUT of the fan-out tests: two kinds with
// subscribers, one of them with one subscriber only.
const fanoutSetting = "order.placed:email,warehouse,analytics;invoice.paid:ledger"

// orderSubscribers are order.placed's subscribers in fanoutSetting.
var orderSubscribers = []string{"email", "warehouse", "analytics"}

// runFanout checks fan-out (FANOUT): a task of a kind with subscribers
// becomes one ordinary task per subscriber. Every side has it.
func runFanout(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
		{"FanoutOneCopyPerSubscriber", testFanoutCopies},
		{"FanoutCopiesRetryAndDieAlone", testFanoutRetries},
		{"FanoutBatch", testFanoutBatch},
	})
}

// checkCopies checks that ids are the copies of one posted task of kind,
// one per subscriber in subs' order, each valid and distinct, and that
// each reads back with its copy's kind: at once, or, on a side that
// records a task only when a worker takes it (Features.RecordsOnConsume),
// once it is done or dead.
func checkCopies(t *testing.T, f Features, base, kind string, subs, ids []string) {
	t.Helper()
	if len(ids) != len(subs) {
		t.Fatalf("%s answered %d ids, want one per subscriber (%d)", kind, len(ids), len(subs))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if !queue.ValidID(id) || seen[id] {
			t.Fatalf("bad or duplicate copy id %q in %q", id, ids)
		}
		seen[id] = true
	}
	readRightAfterEnqueue(t, f, "GetEachCopyRightAfterThe202", func(t *testing.T) {
		for i, id := range ids {
			var got queue.Task
			if s, raw := call(t, http.MethodGet, base+"/tasks/"+id, nil, &got); s != http.StatusOK || got.Kind != queue.CopyKind(kind, subs[i]) {
				t.Errorf("GET copy %d: %d %s, want kind %s", i, s, raw, queue.CopyKind(kind, subs[i]))
			}
		}
	})
	if f.RecordsOnConsume == "" {
		return
	}
	for i, id := range ids {
		if got := waitTask(t, base, id); got.Kind != queue.CopyKind(kind, subs[i]) {
			t.Errorf("copy %d once finished: %+v, want kind %s", i, got, queue.CopyKind(kind, subs[i]))
		}
	}
}

func testFanoutCopies(t *testing.T, f Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{Fanout: fanoutSetting})
	base := tg.URL()
	e := enqueue(t, base, queue.TaskRequest{Kind: "order.placed", Payload: json.RawMessage(`{"order":42}`)})
	if len(e.IDs) == 0 || e.IDs[0] != e.ID || e.Status != queue.StatusQueued {
		t.Fatalf("POST /tasks of a kind with subscribers answered %+v, want id = ids[0]", e)
	}
	checkCopies(t, f, base, "order.placed", orderSubscribers, e.IDs)
	// A kind without subscribers is one task, answered as before.
	plain := enqueue(t, base, queue.TaskRequest{Kind: "email"})
	if plain.IDs != nil {
		t.Errorf("a kind without subscribers answered ids %q", plain.IDs)
	}
	for _, id := range append(slices.Clone(e.IDs), plain.ID) {
		if task := waitTask(t, base, id); task.Status != queue.StatusDone || task.Attempts != 1 || task.LastError != nil {
			t.Errorf("task %s: %+v, want done after one attempt", id, task)
		}
	}
	// Exactly one record per subscriber, each with the posted payload,
	// and each processed once.
	recs := records(tg).Tasks(t)
	for _, sub := range orderSubscribers {
		kind := queue.CopyKind("order.placed", sub)
		n := countOf(recs, func(r TaskRecord) bool {
			var p map[string]any
			return r.Kind == kind && r.Status == queue.StatusDone && json.Unmarshal(r.Payload, &p) == nil && reflect.DeepEqual(p, map[string]any{"order": 42.0})
		})
		if n != 1 {
			t.Errorf("%d done records of kind %s with the posted payload, want 1", n, kind)
		}
	}
	if n := countOf(recs, func(r TaskRecord) bool { return r.Kind == "order.placed" }); n != 0 {
		t.Errorf("%d records of the posted kind itself, want none (only its copies)", n)
	}
	if len(recs) != 4 {
		t.Errorf("%d task records, want 4 (3 copies and the plain task)", len(recs))
	}
	if c, _ := getStats(t, base); c[queue.CounterEnqueued] != 4 || c[queue.CounterDelivered] != 4 || c[queue.CounterProcessed] != 4 {
		t.Errorf("counters %v, want enqueued, delivered and processed 4: each copy exactly once", c)
	}
}

func testFanoutRetries(t *testing.T, f Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{Fanout: fanoutSetting, MaxAttempts: 3, RetryBase: 20 * time.Millisecond})
	base := tg.URL()
	flaky := enqueue(t, base, queue.TaskRequest{Kind: "order.placed", FailTimes: 1})
	checkCopies(t, f, base, "order.placed", orderSubscribers, flaky.IDs)
	poison := enqueue(t, base, queue.TaskRequest{Kind: "invoice.paid", FailTimes: 10})
	checkCopies(t, f, base, "invoice.paid", []string{"ledger"}, poison.IDs)
	for _, id := range flaky.IDs {
		task := waitTask(t, base, id)
		if task.Status != queue.StatusDone || task.Attempts != 2 || task.LastError == nil || !strings.Contains(*task.LastError, "simulated failure") {
			t.Errorf("copy %s failing once: %+v, want done after its own retry", id, task)
		}
	}
	if task := waitTask(t, base, poison.ID); task.Status != queue.StatusDead || task.Attempts != 3 || task.ProcessedAt != nil {
		t.Errorf("copy failing always: %+v, want dead after 3 attempts", task)
	}
	var d queue.Depth
	if s, raw := call(t, http.MethodGet, base+"/queue", nil, &d); s != http.StatusOK || d.Dead != 1 || d.Queued != 0 || d.Running != 0 {
		t.Errorf("/queue: %d %s, want dead 1", s, raw)
	}
	// Each copy was delivered and retried on its own: a copy's retry
	// delivers no other copy again.
	if c, _ := getStats(t, base); c[queue.CounterDelivered] != 3*2+3 || c[queue.CounterRetried] != 3+2 || c[queue.CounterProcessed] != 3 || c[queue.CounterDead] != 1 {
		t.Errorf("counters %v, want delivered 9, retried 5, processed 3, dead 1", c)
	}
}

func testFanoutBatch(t *testing.T, f Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{Fanout: fanoutSetting})
	base := tg.URL()
	req := queue.BatchRequest{Tasks: []queue.TaskRequest{{Kind: "order.placed"}, {Kind: "email"}, {Kind: "invoice.paid"}, {Kind: "order.placed"}}}
	var e queue.BatchEnqueued
	if s, raw := call(t, http.MethodPost, base+"/tasks/batch", req, &e); s != http.StatusAccepted {
		t.Fatalf("POST /tasks/batch: %d %s", s, raw)
	}
	if len(e.IDs) != 4 || len(e.Copies) != 4 {
		t.Fatalf("batch of 4 answered %d ids and %d copies lists, want 4 and 4", len(e.IDs), len(e.Copies))
	}
	checkCopies(t, f, base, "order.placed", orderSubscribers, e.Copies[0])
	checkCopies(t, f, base, "invoice.paid", []string{"ledger"}, e.Copies[2])
	checkCopies(t, f, base, "order.placed", orderSubscribers, e.Copies[3])
	if !slices.Equal(e.Copies[1], []string{e.IDs[1]}) {
		t.Errorf("copies of a task without subscribers: %q, want its one id %s", e.Copies[1], e.IDs[1])
	}
	var all []string
	for i, c := range e.Copies {
		if c[0] != e.IDs[i] {
			t.Errorf("ids[%d] = %s, want its first copy %s", i, e.IDs[i], c[0])
		}
		all = append(all, c...)
	}
	for _, id := range all {
		if task := waitTask(t, base, id); task.Status != queue.StatusDone || task.Attempts != 1 {
			t.Errorf("task %s: %+v", id, task)
		}
	}
	if n := len(records(tg).Tasks(t)); n != 8 {
		t.Errorf("%d task records, want 8", n)
	}
	// A batch without a kind with subscribers is answered as before.
	var plain map[string]any
	if s, raw := call(t, http.MethodPost, base+"/tasks/batch", queue.BatchRequest{Tasks: []queue.TaskRequest{{Kind: "email"}}}, &plain); s != http.StatusAccepted || plain["copies"] != nil {
		t.Errorf("batch without subscribers: %d %s, want no copies", s, raw)
	}
	if c, _ := getStats(t, base); c[queue.CounterEnqueued] != 9 {
		t.Errorf("enqueued %d, want 9 (one per copy)", c[queue.CounterEnqueued])
	}
}
