package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestGroupSlotNames checks that every group's slot is a valid slot name
// (at most 63 characters of a-z, 0-9 and _), different per group and per
// SLOT_NAME, and that groupOfSlot finds the group back, also through the
// hashed form of a long SLOT_NAME.
func TestGroupSlotNames(t *testing.T) {
	t.Parallel()
	bases := []string{"no_kafka", strings.Repeat("s", 63), "s_" + strings.Repeat("x", 50)}
	names := []string{"a", "billing", "a_g_b", strings.Repeat("z", 32)}
	seen := map[string]string{}
	for _, base := range bases {
		for _, name := range names {
			s := groupSlot(base, name)
			if !slotRE.MatchString(s) {
				t.Errorf("groupSlot(%q, %q) = %q: not a slot name", base, name, s)
			}
			if other, dup := seen[s]; dup {
				t.Errorf("groupSlot(%q, %q) = %q, the same as %s", base, name, s, other)
			}
			seen[s] = base + "/" + name
			if got, ok := groupOfSlot(base, s); !ok || got != name {
				t.Errorf("groupOfSlot(%q, %q) = %q %v, want %q", base, s, got, ok, name)
			}
		}
	}
	for _, s := range []string{"no_kafka", "no_kafka_g_", "no_kafka_g_Bad", "other_g_billing", "no_kafka_x_g_billing"} {
		if name, ok := groupOfSlot("no_kafka", s); ok {
			t.Errorf("groupOfSlot(no_kafka, %q) = %q: not one of its group slots", s, name)
		}
	}
}

// A group whose set-up was interrupted (its creator died during the
// replay: the row not ready, a slot left behind, part of the replay
// recorded) is set up again by the next reconcile: the leftover slot is
// dropped and created anew, the table replayed (what was recorded before
// skipped), and every event, earlier and later, reaches the group once.
func TestInterruptedGroupSetUpIsRedone(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	base := tg.URL()
	written := conformance.PostBatch(t, base, []logc.NewEvent{ev("o1"), ev("o2"), ev("o1"), ev("o2")})
	conformance.WaitDelivered(t, base, written[len(written)-1].ID)
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	// The slot first, then the row in one statement with the replay's
	// first delivery: a reconcile in between sees either no group (and
	// may drop the slot: the set-up creates one anyway) or all of it.
	kittest.Exec(t, pool, `SELECT pg_create_logical_replication_slot($1, $2)`, groupSlot(tg.Env["SLOT_NAME"], "orphan"), tg.Env["SLOT_PLUGIN"])
	kittest.Exec(t, pool, `WITH g AS (INSERT INTO groups (name, from_position, ready, created_at) VALUES ('orphan', 'earliest', false, now() - interval '1 hour'))
		INSERT INTO group_deliveries (grp, id, delivered_at) VALUES ('orphan', $1, now())`, written[0].ID)
	orphan := func() (g logc.Group) {
		for _, x := range conformance.Groups(t, base).Groups {
			if x.Name == "orphan" {
				g = x
			}
		}
		return g
	}
	kittest.Eventually(t, 60*time.Second, "group orphan ready again", func() bool { return orphan().Ready })
	// After the replay, through the group's new slot.
	after := conformance.Post(t, base, ev("o1"))
	written = append(written, after)
	for _, c := range written[1:] {
		conformance.WaitDeliveredTo(t, base, "orphan", c.ID)
	}
	if g := orphan(); g.Slot == nil || g.Slot.ConfirmedFlushLSN == "" {
		t.Fatalf("group orphan after its set-up was redone: %+v", g)
	}
	if n := kittest.Count(t, pool, `SELECT count(*) FROM group_deliveries WHERE grp = 'orphan'`); n != len(written) {
		t.Errorf("group orphan has %d deliveries, want %d (each event once)", n, len(written))
	}
	if st := conformance.Consumer(t, base); st.Duplicates != 0 {
		t.Errorf("the default group absorbed %d duplicates: the group's set-up touched it", st.Duplicates)
	}
	t.Logf("group orphan set up again, at %s", orphan().Position)
}

