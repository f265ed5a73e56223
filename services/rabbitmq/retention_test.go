package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestRetentionRemovesOnlyDoneTasksPastIt is no-rabbitmq's test of the
// same name, on this side: it runs the cleaner on the real server: a done
// task past TASK_RETENTION is gone (404, and its row), one
// inside it reads back, and queued, running and dead tasks stay whatever
// their age, also under a retention of 1ms. Rows are backdated rather than
// waited for.
func TestRetentionRemovesOnlyDoneTasksPastIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// API-only: no worker moves the tasks, the test sets their states.
	in := startTarget(t, e, conformance.Settings{}, map[string]string{"WORKERS": "0", "TASK_RETENTION": "1h", "RETENTION_INTERVAL": "20ms"})
	pool := in.pool
	ids := enqueueN(t, in.URL(), 5)
	old, fresh, running, dead, queued := ids[0], ids[1], ids[2], ids[3], ids[4]
	exec(t, pool, `UPDATE tasks SET status = 'done', processed_at = now() - interval '2 hours' WHERE id = $1`, old)
	exec(t, pool, `UPDATE tasks SET status = 'done', processed_at = now() WHERE id = $1`, fresh)
	exec(t, pool, `UPDATE tasks SET status = 'running' WHERE id = $1`, running)
	exec(t, pool, `UPDATE tasks SET status = 'dead' WHERE id = $1`, dead)
	// Unfinished and dead rows as old as can be, every timestamp included:
	// only the status may keep them.
	exec(t, pool, `UPDATE tasks SET enqueued_at = now() - interval '30 days', delivered_at = now() - interval '30 days',
	                   processed_at = now() - interval '30 days' WHERE id = ANY($1::uuid[])`, []string{running, dead, queued})

	kittest.Eventually(t, 10*time.Second, "the done task past retention removed", func() bool {
		return status(t, in.URL(), old) == http.StatusNotFound
	})
	removedAtLeast(t, in.URL(), 1)
	for _, id := range []string{fresh, running, dead, queued} {
		if s := status(t, in.URL(), id); s != http.StatusOK {
			t.Errorf("GET /tasks/%s = %d after a pass, want 200 (inside retention, or not done)", id, s)
		}
	}
	in.Stop()

	// A retention of 1ms: every done task goes, nothing else does.
	in = startTarget(t, e, conformance.Settings{}, map[string]string{"WORKERS": "0", "TASK_RETENTION": "1ms", "RETENTION_INTERVAL": "20ms"})
	kittest.Eventually(t, 10*time.Second, "the fresh done task removed at 1ms", func() bool {
		return status(t, in.URL(), fresh) == http.StatusNotFound
	})
	passes := stat(t, in.URL(), cleaner.StatPasses)
	kittest.Eventually(t, 10*time.Second, "two more passes", func() bool { return stat(t, in.URL(), cleaner.StatPasses) >= passes+2 })
	for _, id := range []string{running, dead, queued} {
		if s := status(t, in.URL(), id); s != http.StatusOK {
			t.Errorf("GET /tasks/%s = %d at a 1ms retention, want 200: an unfinished or dead task was removed", id, s)
		}
	}
	if e := stat(t, in.URL(), cleaner.StatErrors); e != 0 {
		t.Errorf("%s = %d", cleaner.StatErrors, e)
	}
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

// exec runs one statement on the test's schema.
func exec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// status is GET /tasks/{id}'s status code.
func status(t testing.TB, base, id string) int {
	t.Helper()
	s, _ := kittest.Do(t, http.MethodGet, base+"/tasks/"+id, nil, nil)
	return s
}

// stat reads one /stats counter.
func stat(t testing.TB, base, name string) int64 {
	t.Helper()
	var st struct {
		Counters map[string]int64 `json:"counters"`
	}
	kittest.Do(t, http.MethodGet, base+"/stats", nil, &st)
	return st.Counters[name]
}

// removedAtLeast checks the cleaner's progress in /stats.
func removedAtLeast(t testing.TB, base string, n int64) {
	t.Helper()
	if got := stat(t, base, cleaner.StatRemovedPrefix+"tasks"); got < n {
		t.Errorf("/stats %stasks = %d, want at least %d", cleaner.StatRemovedPrefix, got, n)
	}
	if last := stat(t, base, cleaner.StatLastRun); time.Since(time.Unix(last, 0)) > time.Minute {
		t.Errorf("/stats %s = %d, want about now", cleaner.StatLastRun, last)
	}
}
