// Area: retries. A failing task is retried with backoff until done, or
// dead after MAX_ATTEMPTS.

package conformance

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// runRetries checks retries with backoff and the dead state.
func runRetries(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
		{"RetriesThenDone", testRetries},
		{"DeadAfterMaxAttempts", testDead},
	})
}

func testRetries(t *testing.T, f Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{MaxAttempts: 5, RetryBase: 50 * time.Millisecond})
	base := tg.URL()
	e := enqueue(t, base, queue.TaskRequest{Kind: "flaky", FailTimes: 2})
	slow := enqueue(t, base, queue.TaskRequest{Kind: "flaky", FailTimes: 4}) // backoff 50+100+200+400 ms
	// The wait times out while the task is still being retried: 408 with
	// the current status.
	readRightAfterEnqueue(t, f, "ShortWaitAnswers408WithTheTask", func(t *testing.T) {
		var wt queue.WaitTimeout
		if s, raw := call(t, http.MethodGet, base+"/tasks/"+slow.ID+"/wait?timeout=10ms", nil, &wt); s != http.StatusRequestTimeout ||
			wt.ID != slow.ID || wt.Terminal() || wt.Error == "" {
			t.Errorf("short wait: %d %s, want 408 with the current status", s, raw)
		}
	})
	task := waitTask(t, base, e.ID)
	if task.Status != queue.StatusDone || task.Attempts != 3 || task.LastError == nil || !strings.Contains(*task.LastError, "simulated failure") {
		t.Fatalf("retried task: %+v", task)
	}
	if task := waitTask(t, base, slow.ID); task.Status != queue.StatusDone || task.Attempts != 5 {
		t.Fatalf("task failing 4 times of 5 allowed: %+v", task)
	}
	if c, _ := getStats(t, base); c[queue.CounterRetried] != 6 || c[queue.CounterProcessed] != 2 || c[queue.CounterDead] != 0 {
		t.Errorf("counters: %v, want retried 6, processed 2, dead 0", c)
	}
}

func testDead(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{MaxAttempts: 3, RetryBase: 20 * time.Millisecond})
	base := tg.URL()
	e := enqueue(t, base, queue.TaskRequest{Kind: "poison", FailTimes: 10})
	task := waitTask(t, base, e.ID)
	if task.Status != queue.StatusDead || task.Attempts != 3 || task.LastError == nil || task.ProcessedAt != nil {
		t.Fatalf("poison task: %+v", task)
	}
	var d queue.Depth
	if s, raw := call(t, http.MethodGet, base+"/queue", nil, &d); s != http.StatusOK || d.Dead != 1 || d.Queued != 0 || d.Running != 0 {
		t.Errorf("/queue: %d %s, want dead 1", s, raw)
	}
	if c, _ := getStats(t, base); c[queue.CounterDead] != 1 || c[queue.CounterRetried] != 2 || c[queue.CounterProcessed] != 0 {
		t.Errorf("counters: %v, want dead 1, retried 2, processed 0", c)
	}
}
