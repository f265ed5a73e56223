package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
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
		"SLOT_NAME": slot,
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
	})
	// Streaming before the test writes: /readyz and the tests expect it.
	tg.Ready = func(t testing.TB, c *consumer) {
		kittest.Eventually(t, 30*time.Second, "the consumer to start streaming", c.running.Load)
	}
	tg.Start(t)
	return tg
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

// TestConformanceCursors runs the suite again with the groups' second
// design, GROUPS_DESIGN=cursors: every area, groups included, must pass
// in both designs.
func TestConformanceCursors(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{}, func(t testing.TB) conformance.Target {
		return newTarget(t, map[string]string{"GROUPS_DESIGN": DesignCursors})
	})
}
