package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// post enqueues n tasks in one batch.
func post(t testing.TB, base string, n int) {
	t.Helper()
	b := queue.BatchRequest{Tasks: make([]queue.TaskRequest, n)}
	for i := range b.Tasks {
		b.Tasks[i] = queue.TaskRequest{Kind: "t"}
	}
	if s, raw := kittest.Do(t, http.MethodPost, base+"/tasks/batch", b, nil); s != http.StatusAccepted {
		t.Fatalf("POST /tasks/batch: %d %s", s, raw)
	}
}

func scalar[T any](t testing.TB, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := pool.QueryRow(kittest.Context(t, 30*time.Second), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func doneCount(t testing.TB, pool *pgxpool.Pool) int {
	return scalar[int](t, pool, `SELECT count(*) FROM tasks WHERE status = 'done'`)
}

// terminateListener terminates the backend of the LISTEN connection of
// the instance on the schema, as a Postgres restart would.
func (sc schema) terminateListener(t testing.TB) {
	t.Helper()
	n := scalar[int](t, sc.pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, listenerName(sc.name))
	if n != 1 {
		t.Fatalf("terminated %d listener backends, want 1", n)
	}
}

// truncateQueue empties queue_jobs as crash recovery empties an unlogged
// table.
func truncateQueue(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(kittest.Context(t, 10*time.Second), `TRUNCATE queue_jobs`); err != nil {
		t.Fatal(err)
	}
}

// checkQueueEmpty fails t unless finished tasks have left queue_jobs.
func checkQueueEmpty(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	if n := scalar[int](t, pool, `SELECT count(*) FROM queue_jobs`); n != 0 {
		t.Errorf("queue_jobs keeps %d rows of finished tasks", n)
	}
}

// TestListenReconnectAfterTerminate kills the LISTEN connection's backend
// with pg_terminate_backend mid-load. The tasks are enqueued by an API-only
// instance, and the worker instance's fallback poll is a minute, so only
// notifications (and the sweep after re-LISTEN) can wake it within the
// test's deadline: every task still completes.
func TestListenReconnectAfterTerminate(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	pool := sc.pool
	api := sc.start(t, conformance.Settings{}, map[string]string{"WORKERS": "0"})
	worker := sc.start(t, conformance.Settings{Workers: 4, Work: 2 * time.Millisecond}, map[string]string{"POLL_INTERVAL": "1m"})
	kittest.Eventually(t, 30*time.Second, "the listener", worker.App().listener.Listening)
	post(t, api.URL(), 300)
	post(t, api.URL(), 300)
	sc.terminateListener(t)
	t.Logf("listener terminated with %d of 600 tasks done", doneCount(t, pool))
	post(t, api.URL(), 200) // may land while the listener is away: the sweep finds it
	kittest.Eventually(t, 30*time.Second, "the listener back", func() bool {
		return worker.App().listener.Listening() && worker.App().stats.Snapshot().Counters[queue.CounterReconnects] >= 1
	})
	kittest.Eventually(t, 40*time.Second, "800 tasks done", func() bool { return doneCount(t, pool) == 800 })
	// After the reconnect, a new task is woken by a notification, not by
	// the minute-long poll.
	post(t, api.URL(), 1)
	kittest.Eventually(t, 40*time.Second, "801 tasks done", func() bool { return doneCount(t, pool) == 801 })
}

// TestLeaseRescue claims tasks as a worker that then dies would (the claim
// statement, never completed): once the lease expires another instance
// rescues them and they complete, counted as a second delivery.
func TestLeaseRescue(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	pool := sc.pool
	api := sc.start(t, conformance.Settings{}, map[string]string{"WORKERS": "0"})
	post(t, api.URL(), 3)
	// The dead worker's claim: a one-second lease, never renewed.
	rows, err := pool.Query(kittest.Context(t, 10*time.Second), claimSQL, 10, 1000)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if n := scalar[int](t, pool, `SELECT count(*) FROM tasks WHERE status = 'running'`); n != 3 {
		t.Fatalf("%d tasks running after the claim, want 3", n)
	}
	sc.start(t, conformance.Settings{Workers: 2}, nil)
	kittest.Eventually(t, 40*time.Second, "the rescued tasks done", func() bool { return doneCount(t, pool) == 3 })
	if n := scalar[int](t, pool, `SELECT count(*) FROM tasks WHERE attempts = 2`); n != 3 {
		t.Errorf("%d of 3 rescued tasks show 2 deliveries", n)
	}
}

// TestQueueTableModeAndRebuild switches QUEUE_TABLE both ways and empties
// the queue table as crash recovery empties an unlogged one: the next
// start re-queues the open tasks from their (logged) records. Finished
// tasks leave the hot table.
func TestQueueTableModeAndRebuild(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	pool := sc.pool
	persistence := func() string {
		return scalar[string](t, pool, `SELECT relpersistence::text FROM pg_class WHERE oid = 'queue_jobs'::regclass`)
	}
	api := sc.start(t, conformance.Settings{}, map[string]string{"WORKERS": "0", "QUEUE_TABLE": "logged"})
	if p := persistence(); p != "p" {
		t.Errorf("QUEUE_TABLE=logged: relpersistence %q", p)
	}
	post(t, api.URL(), 5)
	api.Stop()
	truncateQueue(t, pool)
	sc.start(t, conformance.Settings{Workers: 2}, nil) // QUEUE_TABLE defaults to unlogged
	if p := persistence(); p != "u" {
		t.Errorf("QUEUE_TABLE=unlogged: relpersistence %q", p)
	}
	kittest.Eventually(t, 30*time.Second, "the re-queued tasks done", func() bool { return doneCount(t, pool) == 5 })
	checkQueueEmpty(t, pool)
}

// TestRebuildAfterListenReconnect empties queue_jobs while the service runs,
// as crash recovery empties the unlogged table when Postgres restarts
// under a running service, then terminates the LISTEN backend, as that
// restart would: the reconnect rebuilds the queue from the open records
// and every task completes. The poll interval is a minute, and the worker
// holds one task at the truncation: its row comes back leased, not due.
func TestRebuildAfterListenReconnect(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	pool := sc.pool
	worker := sc.start(t, conformance.Settings{Workers: 1, Work: 200 * time.Millisecond},
		map[string]string{"POLL_INTERVAL": "1m", "CLAIM_BATCH": "1"})
	kittest.Eventually(t, 30*time.Second, "the listener", worker.App().listener.Listening)
	post(t, worker.URL(), 20)
	kittest.Eventually(t, 30*time.Second, "a task running", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM tasks WHERE status = 'running'`) >= 1
	})
	truncateQueue(t, pool)
	open := scalar[int](t, pool, `SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')`)
	if open == 0 {
		t.Fatal("every task finished before the truncation; nothing to rebuild")
	}
	sc.terminateListener(t)
	t.Logf("queue emptied with %d of 20 tasks open; listener terminated", open)
	kittest.Eventually(t, 60*time.Second, "20 tasks done", func() bool { return doneCount(t, pool) == 20 })
	// A rebuild whose snapshot still saw a task open may put its queue
	// row back after the completion deleted it (allowed: see
	// TestClaimSkipsQueueRowsOfFinishedTasks); the next claim drops it,
	// at the latest the fallback poll's (POLL_INTERVAL, 1m here).
	kittest.Eventually(t, 90*time.Second, "queue_jobs empty", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM queue_jobs`) == 0
	})
}

// TestClaimSkipsQueueRowsOfFinishedTasks: a rebuild whose snapshot still
// saw a task open can re-insert its queue row after a completion deleted
// it and finished the task. The record decides: a claim that meets such a
// row neither runs the task again nor counts a delivery, and the row goes.
func TestClaimSkipsQueueRowsOfFinishedTasks(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	pool := sc.pool
	worker := sc.start(t, conformance.Settings{Workers: 2}, map[string]string{"POLL_INTERVAL": "100ms"})
	post(t, worker.URL(), 3)
	kittest.Eventually(t, 30*time.Second, "3 tasks done", func() bool { return doneCount(t, pool) == 3 })
	delivered := worker.App().stats.Snapshot().Counters[queue.CounterDelivered]
	ctx := kittest.Context(t, 10*time.Second)
	// What the race leaves: a due queue row for each finished task.
	if _, err := pool.Exec(ctx, `INSERT INTO queue_jobs (task_id, run_at, fail_times, enqueued_at)
		SELECT id, now(), fail_times, enqueued_at FROM tasks`); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, "the stale rows dropped", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM queue_jobs`) == 0
	})
	if got := worker.App().stats.Snapshot().Counters[queue.CounterDelivered]; got != delivered {
		t.Errorf("delivered %d, want %d: a finished task ran again", got, delivered)
	}
	if n := scalar[int](t, pool, `SELECT count(*) FROM tasks WHERE status <> 'done' OR attempts <> 1`); n != 0 {
		t.Errorf("%d task records changed by the stale rows", n)
	}
}
