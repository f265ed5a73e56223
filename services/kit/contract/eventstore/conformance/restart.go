// Area: durability. A graceful restart and a crash lose no answered
// append, and a subscription resumes where it left off.

package conformance

import (
	"errors"
	"io"
	"testing"
)

// runRestart checks that a restart and a crash lose nothing and that a
// subscription resumes.
func runRestart(t *testing.T, newSide func(testing.TB) side) {
	runTests(t, newSide, []test{
		{"RestartAndCrashLoseNothingAndSubscriptionResumes", testRestart},
	})
}

func testRestart(t *testing.T, tg side) {
	prefix := runPrefix(t)
	s := streamName(t, 1)
	mustAppend(t, tg.URL(), s, firstExpected(tg), registered(), added(10))
	sub := openSubscription(t, tg.URL(), "")
	seen := sub.collect(t, prefix, -1)
	if len(seen) != 2 {
		t.Fatalf("catch-up delivered %d events, want 2", len(seen))
	}
	last := seen[1].Position
	tg.Restart(t)
	base := tg.URL()
	// The old service's subscription ended with the shutdown.
	for {
		if _, ok := sub.next(t); !ok {
			break
		}
	}
	if err := <-sub.done; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("old subscription ended with %v", err)
	}
	mustAppend(t, base, s, "any", consumed(3))
	r, _ := readStream(t, base, s, "")
	if len(r.Events) != 3 {
		t.Fatalf("after restart the stream holds %d events, want 3", len(r.Events))
	}
	resumed := openSubscription(t, base, last)
	wantEvents(t, "resumed after restart", resumed.collect(t, prefix, -1), []string{`{"liters":3}`})

	tg.Crash(t)
	base = tg.URL()
	mustAppend(t, base, s, "any", added(7))
	if r, _ := readStream(t, base, s, ""); len(r.Events) != 4 {
		t.Fatalf("after a crash the stream holds %d events, want 4", len(r.Events))
	}
	resumed = openSubscription(t, base, last)
	wantEvents(t, "resumed after a crash", resumed.collect(t, prefix, -1), []string{`{"liters":3}`, `{"liters":7}`})
}
