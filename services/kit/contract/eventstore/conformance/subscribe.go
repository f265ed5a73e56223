// Area: subscriptions. Catch-up, then live events, then resuming from a
// position.

package conformance

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
)

// runSubscribe checks subscriptions: catch-up, live and resume.
func runSubscribe(t *testing.T, newSide func(testing.TB) side) {
	runTests(t, newSide, []test{
		{"SubscribeCatchUpLiveAndResume", testSubscribe},
	})
}

func testSubscribe(t *testing.T, tg side) {
	prefix := runPrefix(t)
	a, b := streamName(t, 1), streamName(t, 2)
	mustAppend(t, tg.URL(), a, firstExpected(tg), ev("OxygenAdded", `{"liters":1}`), ev("OxygenAdded", `{"liters":2}`))
	mustAppend(t, tg.URL(), b, firstExpected(tg), ev("OxygenAdded", `{"liters":3}`))
	sub := openSubscription(t, tg.URL(), "")
	backlog := sub.collect(t, prefix, -1)
	// want checks got against want: in order, or, on a side without a
	// total order, each stream's events in order.
	want := func(what string, got []eventstore.RecordedEvent, want map[string][]string, order []string) {
		t.Helper()
		if tg.noTotalOrder == "" {
			wantEvents(t, what, got, order)
			return
		}
		t.Logf("%s: checked per stream, not across streams: %s", what, tg.noTotalOrder)
		for _, s := range []string{a, b} {
			var mine []eventstore.RecordedEvent
			for _, e := range got {
				if e.Stream == s {
					mine = append(mine, e)
				}
			}
			wantEvents(t, what+" of "+s, mine, want[s])
		}
		if len(got) != len(order) {
			t.Errorf("%s: %d events, want %d", what, len(got), len(order))
		}
	}
	want("catch-up", backlog, map[string][]string{a: {`{"liters":1}`, `{"liters":2}`}, b: {`{"liters":3}`}},
		[]string{`{"liters":1}`, `{"liters":2}`, `{"liters":3}`})
	for i := 1; i < len(backlog) && tg.noTotalOrder == ""; i++ {
		if backlog[i].GlobalPosition <= backlog[i-1].GlobalPosition {
			t.Errorf("catch-up out of global order: %d then %d", backlog[i-1].GlobalPosition, backlog[i].GlobalPosition)
		}
	}
	// Live: the subscriber is already listening when these are written.
	mustAppend(t, tg.URL(), a, "any", ev("OxygenConsumed", `{"liters":4}`))
	mustAppend(t, tg.URL(), b, "any", ev("OxygenConsumed", `{"liters":5}`))
	live := sub.collect(t, prefix, 2)
	liveWant := map[string][]string{a: {`{"liters":4}`}, b: {`{"liters":5}`}}
	want("live", live, liveWant, []string{`{"liters":4}`, `{"liters":5}`})
	sub.cancel()

	// Resume from the third event's position: exactly the two after it.
	if len(backlog) == 3 {
		resumed := openSubscription(t, tg.URL(), backlog[2].Position)
		want("resumed", resumed.collect(t, prefix, -1), liveWant, []string{`{"liters":4}`, `{"liters":5}`})
	}
}