// A consumer group's slot is dropped under the running service, as a
// promotion on PostgreSQL 15 or 16 loses it: the group's consumer makes
// it again and delivers, from the messages table, what the group had
// not had; every event written afterwards reaches the group, and none
// from before the group (it is from latest).
func TestMissingGroupSlotIsMadeAgainWhileRunning(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"STANDBY_STATUS_INTERVAL": "100ms"})
	base := tg.URL()
	before := conformance.PostDelivered(t, base, ev("gm"))
	conformance.PutGroup(t, base, "gm", logc.FromLatest)
	first := conformance.Post(t, base, ev("gm"))
	conformance.WaitDeliveredTo(t, base, "gm", first.ID)
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], "")
	dropSlotUnder(t, pool, groupSlot(tg.Env["SLOT_NAME"], "gm"))
	var written []logc.Created
	for range 20 {
		written = append(written, conformance.Post(t, base, ev("gm")))
	}
	for _, c := range written {
		conformance.WaitDeliveredTo(t, base, "gm", c.ID)
	}
	spool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	var n int
	if err := spool.QueryRow(kittest.Context(t, 10*time.Second), `SELECT count(*) FROM group_deliveries WHERE grp = 'gm' AND id = $1`, before.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("the event from before the group (from latest) has %d deliveries to it (%v), want 0", n, err)
	}
}

// A group from earliest receives the events written before it while its
// slot's creation still waits: CREATE_REPLICATION_SLOT waits for every
// transaction holding an xid in the cluster (in any database), and one is
// held open here, as another client's could be. The backlog comes
// from the first replay at once; the events written while the slot waits
// come from the second replay (the exported snapshot), those written after
// it from the slot; each once, in write order, no duplicate counted. The
// transaction is held only until the first event arrives (at most
// slotWaitBound) and for the writes during the wait: other tests on the
// server wait as long.
func TestGroupBacklogDoesNotWaitForItsSlot(t *testing.T) {
	t.Parallel()
	const slotWaitBound = 5 * time.Second
	tg := newTarget(t, nil)
	base := tg.URL()
	var written []logc.Created
	for range 30 {
		written = append(written, conformance.Post(t, base, ev("bw")))
	}
	conformance.WaitDelivered(t, base, written[len(written)-1].ID)
	// An open transaction with an xid, on a connection of its own.
	holder := kittest.Conn(t, kittest.PostgresURL(t))
	ctx := kittest.Context(t, time.Minute)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(func() { _ = tx.Rollback(context.Background()) })
	t.Cleanup(release)
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	conformance.PutGroup(t, base, "backlog", logc.FromEarliest)
	var e logc.Event
	s, raw := kittest.Do(t, http.MethodGet, base+"/events/"+written[0].ID+"/wait?group=backlog&timeout="+slotWaitBound.String(), nil, &e)
	first := time.Since(start)
	if s != http.StatusOK {
		release()
		t.Fatalf("group backlog had not received the first event of its backlog %v after the PUT, while its slot's creation waited: %d %s", first.Round(time.Millisecond), s, raw)
	}
	// Then its slot's creation waits for the transaction (the first
	// replay runs before it: it may not have started yet).
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], "")
	kittest.Eventually(t, 30*time.Second, "the group's slot creation waiting for the open transaction", func() bool {
		return kittest.Count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'
			AND wait_event = 'transactionid' AND query LIKE 'CREATE_REPLICATION_SLOT ' || $1 || ' %'`,
			groupSlot(tg.Env["SLOT_NAME"], "backlog")) == 1
	})
	if g := groupOf(t, base, "backlog"); g.Ready {
		t.Errorf("group backlog is ready while its slot is being created: %+v", g)
	}
	for range 10 {
		written = append(written, conformance.Post(t, base, ev("bw")))
	}
	release()
	t.Logf("first event of the backlog %v after the PUT, while the slot's creation waited for a transaction", first.Round(time.Millisecond))
	kittest.Eventually(t, 60*time.Second, "group backlog ready", func() bool { return groupOf(t, base, "backlog").Ready })
	for range 10 {
		written = append(written, conformance.Post(t, base, ev("bw")))
	}
	var last int64
	for i, c := range written {
		got := conformance.WaitDeliveredTo(t, base, "backlog", c.ID)
		if *got.DeliverySeq <= last {
			t.Errorf("event %d received at seq %d, after an earlier write received at %d", i, *got.DeliverySeq, last)
		}
		last = *got.DeliverySeq
	}
	spool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	if n := kittest.Count(t, spool, `SELECT count(*) FROM group_deliveries WHERE grp = 'backlog'`); n != len(written) {
		t.Errorf("group backlog has %d deliveries, want %d", n, len(written))
	}
	if d := kittest.Counter(t, base, logc.StatGroupDuplicates); d != 0 {
		t.Errorf("%d group duplicates: the replays and the slot overlapped", d)
	}
}
