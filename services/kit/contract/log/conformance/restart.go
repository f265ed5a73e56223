// Area: durability. A crash and a graceful restart lose no answered
// write and observe each event once.

package conformance

import (
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
)

// runRestart checks that a crash and a graceful restart lose nothing and
// observe each event once.
func runRestart(t *testing.T, newTarget NewTarget) {
	runTests(t, newTarget, []test{
		{"CrashRedeliversObservedOnce", testCrash},
		{"RestartMidStreamLosesNothing", testRestart},
	})
}

func testCrash(t *testing.T, tg Target) {
	// One key: on Kafka one partition, so the redelivered events come
	// back before the event written after the crash.
	created := PostBatch(t, tg.URL(), events(20, "crash"))
	before := map[string]logc.Event{}
	for _, c := range created {
		before[c.ID] = WaitDelivered(t, tg.URL(), c.ID)
	}
	tg.Crash(t)
	base := tg.URL()
	after := Post(t, base, logc.NewEvent{Type: "after.crash", Key: "crash"})
	WaitDelivered(t, base, after.ID)
	st := Consumer(t, base)
	if st.Duplicates < 1 {
		t.Errorf("after the crash nothing was redelivered (duplicates %d): the test proves nothing", st.Duplicates)
	}
	if st.Delivered != 1 {
		t.Errorf("the new instance delivered %d events for the first time, want 1 (only the event written after the crash)", st.Delivered)
	}
	t.Logf("redelivered after crash: %d duplicates absorbed", st.Duplicates)
	for id, b := range before {
		a := Get(t, base, id)
		if a.DeliveredAt == nil || !a.DeliveredAt.Equal(*b.DeliveredAt) || *a.DeliverySeq != *b.DeliverySeq {
			t.Errorf("event %s applied twice: delivered %v seq %d before, %v seq %v after", id, b.DeliveredAt, *b.DeliverySeq, a.DeliveredAt, a.DeliverySeq)
		}
	}
}

func testRestart(t *testing.T, tg Target) {
	var written []logc.Created
	var keys []string
	batch := events(500, "r1", "r2")
	written = append(written, PostBatch(t, tg.URL(), batch)...)
	for _, e := range batch {
		keys = append(keys, e.Key)
	}
	// Restart while the consumer is (most likely) still reading the batch.
	tg.Restart(t)
	for i := range 20 {
		k := []string{"r1", "r2"}[i%2]
		written = append(written, Post(t, tg.URL(), logc.NewEvent{Type: "after.restart", Key: k}))
		keys = append(keys, k)
	}
	tg.Restart(t)
	checkOrder(t, tg.URL(), written, keys)
}
