// Helpers shared by every area: the subtest table, the JSON client,
// enqueueing and waiting, counts of the records, /stats.

package conformance

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// test is one named subtest of the suite.
type test = struct {
	Name string
	Fn   func(t *testing.T, f Features, newTarget NewTarget)
}

// runTests runs tests as parallel subtests of t, each given f and
// newTarget.
func runTests(t *testing.T, f Features, newTarget NewTarget, tests []test) {
	kittest.RunParallel(t, tests, func(t *testing.T, fn func(*testing.T, Features, NewTarget)) { fn(t, f, newTarget) })
}

// readRightAfterEnqueue runs check, which reads a task (or its record)
// right after its 202, as a subtest called name; the subtest skips,
// naming Features.RecordsOnConsume and its reason, on a side that
// records a task only when a worker takes it.
func readRightAfterEnqueue(t *testing.T, f Features, name string, check func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		if f.RecordsOnConsume != "" {
			t.Skipf("RecordsOnConsume: %s", f.RecordsOnConsume)
		}
		check(t)
	})
}

// call is kittest.Do that also checks the answer is JSON (or the YAML of
// /openapi.yaml), as the contract says every answer is.
func call(t testing.TB, method, url string, body any, out any) (int, []byte) {
	t.Helper()
	resp, raw := kittest.DoResponse(t, method, url, body, out)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "application/yaml") {
		t.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	return resp.StatusCode, raw
}

func enqueue(t testing.TB, base string, req queue.TaskRequest) queue.Enqueued {
	t.Helper()
	var e queue.Enqueued
	if s, raw := call(t, http.MethodPost, base+"/tasks", req, &e); s != http.StatusAccepted {
		t.Fatalf("POST /tasks: %d %s", s, raw)
	}
	return e
}

func enqueueBatch(t testing.TB, base string, n int, req queue.TaskRequest) []string {
	t.Helper()
	b := queue.BatchRequest{Tasks: make([]queue.TaskRequest, n)}
	for i := range b.Tasks {
		b.Tasks[i] = req
	}
	var e queue.BatchEnqueued
	if s, raw := call(t, http.MethodPost, base+"/tasks/batch", b, &e); s != http.StatusAccepted {
		t.Fatalf("POST /tasks/batch: %d %s", s, raw)
	}
	if len(e.IDs) != n {
		t.Fatalf("batch of %d answered %d ids", n, len(e.IDs))
	}
	return e.IDs
}

// waitTask long-polls until the task is done or dead, failing the test
// after about a minute.
func waitTask(t testing.TB, base, id string) queue.Task {
	t.Helper()
	var task queue.Task
	for range 3 {
		s, raw := call(t, http.MethodGet, base+"/tasks/"+id+"/wait?timeout=30s", nil, &task)
		switch s {
		case http.StatusOK:
			return task
		case http.StatusRequestTimeout:
			continue
		default:
			t.Fatalf("wait %s: %d %s", id, s, raw)
		}
	}
	t.Fatalf("task %s not finished after 90s: %+v", id, task)
	return task
}

// countTasks counts the target's task records for which keep holds.
func countTasks(t testing.TB, tg Target, keep func(TaskRecord) bool) int {
	t.Helper()
	return countOf(records(tg).Tasks(t), keep)
}

// countPayments counts the target's payment records for which keep holds.
func countPayments(t testing.TB, tg Target, keep func(PaymentRecord) bool) int {
	t.Helper()
	return countOf(records(tg).Payments(t), keep)
}

// countOf counts the rows for which keep holds.
func countOf[R any](rows []R, keep func(R) bool) int {
	n := 0
	for _, r := range rows {
		if keep(r) {
			n++
		}
	}
	return n
}

func all[R any](R) bool { return true }

func status(s string) func(TaskRecord) bool {
	return func(r TaskRecord) bool { return r.Status == s }
}

func terminal(r TaskRecord) bool { return r.Terminal() }

func getStats(t testing.TB, base string) (counters map[string]int64, latencies map[string]map[string]float64) {
	t.Helper()
	var s struct {
		Counters  map[string]int64              `json:"counters"`
		Latencies map[string]map[string]float64 `json:"latencies"`
	}
	if st, raw := call(t, http.MethodGet, base+"/stats", nil, &s); st != http.StatusOK {
		t.Fatalf("/stats: %d %s", st, raw)
	}
	return s.Counters, s.Latencies
}

// waitAllFinished waits until the target's records show n tasks, none of
// them open.
func waitAllFinished(t testing.TB, tg Target, n int, d time.Duration) {
	t.Helper()
	kittest.Eventually(t, d, fmt.Sprintf("%d tasks finished", n), func() bool {
		return countTasks(t, tg, terminal) >= n
	})
}
