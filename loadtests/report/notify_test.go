package report

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
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

// notifyClaim returns the NOTIFY claim named short, evaluated on src.
func notifyClaim(t *testing.T, short string, src Sources) Claim {
	t.Helper()
	for _, c := range ClaimsFrom(nil, src) {
		if c.Short == short {
			return c
		}
	}
	t.Fatalf("no claim %q", short)
	return Claim{}
}

// notifyExperiment is a notify-serializes-commits result measured on
// the stack's 15.18 and on 18.4, with debounced shares deb15 and deb18
// of plain commits at 16 committers and pg_notify in the transaction at
// 30%.
func notifyExperiment(deb15, deb18 float64) *experiments.File {
	m := map[driver.Metric]float64{}
	for p, deb := range map[experiments.SidePrefix]float64{"": deb15, "pg18.": deb18} {
		m[p.Of("tps_insert_commit_16")] = 10000
		m[p.Of("tps_notify_in_tx_16")] = 3000
		m[p.Of("tps_notify_debounced_16")] = 10000 * deb
		m[p.Of("sent_notify_debounced_16")], m[p.Of("received_notify_debounced_16")] = 200, 200
	}
	return &experiments.File{Results: []experiments.Result{{Name: experiments.NotifySerializes, Metrics: m,
		Settings: map[string]string{"compared": "pg18", "server_version": "15.18", "pg18.server_version": "18.4"}}}}
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

// TestNotifyClaim: on the fixture both claims hold (the reference's and
// the debounced remedy); a debounced mode under 80% of plain commits, or
// one whose listener missed NOTIFYs, breaks the remedy's claim and not
// the reference's; no measurement at all is not measurable.
func TestNotifyClaim(t *testing.T) {
	src := Sources{Raw: notifyFixture()}
	c := notifyClaim(t, notifyShort, src)
	if c.Verdict != Holds || c.Pair != "queue" ||
		!strings.Contains(c.Measured, "the raw loops, PostgreSQL 15.18: 16 committers: 10000 tps plain, 2500 with pg_notify in the transaction (25%), 9000 debounced (90%; 300 NOTIFYs sent, 300 received)") ||
		!strings.Contains(c.Measured, "1 committer: 3400 vs 1700 tps") {
		t.Errorf("fixture: %+v", c)
	}
	if d := notifyClaim(t, debounceShort, src); d.Verdict != Holds || d.Measured != c.Measured {
		t.Errorf("fixture, the remedy: %+v", d)
	}
	// Each change, made to every debounced point, breaks the remedy.
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
		if c := notifyClaim(t, debounceShort, Sources{Raw: r}); c.Verdict != DoesNotHold {
			t.Errorf("%s: %+v", name, c)
		}
		if c := notifyClaim(t, notifyShort, Sources{Raw: r}); c.Verdict != Holds {
			t.Errorf("%s, the reference's claim: %+v", name, c)
		}
	}
	for _, short := range []string{notifyShort, debounceShort} {
		if c := notifyClaim(t, short, Sources{}); c.Verdict != NotMeasurable || !strings.Contains(c.Why, "NOTIFY series") {
			t.Errorf("%s, no measurement: %+v", short, c)
		}
	}
}

// TestNotifyClaimEveryMeasurement: the experiment's measurements (the
// stack's version and each other one) are rounds of both claims beside
// the raw loops': when they disagree the verdict is inconclusive and
// names each; when they agree the verdict says how many agree.
func TestNotifyClaimEveryMeasurement(t *testing.T) {
	r := notifyFixture()
	for i := range r.Notify.Points {
		if p := &r.Notify.Points[i]; p.Mode == raw.NotifyDebounced {
			p.TPS = 7900 // 79%: the raw loops miss the remedy's bar
		}
	}
	src := Sources{Raw: r, Experiments: notifyExperiment(0.93, 0.99)}
	c := notifyClaim(t, debounceShort, src)
	if c.Verdict != Inconclusive ||
		!strings.Contains(c.Why, "holds in notify-serializes-commits, PostgreSQL 15.18: 93% (200 of 200 NOTIFYs received), notify-serializes-commits, PostgreSQL 18.4 (a private server): 99%") ||
		!strings.Contains(c.Why, "not in the raw loops, PostgreSQL 15.18: 79%") {
		t.Errorf("disagreeing measurements: %+v", c)
	}
	if !strings.Contains(c.Measured, "notify-serializes-commits, PostgreSQL 18.4 (a private server): 16 committers: 10000 tps plain, 3000 with pg_notify in the transaction (30%), 9900 debounced (99%; 200 NOTIFYs sent, 200 received)") {
		t.Errorf("measured: %s", c.Measured)
	}
	n := notifyClaim(t, notifyShort, src)
	if n.Verdict != Holds || !strings.Contains(n.Why, "every measurement agrees (3: the raw loops, PostgreSQL 15.18: 25%") {
		t.Errorf("the reference's claim: %+v", n)
	}
	// The experiment alone decides when the raw loops did not run.
	if c := notifyClaim(t, debounceShort, Sources{Experiments: notifyExperiment(0.7, 0.75)}); c.Verdict != DoesNotHold {
		t.Errorf("experiment only: %+v", c)
	}
}
