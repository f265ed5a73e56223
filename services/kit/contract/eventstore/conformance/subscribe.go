// Area: subscriptions. Catch-up, then live events, then resuming from a
// position; a position whose following events the side no longer holds.

package conformance

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Forgetter is what a Target adds when its side can lose events it
// recorded, as kafka-eventstore does when the topic's retention deletes
// old records: the contract's 410 on GET /subscribe is reachable there,
// and SubscribeFromDeletedPositionIsGone checks it. A Target without it is
// a side that keeps every event it recorded (a 410 is unreachable); the
// test skips, saying so.
type Forgetter interface {
	// ForgetRecorded deletes every event the side holds now, as its
	// retention would (the oldest first, all of them here), and returns
	// once reads and subscriptions no longer see them.
	ForgetRecorded(t testing.TB)
}

// runSubscribe checks subscriptions: catch-up, live and resume.
func runSubscribe(t *testing.T, newSide func(testing.TB) side) {
	runTests(t, newSide, []test{
		{"SubscribeCatchUpLiveAndResume", testSubscribe},
		{"SubscribeFromDeletedPositionIsGone", testSubscribeGone},
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

// testSubscribeGone: after the side deleted the events it held (its
// retention), a subscription from a position whose following events were
// deleted is a 410 with a JSON error (the events after it are gone: not a
// 404, the position was this side's); from the last deleted event's
// position, or from the beginning, it delivers exactly the events written
// since, from the oldest the side still holds. A side that keeps every
// event it recorded (no Forgetter) is checked for the other half: its
// oldest positions stay resumable, never a 410.
func testSubscribeGone(t *testing.T, tg side) {
	prefix := runPrefix(t)
	a := streamName(t, 1)
	mustAppend(t, tg.URL(), a, firstExpected(tg), ev("OxygenAdded", `{"liters":1}`), ev("OxygenAdded", `{"liters":2}`), ev("OxygenAdded", `{"liters":3}`))
	sub := openSubscription(t, tg.URL(), "")
	old := sub.collect(t, prefix, -1)
	sub.cancel()
	if len(old) != 3 {
		t.Fatalf("catch-up: %d events, want 3", len(old))
	}
	f, ok := tg.Target.(Forgetter)
	if !ok {
		wantEvents(t, "from the first event", openSubscription(t, tg.URL(), old[0].Position).collect(t, prefix, -1), []string{`{"liters":2}`, `{"liters":3}`})
		t.Logf("the side keeps every event it recorded (its Target is no conformance.Forgetter): a 410 is unreachable there; its positions stay resumable")
		return
	}
	f.ForgetRecorded(t)
	b := streamName(t, 2)
	mustAppend(t, tg.URL(), b, firstExpected(tg), ev("OxygenAdded", `{"liters":4}`), ev("OxygenAdded", `{"liters":5}`))
	for _, from := range []string{old[0].Position, old[1].Position} {
		// Bounded: a side that answered 200 would stream until then.
		req := kittest.NewRequest(t, http.MethodGet, tg.URL()+"/subscribe?from="+url.QueryEscape(from), nil).WithContext(kittest.Context(t, 30*time.Second))
		resp, raw := kittest.Send(t, req)
		var e struct{ Error string }
		_ = json.Unmarshal(raw, &e)
		if resp.StatusCode != http.StatusGone || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || e.Error == "" {
			t.Errorf("subscribe from %s, whose next event was deleted: %d %s %s, want 410 with a JSON error", from, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
		}
	}
	rest := []string{`{"liters":4}`, `{"liters":5}`}
	wantEvents(t, "from the last deleted event", openSubscription(t, tg.URL(), old[2].Position).collect(t, prefix, -1), rest)
	wantEvents(t, "from the beginning", openSubscription(t, tg.URL(), "").collect(t, prefix, -1), rest)
}
