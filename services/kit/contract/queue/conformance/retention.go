// Not an area of Run: the retention cleaner's test, which the services
// run on their own (it sets the tasks' states through DB).

package conformance

import (
	"net/http"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Retention is both sides' test of the retention cleaner on the real
// servers, on a target newTarget starts (API only, so that the test sets
// the tasks' states through DB): a done task past TASK_RETENTION is gone
// (404, and its row), one inside it reads back, and queued, running and
// dead tasks stay whatever their age, also under a retention of 1ms. Rows
// are backdated rather than waited for. It returns the ids of the tasks
// that had to stay (running, dead, queued), for a side's checks of its own
// tables.
func Retention(t *testing.T, newTarget NewTarget) (kept []string) {
	t.Helper()
	s := Settings{APIOnly: true, TaskRetention: time.Hour, RetentionInterval: 20 * time.Millisecond}
	tg := newTarget(t, s)
	pool := tg.DB()
	ids := enqueueN(t, tg.URL(), 5)
	old, fresh, running, dead, queued := ids[0], ids[1], ids[2], ids[3], ids[4]
	kittest.Exec(t, pool, `UPDATE tasks SET status = 'done', processed_at = now() - interval '2 hours' WHERE id = $1`, old)
	kittest.Exec(t, pool, `UPDATE tasks SET status = 'done', processed_at = now() WHERE id = $1`, fresh)
	kittest.Exec(t, pool, `UPDATE tasks SET status = 'running' WHERE id = $1`, running)
	kittest.Exec(t, pool, `UPDATE tasks SET status = 'dead' WHERE id = $1`, dead)
	// Unfinished and dead rows as old as can be, every timestamp included:
	// only the status may keep them.
	kittest.Exec(t, pool, `UPDATE tasks SET enqueued_at = now() - interval '30 days', delivered_at = now() - interval '30 days',
	                   processed_at = now() - interval '30 days' WHERE id = ANY($1::uuid[])`, []string{running, dead, queued})

	kittest.Eventually(t, 10*time.Second, "the done task past retention removed", func() bool {
		return kittest.Status(t, tg.URL()+"/tasks/"+old) == http.StatusNotFound
	})
	// The cleaner deletes, then counts: the counter may trail the row
	// the test saw gone.
	kittest.CountersReach(t, 10*time.Second, cleaner.StatRemovedPrefix+"tasks", 1, tg.URL())
	if last := kittest.Counter(t, tg.URL(), cleaner.StatLastRun); time.Since(time.Unix(last, 0)) > time.Minute {
		t.Errorf("/stats %s = %d, want about now", cleaner.StatLastRun, last)
	}
	for _, id := range []string{fresh, running, dead, queued} {
		if s := kittest.Status(t, tg.URL()+"/tasks/"+id); s != http.StatusOK {
			t.Errorf("GET /tasks/%s = %d after a pass, want 200 (inside retention, or not done)", id, s)
		}
	}

	// A retention of 1ms: every done task goes, nothing else does.
	s.TaskRetention = time.Millisecond
	tg.Configure(s)
	tg.Restart(t)
	kittest.Eventually(t, 10*time.Second, "the fresh done task removed at 1ms", func() bool {
		return kittest.Status(t, tg.URL()+"/tasks/"+fresh) == http.StatusNotFound
	})
	passes := kittest.Counter(t, tg.URL(), cleaner.StatPasses)
	kittest.Eventually(t, 10*time.Second, "two more passes", func() bool { return kittest.Counter(t, tg.URL(), cleaner.StatPasses) >= passes+2 })
	kept = []string{running, dead, queued}
	for _, id := range kept {
		if s := kittest.Status(t, tg.URL()+"/tasks/"+id); s != http.StatusOK {
			t.Errorf("GET /tasks/%s = %d at a 1ms retention, want 200: an unfinished or dead task was removed", id, s)
		}
	}
	if e := kittest.Counter(t, tg.URL(), cleaner.StatErrors); e != 0 {
		t.Errorf("/stats %s = %d", cleaner.StatErrors, e)
	}
	return kept
}

// enqueueN enqueues n tasks in one batch and returns their ids.
func enqueueN(t testing.TB, base string, n int) []string {
	t.Helper()
	tasks := make([]map[string]any, n)
	for i := range tasks {
		tasks[i] = map[string]any{"kind": "retention"}
	}
	var out struct {
		IDs []string `json:"ids"`
	}
	if s, raw := kittest.Do(t, http.MethodPost, base+"/tasks/batch", map[string]any{"tasks": tasks}, &out); s != http.StatusAccepted || len(out.IDs) != n {
		t.Fatalf("POST /tasks/batch = %d %s", s, raw)
	}
	return out.IDs
}
