package conformance

import (
	"testing"
)

// runSubscribe checks subscriptions: catch-up, live and resume.
func runSubscribe(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
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
	wantEvents(t, "catch-up", backlog, []string{`{"liters":1}`, `{"liters":2}`, `{"liters":3}`})
	for i := 1; i < len(backlog); i++ {
		if backlog[i].GlobalPosition <= backlog[i-1].GlobalPosition {
			t.Errorf("catch-up out of global order: %d then %d", backlog[i-1].GlobalPosition, backlog[i].GlobalPosition)
		}
	}
	// Live: the subscriber is already listening when these are written.
	mustAppend(t, tg.URL(), a, "any", ev("OxygenConsumed", `{"liters":4}`))
	mustAppend(t, tg.URL(), b, "any", ev("OxygenConsumed", `{"liters":5}`))
	live := sub.collect(t, prefix, 2)
	wantEvents(t, "live", live, []string{`{"liters":4}`, `{"liters":5}`})
	sub.cancel()

	// Resume from the third event's position: exactly the two after it.
	if len(backlog) == 3 {
		resumed := openSubscription(t, tg.URL(), backlog[2].Position)
		wantEvents(t, "resumed", resumed.collect(t, prefix, -1), []string{`{"liters":4}`, `{"liters":5}`})
	}
}
