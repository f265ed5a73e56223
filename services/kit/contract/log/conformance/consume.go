// Not an area of Run: CONSUME_GROUPS, which the services check on their
// own (it needs an instance started with it, and a second one).

package conformance

import (
	"net/http"
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// ConsumedGroup and StoppedGroup are UnconsumedGroup's groups: its target
// runs with CONSUME_GROUPS=ConsumedGroup, its second instance with
// CONSUME_GROUPS=StoppedGroup.
const ConsumedGroup, StoppedGroup = "consumed", "stopped"

// unconsumedEvents is how many events UnconsumedGroup writes while the
// group is stopped.
const unconsumedEvents = 60

// UnconsumedGroup is both sides' test of CONSUME_GROUPS on the real
// servers, for a target started with CONSUME_GROUPS=ConsumedGroup; second
// starts another instance on the target's state (schema, slot or topic)
// with CONSUME_GROUPS=consume, to be stopped when the test ends, and
// returns its URL.
//
// Both groups are created, from latest, through the target. StoppedGroup,
// which the target does not consume, holds there what any group holds
// (GroupHolder: its slot, cursor row or Kafka group). While events are
// written the target delivers every one to the default group and to
// ConsumedGroup and none to StoppedGroup, which GET /groups shows ready,
// not running, with every lag the side reports grown (lag_events by at
// least the events written; lag_bytes; with a slot, its retained WAL up,
// its restart_lsn where it was and no walsender on it). The second
// instance, which lists it, then delivers every one of them to it (the
// catch-up), once and per key in order, and a DELETE through the target,
// which never consumed the group, releases what it held.
func UnconsumedGroup(t *testing.T, tg Target, second func(t testing.TB, consume string) string) {
	t.Helper()
	base := tg.URL()
	for _, g := range []string{ConsumedGroup, StoppedGroup} {
		if s := PutGroup(t, base, g, logc.FromLatest); s != http.StatusCreated {
			t.Fatalf("PUT /groups/%s = %d, want 201", g, s)
		}
	}
	holder, canCheck := tg.(GroupHolder)
	if canCheck && !holder.GroupHeld(t, StoppedGroup) {
		t.Errorf("PUT through an instance that does not consume group %s left the side holding nothing for it", StoppedGroup)
	}
	before := groupIn(t, base, StoppedGroup)
	batch := events(unconsumedEvents, "k1", "k2", "k3")
	written := PostBatch(t, base, batch)
	keys := make([]string, len(batch))
	for i, e := range batch {
		keys[i] = e.Key
	}
	// Every event reached this instance's consumers: the default group's
	// and ConsumedGroup's have them all, StoppedGroup none.
	checkGroupOnce(t, base, ConsumedGroup, written, keys)
	for _, c := range written {
		WaitDelivered(t, base, c.ID)
		if e := getIn(t, base, StoppedGroup, c.ID); e.DeliveredAt != nil {
			t.Fatalf("group %s received %s on an instance whose CONSUME_GROUPS is %s", StoppedGroup, c.ID, ConsumedGroup)
		}
	}
	after := groupIn(t, base, StoppedGroup)
	if !after.Ready || after.Running {
		t.Errorf("group %s on an instance that does not consume it: ready %v, running %v; want ready, not running", StoppedGroup, after.Ready, after.Running)
	}
	checkLagGrew(t, before, after, unconsumedEvents)
	if g := groupIn(t, base, ConsumedGroup); !g.Running {
		t.Errorf("group %s, which the instance consumes, is not running: %+v", ConsumedGroup, g)
	}

	// The catch-up: an instance that lists the group delivers it all.
	other := second(t, StoppedGroup)
	checkGroupOnce(t, other, StoppedGroup, written, keys)
	kittest.Eventually(t, waitTimeout, "the second instance to show group "+StoppedGroup+" running", func() bool {
		return groupIn(t, other, StoppedGroup).Running
	})
	if g := groupIn(t, other, ConsumedGroup); g.Running {
		t.Errorf("group %s runs on the second instance, whose CONSUME_GROUPS is %s", ConsumedGroup, StoppedGroup)
	}
	if g := groupIn(t, base, StoppedGroup); g.Running {
		t.Errorf("group %s runs on the first instance after the catch-up elsewhere", StoppedGroup)
	}

	// Deleted through the instance that never consumed it.
	if s, raw := kittest.Do(t, http.MethodDelete, base+"/groups/"+StoppedGroup, nil, nil); s != http.StatusNoContent {
		t.Fatalf("DELETE /groups/%s through an instance that does not consume it: %d %s", StoppedGroup, s, raw)
	}
	if canCheck {
		kittest.Eventually(t, waitTimeout, "group "+StoppedGroup+"'s resources released", func() bool { return !holder.GroupHeld(t, StoppedGroup) })
	}
}

// groupIn returns group name as GET /groups on base shows it.
func groupIn(t testing.TB, base, name string) logc.Group {
	t.Helper()
	g, ok := findGroup(Groups(t, base), name)
	if !ok {
		t.Fatalf("GET /groups on %s lacks %s", base, name)
	}
	return g
}

// checkLagGrew checks that every lag a group shows grew from before to
// after, while n events were written and nobody consumed it: lag_events by
// at least n, lag_bytes, and with a slot the WAL it retains, its
// restart_lsn unmoved and no walsender on it.
func checkLagGrew(t testing.TB, before, after logc.Group, n int64) {
	t.Helper()
	if after.LagEvents == nil && after.LagBytes == nil {
		t.Fatalf("group %s shows neither lag: %+v", after.Name, after)
	}
	if after.LagEvents != nil && (before.LagEvents == nil || *after.LagEvents-*before.LagEvents < n) {
		t.Errorf("group %s: lag_events %v then %v while %d events were written and nobody consumed it; want it grown by at least %d",
			after.Name, show(before.LagEvents), *after.LagEvents, n, n)
	}
	if after.LagBytes != nil && (before.LagBytes == nil || *after.LagBytes <= *before.LagBytes) {
		t.Errorf("group %s: lag_bytes %v then %v while %d events were written and nobody consumed it; want it grown",
			after.Name, show(before.LagBytes), *after.LagBytes, n)
	}
	if after.Slot == nil {
		return
	}
	if before.Slot == nil {
		t.Fatalf("group %s had no slot after its PUT answered: %+v", after.Name, before)
	}
	s, b := after.Slot, before.Slot
	if s.Active || s.RestartLSN != b.RestartLSN || s.RetainedWALBytes <= b.RetainedWALBytes {
		t.Errorf("slot %s of a group nobody consumes: active %v, restart_lsn %s then %s, retained WAL %d then %d bytes; want inactive, unmoved, retaining more",
			s.Name, s.Active, b.RestartLSN, s.RestartLSN, b.RetainedWALBytes, s.RetainedWALBytes)
	}
}

// show formats a lag that may be null.
func show(v *int64) any {
	if v == nil {
		return "null"
	}
	return *v
}
