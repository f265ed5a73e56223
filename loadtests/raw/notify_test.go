package raw

import (
	"context"
	"testing"
	"time"
)

// TestNotify runs the NOTIFY series short against the stack's Postgres:
// every mode at every concurrency is measured, the in-transaction mode's
// listener hears every commit, and the debounced mode sends few NOTIFYs
// that still reach the listener.
func TestNotify(t *testing.T) {
	t.Parallel()
	o := options(t)
	o.Duration = 400 * time.Millisecond // 200 ms per point
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := measureNotify(ctx, o)
	if s.Error != "" {
		t.Fatal(s.Error)
	}
	if len(s.Points) != len(NotifyModes)*len(NotifyCommitters) {
		t.Fatalf("%d points", len(s.Points))
	}
	for _, p := range s.Points {
		t.Logf("%s ×%d: %.0f tps, p50 %.2f ms, p99 %.2f ms, sent %d, received %d", p.Mode, p.Committers, p.TPS, p.P50Ms, p.P99Ms, p.Sent, p.Received)
		if p.Error != "" || p.Commits <= 0 || p.TPS <= 0 || p.P99Ms <= 0 || p.P99Ms < p.P50Ms {
			t.Errorf("%+v", p)
		}
		switch p.Mode {
		case NotifyNone:
			if p.Sent != 0 || p.Received != 0 {
				t.Errorf("no NOTIFY, yet %+v", p)
			}
		case NotifyInTx:
			if p.Sent != p.Commits || p.Received != p.Sent {
				t.Errorf("one notification per commit: %+v", p)
			}
		case NotifyDebounced:
			if p.Sent <= 0 || p.Sent > p.Commits || p.Received != p.Sent {
				t.Errorf("debounced: %+v", p)
			}
		}
	}
	if _, ok := s.Find(NotifyDebounced, 16); !ok {
		t.Error("Find(debounced, 16)")
	}
}
