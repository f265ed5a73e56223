package main

import (
	"fmt"
	"maps"
	"testing"
	"time"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	queueconf "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// TestUnconsumedGroup runs the pair's CONSUME_GROUPS check: the group the
// first instance does not consume keeps its Kafka group and committed
// start, lags by the events written, and a second instance that lists it
// joins the Kafka group and catches up.
func TestUnconsumedGroup(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{logc.ConsumeGroupsVar: conformance.ConsumedGroup})
	conformance.UnconsumedGroup(t, tg, func(t testing.TB, consume string) string {
		env := maps.Clone(tg.Env)
		env[logc.ConsumeGroupsVar] = consume
		return kittest.StartInstance(t, func(t testing.TB) (*app, *service.Service) {
			return servicetest.Assembled(t, readConfig, assemble, env)
		}).URL()
	})
}

// TestMain lets TestKillNineRedeliversUncommittedOnce start this test
// binary again as the service itself (queueconf.StartProcess), so that it
// can kill -9 an instance.
func TestMain(m *testing.M) { kittest.Main(m, main) }

// keyedEvents returns n events over a few keys.
func keyedEvents(n int, typ string) []logc.NewEvent {
	events := make([]logc.NewEvent, n)
	for i := range events {
		events[i] = logc.NewEvent{Type: typ, Key: fmt.Sprintf("k%d", i%5)}
	}
	return events
}

// deliverAll posts events in one batch to base and waits until each is
// delivered, returning them as delivered.
func deliverAll(t testing.TB, base string, events []logc.NewEvent) map[string]logc.Event {
	t.Helper()
	delivered := map[string]logc.Event{}
	for _, c := range conformance.PostBatch(t, base, events) {
		delivered[c.ID] = conformance.WaitDelivered(t, base, c.ID)
	}
	return delivered
}

// checkObservedOnce fails t if an event of before was applied again: its
// delivered_at or delivery_seq changed.
func checkObservedOnce(t testing.TB, base string, before map[string]logc.Event) {
	t.Helper()
	for id, b := range before {
		a := conformance.Get(t, base, id)
		if a.DeliveredAt == nil || !a.DeliveredAt.Equal(*b.DeliveredAt) || *a.DeliverySeq != *b.DeliverySeq {
			t.Errorf("event %s applied twice: delivered %v seq %d before, %v seq %v after", id, b.DeliveredAt, *b.DeliverySeq, a.DeliveredAt, a.DeliverySeq)
		}
	}
}

// An instance killed with SIGKILL (no drain, no commit on Close) after
// recording 40 events whose offsets it had not committed yet (its
// KAFKA_COMMIT_INTERVAL longer than the test): the next instance on the
// group gets them all again from the last committed position (none),
// absorbs each as a duplicate (delivered_at and delivery_seq unchanged)
// and delivers for the first time only the event written after the kill.
// A crash costs redeliveries, never an event.
func TestKillNineRedeliversUncommittedOnce(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"KAFKA_COMMIT_INTERVAL": "1h"})
	// The victim is a process of its own on the same schema, topic and
	// group; the instance in the test's process leaves the group first.
	tg.Stop()
	victim := queueconf.StartProcess(t, tg.Env)
	before := deliverAll(t, victim.URL(), keyedEvents(40, "before.kill"))
	if st := conformance.Consumer(t, victim.URL()); st.Position != "0" {
		t.Fatalf("the victim committed offsets before the kill (position %s): the test proves nothing", st.Position)
	}
	victim.Kill(t)

	// The next instance joins once the coordinator has dropped the dead
	// member (its 10 s session).
	tg.Start(t)
	after := conformance.Post(t, tg.URL(), logc.NewEvent{Type: "after.kill", Key: "k0"})
	conformance.WaitDelivered(t, tg.URL(), after.ID)
	// The new event is on one partition; the others' redeliveries may
	// still be under way (a fresh CI root read the counters after 8 of
	// 40): wait for them, then count exactly.
	var st logc.ConsumerStatus
	kittest.Eventually(t, 30*time.Second, "every uncommitted event redelivered", func() bool {
		st = conformance.Consumer(t, tg.URL())
		return st.Duplicates >= int64(len(before))
	})
	if st.Duplicates != int64(len(before)) || st.Delivered != 1 {
		t.Errorf("after the kill: %d duplicates absorbed, %d delivered for the first time; want %d (every uncommitted event again, once each) and 1", st.Duplicates, st.Delivered, len(before))
	}
	checkObservedOnce(t, tg.URL(), before)
	t.Logf("after kill -9: %d uncommitted events redelivered and absorbed", st.Duplicates)
}

// A graceful stop commits what was handled even when the commit interval
// has not come round (kafka-go's Reader.Close commits the stash before it
// leaves the group): after a restart nothing is redelivered.
func TestStopCommitsWhatWasHandled(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"KAFKA_COMMIT_INTERVAL": "1h"})
	before := deliverAll(t, tg.URL(), keyedEvents(40, "before.stop"))
	if st := conformance.Consumer(t, tg.URL()); st.Position != "0" {
		t.Fatalf("offsets committed before the stop (position %s), within an interval of 1h: the test proves nothing", st.Position)
	}
	tg.Restart(t)
	if st := conformance.Consumer(t, tg.URL()); st.Position != "40" || st.Lag != 0 {
		t.Errorf("after a graceful restart: position %s, lag %d; want 40 and 0 (the stop committed what was handled)", st.Position, st.Lag)
	}
	after := conformance.Post(t, tg.URL(), logc.NewEvent{Type: "after.stop", Key: "k0"})
	conformance.WaitDelivered(t, tg.URL(), after.ID)
	if st := conformance.Consumer(t, tg.URL()); st.Duplicates != 0 || st.Delivered != 1 {
		t.Errorf("after a graceful restart: %d duplicates, %d delivered for the first time; want 0 and 1", st.Duplicates, st.Delivered)
	}
	checkObservedOnce(t, tg.URL(), before)
}

// The offsets are committed while the consumer runs, without a stop: at
// the default interval (1s) and with KAFKA_COMMIT_INTERVAL=0, the
// synchronous commit after every batch.
func TestOffsetsCommittedWhileRunning(t *testing.T) {
	t.Parallel()
	for _, interval := range []string{"1s", "0"} {
		t.Run(interval, func(t *testing.T) {
			t.Parallel()
			tg := newTarget(t, map[string]string{"KAFKA_COMMIT_INTERVAL": interval})
			if got, want := tg.App().consumer.reader.Config().CommitInterval.String(), interval; got != want && (interval != "0" || got != "0s") {
				t.Fatalf("the reader's CommitInterval is %s, want %s", got, want)
			}
			deliverAll(t, tg.URL(), keyedEvents(30, "running"))
			kittest.Eventually(t, 30*time.Second, "the 30 events' offsets committed", func() bool {
				st := conformance.Consumer(t, tg.URL())
				return st.Position == "30" && st.Lag == 0
			})
		})
	}
}
