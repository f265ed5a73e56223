package main

import (
	"context"
	"flag"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// target runs no-kafka instances on one schema and one slot for the
// conformance suite and the service's own tests.
type target struct {
	*conformance.ServiceTarget[*consumer]
}

// newTarget starts an instance on a fresh schema and slot; extra
// overrides the environment. The slot is dropped when the test ends.
func newTarget(t testing.TB, extra map[string]string) *target {
	t.Helper()
	slot := kittest.UniqueName(t, "s")
	tg := &target{conformance.NewServiceTarget(t, readConfig, assemble, map[string]string{
		"SLOT_NAME":   slot,
		"SLOT_PLUGIN": testPlugin(),
		// Long: the suite's crash test relies on nothing being confirmed
		// before it crashes (keepalive requests still get answers).
		"STANDBY_STATUS_INTERVAL": "1h",
		// Each group is a slot decoding all WAL: the suite's bound check
		// fills the service up to MAX_GROUPS, so keep it small.
		"MAX_GROUPS":          "3",
		"GROUP_POLL_INTERVAL": "500ms",
	}, extra)}
	t.Cleanup(func() {
		dropSlot(t, tg.Env["DATABASE_URL"], slot)
		dropGroupSlots(t, tg.Env["DATABASE_URL"], slot)
		dropPublication(t, tg.Env["DATABASE_URL"], slot)
	})
	// Streaming before the test writes: /readyz and the tests expect it.
	tg.Ready = func(t testing.TB, c *consumer) {
		kittest.Eventually(t, 30*time.Second, "the consumer to start streaming", c.running.Load)
	}
	tg.Start(t)
	return tg
}

// testPlugin is the output plugin the service's tests decode with:
// SLOT_PLUGIN of the test's environment (pgoutput on a server without
// wal2json, such as PostgreSQL 18.4 from npm), else DefaultSlotPlugin.
func testPlugin() string { return kittest.Env("SLOT_PLUGIN", DefaultSlotPlugin) }

// otherPlugin is the plugin the tests do not decode with by default.
func otherPlugin() string {
	if testPlugin() == PluginPgoutput {
		return PluginWal2json
	}
	return PluginPgoutput
}

// requirePlugin skips the test when the server lacks plugin (wal2json is
// an extension; pgoutput is built in): a temporary slot made with it
// fails to load it (58P01, "could not access file").
func requirePlugin(t testing.TB, plugin string) {
	t.Helper()
	conn := kittest.Conn(t, kittest.PostgresURL(t))
	_, err := conn.Exec(kittest.Context(t, time.Minute), `SELECT pg_create_logical_replication_slot($1, $2, true)`, kittest.UniqueName(t, "probe"), plugin)
	// The slot is temporary: it goes with the connection.
	_ = conn.Close(context.Background())
	switch {
	case postgres.SQLSTATE(err) == pgerrcode.UndefinedFile:
		t.Skipf("the server has no %s: %v", plugin, err)
	case err != nil:
		t.Fatalf("probe plugin %s: %v", plugin, err)
	}
}

// dropPublication drops the publication of the service whose SLOT_NAME
// is slot (SLOT_PLUGIN=pgoutput made it).
func dropPublication(t testing.TB, url, slot string) {
	pool := kittest.Pool(t, url, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{slot}.Sanitize()); err != nil {
		t.Errorf("drop publication %s: %v", slot, err)
	}
}

func dropSlot(t testing.TB, url, slot string) {
	pool := kittest.Pool(t, url, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("drop slot %s: %v", slot, err)
			return
		}
		time.Sleep(200 * time.Millisecond) // the walsender is still exiting
	}
}

// dropGroupSlots drops the slots of the groups of the service whose
// SLOT_NAME is base: a test's groups leave none behind.
func dropGroupSlots(t testing.TB, url, base string) {
	pool := kittest.Pool(t, url, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT slot_name::text FROM pg_replication_slots WHERE slot_name LIKE '%\_g\_%'`)
	if err != nil {
		t.Errorf("list group slots: %v", err)
		return
	}
	slots, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Errorf("list group slots: %v", err)
		return
	}
	for _, s := range slots {
		if _, ours := groupOfSlot(base, s); ours {
			dropSlot(t, url, s)
		}
	}
}

// GroupHeld reports whether the group's replication slot exists
// (conformance.GroupHolder): DELETE /groups/{name} must drop it.
//
// In design cursors what a group holds is its cursor row (and so the
// table rows the retention cleaner keeps for it).
func (tg *target) GroupHeld(t testing.TB, name string) bool {
	t.Helper()
	if tg.Env["GROUPS_DESIGN"] == DesignCursors {
		return kittest.Count(t, kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"]),
			`SELECT count(*) FROM group_cursors WHERE grp = $1`, name) > 0
	}
	return kittest.Count(t, kittest.Pool(t, tg.Env["DATABASE_URL"], ""), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`,
		groupSlot(tg.Env["SLOT_NAME"], name)) > 0
}

// Crash closes the replication connection without a final standby status
// (nothing read since the last confirmation is confirmed), then starts a
// new instance.
func (tg *target) Crash(t testing.TB) {
	t.Helper()
	tg.App().Abort()
	tg.Restart(t)
}

// TestConformance runs the log pair's one suite against no-kafka.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{}, func(t testing.TB) conformance.Target { return newTarget(t, nil) })
}

// otherPluginTests are the suite's subtests TestConformanceOtherPlugin
// runs: those the decoder decides (delivery in order, a batch of 1000 in
// one transaction, crash and restart resuming from the slot, groups'
// slots and their hand-over). Input checks and the HTTP side do not
// depend on the plugin; the full suite runs on testPlugin.
var otherPluginTests = []string{"WriteGetWait", "Batch1000ArrivesWhole", "OrderingPerKey", "CrashRedeliversObservedOnce",
	"RestartMidStreamLosesNothing", "GroupsEarliestAndLatest", "GroupEarliestHandOverUnderWrites"}

// TestConformanceOtherPlugin runs otherPluginTests with the other output
// plugin (pgoutput, or wal2json when the tests run on pgoutput), on
// schemas and slots of their own; skipped on a server without it.
func TestConformanceOtherPlugin(t *testing.T) {
	t.Parallel()
	plugin := otherPlugin()
	requirePlugin(t, plugin)
	var mu sync.Mutex
	ran := map[string]bool{}
	t.Cleanup(func() {
		if f := flag.Lookup("test.run"); f != nil && strings.Contains(f.Value.String(), "/") {
			return // a chosen subtest
		}
		for _, name := range otherPluginTests {
			if !ran[name] {
				t.Errorf("the suite has no subtest %s (renamed?): update otherPluginTests", name)
			}
		}
	})
	conformance.Run(t, conformance.Features{}, func(t testing.TB) conformance.Target {
		name := path.Base(t.Name())
		if !slices.Contains(otherPluginTests, name) {
			t.Skipf("not a test the plugin decides: TestConformance runs it on %s", testPlugin())
		}
		mu.Lock()
		ran[name] = true
		mu.Unlock()
		return newTarget(t, map[string]string{"SLOT_PLUGIN": plugin})
	})
}

// TestConformanceCursors runs the suite again with the groups' second
// design, GROUPS_DESIGN=cursors: every area, groups included, must pass
// in both designs.
func TestConformanceCursors(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{}, func(t testing.TB) conformance.Target {
		return newTarget(t, map[string]string{"GROUPS_DESIGN": DesignCursors})
	})
}
