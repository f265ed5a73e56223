package main

import (
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// cursorsEnv selects the cursors design with one kind of three
// subscribers.
var cursorsEnv = map[string]string{"FANOUT_DESIGN": DesignCursors, "FANOUT": "order.placed:email,warehouse,analytics"}

// TestConfigFanoutDesign: FANOUT_DESIGN defaults to copies, reads
// cursors, and refuses anything else by name.
func TestConfigFanoutDesign(t *testing.T) {
	t.Parallel()
	if c := configtest.Defaults(t, readConfig); c.FanoutDesign != DesignCopies {
		t.Errorf("default FANOUT_DESIGN %q, want copies", c.FanoutDesign)
	}
	if c := kittest.ReadConfig(t, readConfig, map[string]string{"FANOUT_DESIGN": "cursors"}); c.FanoutDesign != DesignCursors {
		t.Errorf("FANOUT_DESIGN=cursors read as %q", c.FanoutDesign)
	}
	for _, bad := range []string{"cursor", "COPIES", "pgq"} {
		configtest.NamesBadVariables(t, readConfig, map[string]string{"FANOUT_DESIGN": bad}, "FANOUT_DESIGN")
	}
}

// postOrders posts n order.placed tasks in one batch and returns every
// copy id the answer names.
func postOrders(t testing.TB, base string, n int) []string {
	t.Helper()
	b := queue.BatchRequest{Tasks: make([]queue.TaskRequest, n)}
	for i := range b.Tasks {
		b.Tasks[i] = queue.TaskRequest{Kind: "order.placed"}
	}
	var e queue.BatchEnqueued
	if s, raw := kittest.Do(t, http.MethodPost, base+"/tasks/batch", b, &e); s != http.StatusAccepted || len(e.Copies) != n {
		t.Fatalf("POST /tasks/batch: %d %s", s, raw)
	}
	var out []string
	for _, c := range e.Copies {
		out = append(out, c...)
	}
	return out
}

// doneCopies counts the done task records of the cursors design's view
// (tasks and the copies that live as their message).
func doneCopies(t testing.TB, sc schema) int {
	return scalar[int](t, sc.pool, `SELECT count(*) FROM task_records WHERE status = 'done'`)
}

// TestCursorsKillNineMidStream: an instance is killed (-9) while batches
// of copies are in its hands, and a new instance starts on the same
// schema. The killed batches were never committed, so their cursors did
// not move: the new instance takes the subscribers' locks (the dead
// connections' transactions are gone) and runs those copies again. Every
// copy of every accepted task, before and after the kill, ends done,
// once (one record, never moved into tasks), and each cursor ends at the
// last message, at its last batch.
func TestCursorsKillNineMidStream(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	env := map[string]string{"DATABASE_URL": sc.url, "DATABASE_SCHEMA": sc.name, "POLL_INTERVAL": "100ms", "CLAIM_BATCH": "64"}
	maps.Copy(env, cursorsEnv)
	maps.Copy(env, conformance.Settings{Workers: 4, Work: 20 * time.Millisecond}.Env())
	victim := conformance.StartProcess(t, env)
	var posted []string
	for range 4 {
		posted = append(posted, postOrders(t, victim.URL(), 100)...)
	}
	var held int64
	kittest.Eventually(t, time.Minute, "the victim holding a batch of copies", func() bool {
		c := kittest.Counters(t, victim.URL())
		held = c[queue.CounterDelivered] - c[queue.CounterProcessed]
		return c[queue.CounterProcessed] >= 8 && held > 0
	})
	victim.Kill(t)
	// The restart, and more tasks: the cursors go on from where the
	// victim's last commits left them.
	survivor := conformance.StartProcess(t, env)
	posted = append(posted, postOrders(t, survivor.URL(), 100)...)
	kittest.Eventually(t, 2*time.Minute, "every copy done", func() bool { return doneCopies(t, sc) >= len(posted) })
	recs := map[string]int{}
	rows, err := sc.pool.Query(kittest.Context(t, 30*time.Second), `SELECT id::text, status, attempts FROM task_records`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, status string
		var attempts int
		if err := rows.Scan(&id, &status, &attempts); err != nil {
			t.Fatal(err)
		}
		if status != queue.StatusDone || attempts != 1 {
			t.Errorf("copy %s: %s after %d attempts, want done after 1", id, status, attempts)
		}
		recs[id]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range posted {
		if recs[id] != 1 {
			t.Errorf("copy %s accepted and recorded %d times, want once", id, recs[id])
		}
	}
	if len(recs) != len(posted) {
		t.Errorf("%d records, want %d (one per copy)", len(recs), len(posted))
	}
	if n := scalar[int](t, sc.pool, `SELECT count(*) FROM tasks`); n != 0 {
		t.Errorf("%d copies moved into tasks; none failed", n)
	}
	// Each subscriber's batches: consecutive ranges, the last at the last
	// message. (A batch rolled back by the kill left no row.)
	if n := scalar[int](t, sc.pool, `
SELECT count(*) FROM fanout_cursors c
 WHERE (c.upto_xid, c.upto_id) <> (SELECT xid, id FROM fanout_messages ORDER BY xid DESC, id DESC LIMIT 1)
    OR (c.upto_xid, c.upto_id) <> (SELECT upto_xid, upto_id FROM fanout_batches b WHERE b.subscriber = c.subscriber ORDER BY upto_xid DESC, upto_id DESC LIMIT 1)`); n != 0 {
		t.Errorf("%d cursors short of the last message or of their last batch", n)
	}
	survivorDone := kittest.Counters(t, survivor.URL())[queue.CounterProcessed]
	t.Logf("%d copies: killed holding about %d copies of uncommitted batches; the restarted instance processed %d, the victim the rest before the kill",
		len(posted), held, survivorDone)
}

// TestCursorsWaitForAnOlderTransaction: a message whose transaction
// began first (lower xid) but commits after a later message must not be
// skipped. The test holds such a transaction open while a task is posted
// and committed; the reader sees the posted message wait above the
// watermark instead of reading it and moving its cursor past the older,
// uncommitted one. Once the older commits, both messages' copies are
// done: had the cursor passed the older message, its copies would never
// be.
func TestCursorsWaitForAnOlderTransaction(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	in := sc.start(t, conformance.Settings{Workers: 2}, cursorsEnv)
	ctx := kittest.Context(t, time.Minute)
	tx, err := sc.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	older := ids.New()
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil { // its xid, now
		t.Fatal(err)
	}
	waitsBefore := in.App().watermarkWaits.Load()
	later := postOrders(t, in.URL(), 1)
	kittest.Eventually(t, 30*time.Second, "the reader holding the later message back", func() bool {
		return in.App().watermarkWaits.Load() > waitsBefore
	})
	if _, err := tx.Exec(ctx, `INSERT INTO fanout_messages (id, kind, subscribers, enqueued_at) VALUES ($1, 'order.placed', '{email,warehouse,analytics}', now())`, older); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var olderCopies []string
	for i := range 3 {
		olderCopies = append(olderCopies, queue.CopyID(older, i))
	}
	for _, id := range append(later, olderCopies...) {
		var task queue.Task
		if s, raw := kittest.Do(t, http.MethodGet, in.URL()+"/tasks/"+id+"/wait?timeout=30s", nil, &task); s != http.StatusOK || task.Status != queue.StatusDone {
			t.Errorf("copy %s: %d %s, want done", id, s, raw)
		}
	}
	if slices.Contains(later, older) {
		t.Fatal("ids collide")
	}
}

// TestCursorsRetentionWaitsForEverySubscriber: a message row goes only
// once every subscriber has passed it. The test holds warehouse's batch
// lock, as a busy instance would: email's and analytics' copies are done
// and their retention is over, yet the cleaner's passes keep the message,
// and warehouse's copy stays queued and readable; released, warehouse
// passes it and the cleaner removes the message and its batch rows.
func TestCursorsRetentionWaitsForEverySubscriber(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	ctx := kittest.Context(t, 2*time.Minute)
	conn, err := sc.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	lock := `hashtextextended($1 || ':order.placed@warehouse', 0)`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+lock+`)`, sc.name); err != nil {
		t.Fatal(err)
	}
	in := sc.start(t, conformance.Settings{Workers: 2, TaskRetention: time.Millisecond, RetentionInterval: 20 * time.Millisecond}, cursorsEnv)
	copies := postOrders(t, in.URL(), 1)
	for _, i := range []int{0, 2} { // email, analytics
		var task queue.Task
		if s, raw := kittest.Do(t, http.MethodGet, in.URL()+"/tasks/"+copies[i]+"/wait?timeout=30s", nil, &task); s != http.StatusOK || task.Status != queue.StatusDone {
			t.Fatalf("copy %s: %d %s, want done", copies[i], s, raw)
		}
	}
	passes := kittest.Counters(t, in.URL())[cleaner.StatPasses]
	kittest.CountersReach(t, 30*time.Second, cleaner.StatPasses, passes+3, in.URL())
	if n := scalar[int](t, sc.pool, `SELECT count(*) FROM fanout_messages`); n != 1 {
		t.Fatalf("%d messages after the cleaner's passes, want 1: warehouse has not passed it", n)
	}
	var task queue.Task
	if s, raw := kittest.Do(t, http.MethodGet, in.URL()+"/tasks/"+copies[1], nil, &task); s != http.StatusOK || task.Status != queue.StatusQueued {
		t.Errorf("warehouse's copy: %d %s, want queued", s, raw)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(`+lock+`)`, sc.name); err != nil {
		t.Fatal(err)
	}
	kittest.CountersReach(t, 30*time.Second, cleaner.StatRemovedPrefix+"fanout_messages", 1, in.URL())
	kittest.Eventually(t, 30*time.Second, "the batch rows removed", func() bool {
		return scalar[int](t, sc.pool, `SELECT count(*) FROM fanout_batches`) == 0
	})
	if n := scalar[int](t, sc.pool, `SELECT count(*) FROM fanout_messages`); n != 0 {
		t.Errorf("%d messages left", n)
	}
}

// TestCursorsCopyDeadAtFirstFailure: with MAX_ATTEMPTS=1 a copy that
// fails in its cursor batch goes straight to the dead letters: a tasks
// row under its copy id, dead after one attempt, with no queue row.
func TestCursorsCopyDeadAtFirstFailure(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	in := sc.start(t, conformance.Settings{Workers: 2, MaxAttempts: 1}, cursorsEnv)
	var e queue.Enqueued
	if s, raw := kittest.Do(t, http.MethodPost, in.URL()+"/tasks", queue.TaskRequest{Kind: "order.placed", FailTimes: 1}, &e); s != http.StatusAccepted || len(e.IDs) != 3 {
		t.Fatalf("POST /tasks: %d %s", s, raw)
	}
	for _, id := range e.IDs {
		var task queue.Task
		if s, raw := kittest.Do(t, http.MethodGet, in.URL()+"/tasks/"+id+"/wait?timeout=30s", nil, &task); s != http.StatusOK || task.Status != queue.StatusDead || task.Attempts != 1 || task.LastError == nil {
			t.Errorf("copy %s: %d %s, want dead after 1 attempt", id, s, raw)
		}
	}
	if n := scalar[int](t, sc.pool, `SELECT count(*) FROM tasks WHERE status = 'dead'`); n != 3 {
		t.Errorf("%d dead tasks rows, want the 3 copies", n)
	}
	checkQueueEmpty(t, sc.pool)
}
