package report

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
)

// notifyFixture is a raw run with a NOTIFY series in which the claim
// holds: in-transaction NOTIFY falls to a quarter of plain commits at 16
// committers, the debounced mode keeps 90% and its listener hears every
// NOTIFY.
func notifyFixture() raw.Results {
	s := &raw.NotifySeries{Desc: "fixture", PointSeconds: 1.5, IntervalMs: 5, ServerVersion: "15.18"}
	plain := map[int]float64{1: 3400, 2: 5000, 4: 7000, 8: 9000, 16: 10000}
	inTx := map[int]float64{1: 1700, 2: 2200, 4: 2600, 8: 2700, 16: 2500}
	for _, n := range raw.NotifyCommitters {
		s.Points = append(s.Points,
			raw.NotifyPoint{Mode: raw.NotifyNone, Committers: n, Commits: int64(plain[n] * 1.5), Seconds: 1.5, TPS: plain[n], P50Ms: 0.3, P99Ms: 2},
			raw.NotifyPoint{Mode: raw.NotifyInTx, Committers: n, Commits: int64(inTx[n] * 1.5), Seconds: 1.5, TPS: inTx[n], P50Ms: 1, P99Ms: 12,
				Sent: int64(inTx[n] * 1.5), Received: int64(inTx[n] * 1.5)},
			raw.NotifyPoint{Mode: raw.NotifyDebounced, Committers: n, Commits: int64(plain[n] * 1.35), Seconds: 1.5, TPS: plain[n] * 0.9, P50Ms: 0.3, P99Ms: 2.5,
				Sent: 300, Received: 300})
	}
	return raw.Results{Schema: raw.SchemaVersion, ID: "20260102T025000Z-raw", Settings: map[string]any{"duration_s": 3}, Notify: s}
}

// notifyClaim returns the NOTIFY claim evaluated on r.
func notifyClaim(t *testing.T, r raw.Results) Claim {
	t.Helper()
	for _, c := range Claims(nil, r) {
		if c.Short == notifyShort {
			return c
		}
	}
	t.Fatal("no NOTIFY claim")
	return Claim{}
}

// TestNotifySection renders the fixture's series inside the raw-limits
// section: one row per count of committers, each mode's tps and p99, the
// shares of plain tps and the notifications sent and received.
func TestNotifySection(t *testing.T) {
	md := RawSection(notifyFixture(), nil)
	wantContains(t, "section", md,
		"### "+NotifyTitle,
		"| committers | INSERT + COMMIT: tps | p99 ms | INSERT + pg_notify + COMMIT: tps | p99 ms | share of plain tps | NOTIFYs sent / received | debounced NOTIFY (5 ms): tps | p99 ms | share of plain tps | NOTIFYs sent / received |",
		"| 1 | 3400 | 2 | 1700 | 12 | 50% | 2,550 / 2,550 | 3060 | 2.50 | 90% | 300 / 300 |",
		"| 16 | 10000 | 2 | 2500 | 12 | 25% | 3,750 / 3,750 | 9000 | 2.50 | 90% | 300 / 300 |",
		"at most one NOTIFY per 5 ms",
	)
	if NotifySection(raw.Results{}) != "" {
		t.Error("a section without a series")
	}
	failed := notifyFixture()
	failed.Notify.Points[0].Error, failed.Notify.Points[0].TPS = "connection refused", 0
	if md := NotifySection(failed); !strings.Contains(md, "| 1 | not measured: connection refused | |") {
		t.Errorf("a failed point:\n%s", md)
	}
}

// TestNotifyClaim: the fixture holds; a debounced mode under 80% of plain
// commits, or one whose listener missed NOTIFYs, does not; no series is
// not measurable.
func TestNotifyClaim(t *testing.T) {
	c := notifyClaim(t, notifyFixture())
	if c.Verdict != Holds || c.Pair != "queue" ||
		!strings.Contains(c.Measured, "16 committers: 10000 tps plain, 2500 with pg_notify in the transaction (25%), 9000 debounced (90%; 300 NOTIFYs sent, 300 received)") ||
		!strings.Contains(c.Measured, "1 committer: 3400 vs 1700 tps") || !strings.Contains(c.Measured, "PostgreSQL 15.18") {
		t.Errorf("fixture: %+v", c)
	}
	// Each change, made to every debounced point, breaks the claim.
	for name, change := range map[string]func(*raw.NotifyPoint){
		"debounced at 70%":       func(p *raw.NotifyPoint) { p.TPS = 7000 },
		"listener heard nothing": func(p *raw.NotifyPoint) { p.Received = 0 },
	} {
		r := notifyFixture()
		for i := range r.Notify.Points {
			if p := &r.Notify.Points[i]; p.Mode == raw.NotifyDebounced {
				change(p)
			}
		}
		if c := notifyClaim(t, r); c.Verdict != DoesNotHold {
			t.Errorf("%s: %+v", name, c)
		}
	}
	if c := notifyClaim(t, raw.Results{}); c.Verdict != NotMeasurable || !strings.Contains(c.Why, "NOTIFY series") {
		t.Errorf("no series: %+v", c)
	}
}
