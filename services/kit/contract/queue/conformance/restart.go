// Area: durability. A graceful restart under load and a worker crash
// mid-task lose no task.

package conformance

import (
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runRestart checks that a graceful restart and a worker crash lose no
// task.
func runRestart(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
		{"RestartMidLoadLosesNothing", testRestart},
		{"WorkerCrashMidTaskRecovered", testCrash},
	})
}

func testRestart(t *testing.T, _ Features, newTarget NewTarget) {
	const n = 300
	o := Settings{Workers: 4, Work: 20 * time.Millisecond}
	tg := newTarget(t, o)
	enqueueBatch(t, tg.URL(), n, queue.TaskRequest{Kind: "restart"})
	kittest.Eventually(t, time.Minute, "the first tasks done", func() bool {
		return countTasks(t, tg, status(queue.StatusDone)) >= 20
	})
	tg.Restart(t)
	mid := countTasks(t, tg, status(queue.StatusDone))
	if mid >= n {
		t.Logf("all %d tasks were done before the restart finished; the restart still had to lose nothing", n)
	}
	// Enqueue more on the new instance too.
	enqueueBatch(t, tg.URL(), 20, queue.TaskRequest{Kind: "after-restart"})
	waitAllFinished(t, tg, n+20, 2*time.Minute)
	if done := countTasks(t, tg, status(queue.StatusDone)); done != n+20 {
		t.Fatalf("%d of %d tasks done after the restart", done, n+20)
	}
	redelivered := countTasks(t, tg, func(r TaskRecord) bool { return r.Attempts > 1 })
	t.Logf("restart at %d/%d done; %d tasks delivered more than once (allowed: at-least-once)", mid, n, redelivered)
}

func testCrash(t *testing.T, _ Features, newTarget NewTarget) {
	// Two workers each hold a task for a minute; the instance crashes.
	tg := newTarget(t, Settings{Workers: 2, Work: time.Minute, Lease: 2 * time.Second})
	a := enqueue(t, tg.URL(), queue.TaskRequest{Kind: "crash"})
	b := enqueue(t, tg.URL(), queue.TaskRequest{Kind: "crash"})
	kittest.Eventually(t, time.Minute, "both tasks running", func() bool {
		return countTasks(t, tg, func(r TaskRecord) bool {
			return (r.ID == a.ID || r.ID == b.ID) && r.Status == queue.StatusRunning
		}) == 2
	})
	tg.Configure(Settings{Workers: 2, Lease: 2 * time.Second})
	tg.Crash(t)
	for _, id := range []string{a.ID, b.ID} {
		task := waitTask(t, tg.URL(), id)
		if task.Status != queue.StatusDone || task.Attempts != 2 {
			t.Errorf("task held by the crashed worker: %+v, want done after 2 deliveries", task)
		}
	}
}
