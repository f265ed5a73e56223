// Area: enqueueing. One task and a batch, read back and waited for;
// unknown ids.

package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// runEnqueue checks enqueueing one task and a batch, reading and waiting.
func runEnqueue(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
		{"EnqueueGetWait", testEnqueueGetWait},
		{"Batch", testBatch},
	})
}

func testEnqueueGetWait(t *testing.T, f Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	base := tg.URL()
	before := time.Now().Add(-time.Minute)
	e := enqueue(t, base, queue.TaskRequest{Kind: "email", Payload: json.RawMessage(`{"to":"ada@example.com"}`)})
	if !queue.ValidID(e.ID) || e.Status != queue.StatusQueued || e.EnqueuedAt.Before(before) {
		t.Fatalf("POST /tasks answered %+v", e)
	}
	readRightAfterEnqueue(t, f, "GetRightAfterThe202", func(t *testing.T) {
		var got queue.Task
		if s, raw := call(t, http.MethodGet, base+"/tasks/"+e.ID, nil, &got); s != http.StatusOK || got.ID != e.ID || got.Kind != "email" {
			t.Fatalf("GET /tasks/%s: %d %s", e.ID, s, raw)
		}
	})
	task := waitTask(t, base, e.ID)
	if task.Status != queue.StatusDone || task.Kind != "email" || task.Attempts != 1 || task.DeliveredAt == nil || task.ProcessedAt == nil || task.LastError != nil {
		t.Fatalf("finished task: %+v", task)
	}
	if task.DeliveredAt.Before(task.EnqueuedAt.Add(-time.Second)) || task.ProcessedAt.Before(*task.DeliveredAt) {
		t.Errorf("timestamps out of order: %+v", task)
	}
	// A finished task answers a wait at once.
	if s, _ := call(t, http.MethodGet, base+"/tasks/"+e.ID+"/wait?timeout=1ms", nil, nil); s != http.StatusOK {
		t.Errorf("wait on a done task: %d", s)
	}
	for _, path := range []string{"/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a", "/tasks/not-a-uuid", "/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a/wait?timeout=1s"} {
		var body map[string]any
		if s, raw := call(t, http.MethodGet, base+path, nil, &body); s != http.StatusNotFound || body["error"] == nil {
			t.Errorf("GET %s: %d %s, want a JSON 404", path, s, raw)
		}
	}
}

func testBatch(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	base := tg.URL()
	ids := enqueueBatch(t, base, 50, queue.TaskRequest{Kind: "thumbnail", Payload: json.RawMessage(`{"w":64}`)})
	seen := map[string]bool{}
	for _, id := range ids {
		if !queue.ValidID(id) || seen[id] {
			t.Fatalf("bad or duplicate id %q", id)
		}
		seen[id] = true
	}
	for _, id := range ids {
		if task := waitTask(t, base, id); task.Status != queue.StatusDone || task.Attempts != 1 {
			t.Fatalf("task %s: %+v", id, task)
		}
	}
	// One transaction or one confirmed publish: a bad element rejects the
	// whole batch and nothing is recorded.
	before := countTasks(t, tg, all)
	bad := queue.BatchRequest{Tasks: []queue.TaskRequest{{Kind: "ok"}, {Kind: ""}}}
	var body map[string]any
	if s, raw := call(t, http.MethodPost, base+"/tasks/batch", bad, &body); s != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), "tasks[1]") {
		t.Errorf("batch with a bad element: %d %s", s, raw)
	}
	if after := countTasks(t, tg, all); after != before {
		t.Errorf("a rejected batch recorded %d tasks", after-before)
	}
}
