package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// cursorsEnv selects the groups' second design.
var cursorsEnv = map[string]string{"GROUPS_DESIGN": DesignCursors}

// writeBatches posts n batches of size events and returns them.
func writeBatches(t testing.TB, base string, n, size int, key string) []logc.Created {
	t.Helper()
	var out []logc.Created
	for i := range n {
		batch := make([]logc.NewEvent, size)
		for j := range batch {
			batch[j] = logc.NewEvent{Type: "cursor.resume", Key: fmt.Sprintf("%s%d", key, j%3), Payload: []byte(fmt.Sprintf(`{"i": %d}`, i*size+j))}
		}
		out = append(out, conformance.PostBatch(t, base, batch)...)
	}
	return out
}

// secondInstance starts another instance on env (the same schema and
// slot as a target's), aborted when the test ends, and returns its URL and
// its slot consumer.
func secondInstance(t testing.TB, env map[string]string) (string, *consumer) {
	t.Helper()
	cfg := kittest.ReadConfig(t, readConfig, maps.Clone(env))
	svc, cons, err := assemble(kittest.Context(t, time.Minute), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	base := kittest.Serve(t, svc)
	t.Cleanup(func() { cons.Abort() })
	return base, cons
}

// groupOf returns group name as GET /groups shows it.
func groupOf(t testing.TB, base, name string) logc.Group {
	t.Helper()
	for _, g := range conformance.Groups(t, base).Groups {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("GET /groups lacks %s", name)
	return logc.Group{}
}

// TestCursorGroupResumesAfterCrashAndRestart: a cursor group behind a
// stream of writes is crashed (its batch in hand rolled back, nothing
// more committed), written to, restarted gracefully and written to again.
// Each time it resumes from its committed cursor: every event reaches it
// exactly once, none is delivered twice (no duplicate counted by the new
// instances: they did not start from an earlier position), and the group
// holds no replication slot.
func TestCursorGroupResumesAfterCrashAndRestart(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, cursorsEnv)
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	written := writeBatches(t, tg.URL(), 5, 100, "r")
	conformance.PutGroup(t, tg.URL(), "resume", logc.FromEarliest)
	if n := kittest.Count(t, kittest.Pool(t, tg.Env["DATABASE_URL"], ""), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`,
		groupSlot(tg.Env["SLOT_NAME"], "resume")); n != 0 {
		t.Errorf("a cursor group has a replication slot")
	}
	// Mid-stream: the writes go on while the group catches up.
	written = append(written, writeBatches(t, tg.URL(), 10, 200, "r")...)
	before := groupOf(t, tg.URL(), "resume").Position
	tg.Crash(t)
	written = append(written, writeBatches(t, tg.URL(), 5, 200, "r")...)
	tg.Restart(t)
	written = append(written, writeBatches(t, tg.URL(), 5, 100, "r")...)
	for _, c := range written {
		conformance.WaitDeliveredTo(t, tg.URL(), "resume", c.ID)
	}
	if n := kittest.Count(t, pool, `SELECT count(*) FROM group_deliveries WHERE grp = 'resume'`); n != len(written) {
		t.Errorf("group resume has %d deliveries, want %d", n, len(written))
	}
	if d := kittest.Counter(t, tg.URL(), logc.StatGroupDuplicates); d != 0 {
		t.Errorf("the restarted instance counted %d group duplicates: it did not resume from the committed cursor", d)
	}
	g := groupOf(t, tg.URL(), "resume")
	if g.LagEvents == nil || *g.LagEvents != 0 || g.Position == "" || !g.Running {
		t.Errorf("group resume after it caught up: %+v", g)
	}
	t.Logf("%d events; cursor at %s before the crash, %s at the end", len(written), before, g.Position)
}

// TestCursorGroupSecondInstanceIsStandby: a second instance of a cursor
// group (same schema) waits while the first holds the group's lock, and
// takes over when the first stops; every event reaches the group once.
func TestCursorGroupSecondInstanceIsStandby(t *testing.T) {
	t.Parallel()
	active := newTarget(t, cursorsEnv)
	pool := kittest.Pool(t, active.Env["DATABASE_URL"], active.Env["DATABASE_SCHEMA"])
	conformance.PutGroup(t, active.URL(), "pair", logc.FromLatest)
	second, _ := secondInstance(t, active.Env)
	kittest.Eventually(t, 30*time.Second, "the active instance to run group pair", func() bool { return groupOf(t, active.URL(), "pair").Running })
	written := writeBatches(t, active.URL(), 3, 50, "s")
	for _, c := range written {
		conformance.WaitDeliveredTo(t, active.URL(), "pair", c.ID)
	}
	if groupOf(t, second, "pair").Running {
		t.Fatalf("both instances run group pair")
	}
	active.Stop()
	kittest.Eventually(t, 60*time.Second, "the second instance to take group pair over", func() bool { return groupOf(t, second, "pair").Running })
	written = append(written, writeBatches(t, second, 3, 50, "s")...)
	for _, c := range written {
		conformance.WaitDeliveredTo(t, second, "pair", c.ID)
	}
	if n := kittest.Count(t, pool, `SELECT count(*) FROM group_deliveries WHERE grp = 'pair'`); n != len(written) {
		t.Errorf("group pair has %d deliveries, want %d", n, len(written))
	}
}

// TestLaggingCursorHoldsTableRows: with a cursor group stalled (the test
// holds its lock, so its consumer waits as a standby), the retention
// cleaner keeps the events the group has not received, however old; once
// the group runs, it receives them and the cleaner removes them. A lagging
// cursor holds table rows, not WAL.
func TestLaggingCursorHoldsTableRows(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GROUPS_DESIGN": DesignCursors, "EVENT_RETENTION": "1ms", "RETENTION_INTERVAL": "20ms"}
	tg := newTarget(t, env)
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	lock := kittest.Conn(t, tg.Env["DATABASE_URL"])
	ctx := kittest.Context(t, time.Minute)
	key := cursorLockKey(tg.Env["DATABASE_SCHEMA"], "lagging")
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	conformance.PutGroup(t, tg.URL(), "lagging", logc.FromEarliest)
	written := writeBatches(t, tg.URL(), 1, 5, "l")
	for _, c := range written {
		conformance.WaitDelivered(t, tg.URL(), c.ID)
	}
	passes := kittest.Counter(t, tg.URL(), cleaner.StatPasses)
	kittest.Eventually(t, 10*time.Second, "three more cleaner passes", func() bool { return kittest.Counter(t, tg.URL(), cleaner.StatPasses) >= passes+3 })
	if n := kittest.Count(t, pool, `SELECT count(*) FROM group_deliveries WHERE grp = 'lagging'`); n != 0 {
		t.Fatalf("the stalled group received %d events: the test's lock did not stall it", n)
	}
	for _, c := range written {
		if s := kittest.Status(t, tg.URL()+"/events/"+c.ID); s != 200 {
			t.Errorf("GET /events/%s = %d while a cursor has not passed it: the cleaner removed it", c.ID, s)
		}
	}
	if g := groupOf(t, tg.URL(), "lagging"); g.Running || g.LagEvents == nil || *g.LagEvents < int64(len(written)) {
		t.Errorf("the stalled group: %+v, want not running with lag_events >= %d", g, len(written))
	}
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			var xmin, txids string
			_ = pool.QueryRow(context.Background(), `SELECT pg_snapshot_xmin(pg_current_snapshot())::text, coalesce((SELECT string_agg(txid::text || '/' || seq, ' ') FROM deliveries), '')`).Scan(&xmin, &txids)
			t.Logf("group %+v; watermark %s; deliveries %s; messages %d", groupOf(t, tg.URL(), "lagging"), xmin, txids, kittest.Count(t, pool, `SELECT count(*) FROM messages`))
		}
	}()
	kittest.Eventually(t, 30*time.Second, "the group to receive the events and the cleaner to remove them", func() bool {
		// group_delivered, not group_deliveries rows: those go with their
		// events, at a retention of 1ms.
		return kittest.Counter(t, tg.URL(), logc.StatGroupDelivered) == int64(len(written)) &&
			kittest.Count(t, pool, `SELECT count(*) FROM messages`) == 0
	})
}

// TestRetentionCursors runs the pair's retention check in design cursors.
func TestRetentionCursors(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"GROUPS_DESIGN": DesignCursors, "EVENT_RETENTION": "1h", "RETENTION_INTERVAL": "20ms", "STANDBY_STATUS_INTERVAL": "100ms"})
	conformance.Retention(t, tg, tg.Env)
}

// TestCursorGroupsWakeOnEachRecordedBatch: with the poll out of the way
// (GROUP_POLL_INTERVAL=1h), a cursor group receives events through its
// wake-ups alone, and each batch the default consumer records is
// announced on the schema's channel for the other instances' LISTEN.
func TestCursorGroupsWakeOnEachRecordedBatch(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"GROUPS_DESIGN": DesignCursors, "GROUP_POLL_INTERVAL": "1h"})
	conformance.PutGroup(t, tg.URL(), "woken", logc.FromLatest)
	listen := kittest.Listen(t, tg.Env["DATABASE_URL"], notifyChannel(tg.Env["DATABASE_SCHEMA"]))
	for i := range 3 {
		c := conformance.Post(t, tg.URL(), logc.NewEvent{Type: "woken", Key: fmt.Sprint(i)})
		conformance.WaitDeliveredTo(t, tg.URL(), "woken", c.ID)
	}
	if n := len(kittest.Notifications(t, listen, 500*time.Millisecond)); n == 0 {
		t.Errorf("no NOTIFY on %s after three recorded batches", notifyChannel(tg.Env["DATABASE_SCHEMA"]))
	}
}

// TestCursorGroupWokenByAnotherInstance: the group runs on a second
// instance whose slot consumer waits as a standby, so its cursor consumer
// has no local wake-up; with the poll at 1h it receives the events the
// first instance's default consumer records through the NOTIFY that
// announces them and its own LISTEN alone.
func TestCursorGroupWokenByAnotherInstance(t *testing.T) {
	t.Parallel()
	first := newTarget(t, map[string]string{"GROUPS_DESIGN": DesignCursors, "GROUP_POLL_INTERVAL": "1h"})
	conformance.PutGroup(t, first.URL(), "remote", logc.FromLatest)
	kittest.Eventually(t, 30*time.Second, "the first instance to run group remote", func() bool { return groupOf(t, first.URL(), "remote").Running })
	// The first instance's groups end as in a crash (its slot consumer
	// streams on): its session, and the group's lock, go.
	first.App().onAbort()
	second, cons := secondInstance(t, first.Env)
	kittest.Eventually(t, 30*time.Second, "the second instance to run group remote", func() bool { return groupOf(t, second, "remote").Running })
	if cons.Running() {
		t.Fatalf("the second instance streams the slot: the first one's should")
	}
	for i := range 3 {
		c := conformance.Post(t, first.URL(), logc.NewEvent{Type: "remote", Key: fmt.Sprint(i)})
		conformance.WaitDeliveredTo(t, second, "remote", c.ID)
	}
}

// TestCursorNeverPassesARowThatCommitsLater: a deliveries row of a
// transaction that is still open (a lower txid and seq) must not be
// passed by a cursor that reads a later, committed row. The test opens
// such a transaction (an event and its deliveries row, as a consumer
// batch slow to commit), has an event written and recorded after it,
// gives the group time to read, then commits: both reach the group. A
// cursor reading without the xid watermark moves past the open row and
// never delivers it.
func TestCursorNeverPassesARowThatCommitsLater(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, cursorsEnv)
	conformance.PutGroup(t, tg.URL(), "ordered", logc.FromEarliest)
	ctx := kittest.Context(t, time.Minute)
	conn := kittest.Conn(t, tg.Env["DATABASE_URL"])
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	early := "01890000-0000-7000-8000-00000000e001"
	schema := tg.Env["DATABASE_SCHEMA"]
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.messages (id, type, key) VALUES ($1, 'slow', 'k')`, early); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.deliveries (id, delivered_at) VALUES ($1, now())`, early); err != nil {
		t.Fatal(err)
	}
	late := conformance.Post(t, tg.URL(), logc.NewEvent{Type: "fast", Key: "k"})
	conformance.WaitDelivered(t, tg.URL(), late.ID)
	// Not a measurement: reads of the group's consumer happen meanwhile
	// (each wake-up, each quick retry).
	time.Sleep(time.Second)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	conformance.WaitDeliveredTo(t, tg.URL(), "ordered", early)
	conformance.WaitDeliveredTo(t, tg.URL(), "ordered", late.ID)
}
