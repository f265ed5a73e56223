package report

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestEveryClaimEvaluatesOnTheFixture runs each row of claimTable on the
// fixture, which has every scenario the claims read: none may come out
// "not measurable" for lack of data, and with a real MongoDB every claim
// gets a holds / does-not-hold verdict.
func TestEveryClaimEvaluatesOnTheFixture(t *testing.T) {
	pairs := map[string]bool{"queue": true, "log": true, "documents": true, "cache": true}
	for _, s := range claimTable {
		if !pairs[s.pair] || s.short == "" || s.claim == "" || s.rule == "" || s.evaluate == nil {
			t.Errorf("incomplete claim row: %+v", s)
		}
	}
	runs := append(fixture(), throughputFixture())
	for _, c := range Claims(runs, notifyFixture()) {
		if c.Measured == "" || c.Measured == "–" {
			t.Errorf("%s %q: nothing measured on the fixture (%s)", c.Pair, c.Short, c.Why)
		}
		if c.Verdict == NotMeasurable && c.Why != ferretWhy {
			t.Errorf("%s %q: not measurable on the fixture: %s", c.Pair, c.Short, c.Why)
		}
	}
	for _, r := range runs {
		r.Versions.MongoFlavor = ""
	}
	for i, c := range Claims(runs, notifyFixture()) {
		if c.Verdict != Holds && c.Verdict != DoesNotHold {
			t.Errorf("%s %q with MongoDB: verdict %q (%s)", c.Pair, c.Short, c.Verdict, c.Why)
		}
		if claimTable[i].mongo && c.Measured == "" {
			t.Errorf("%s %q: no measurement against MongoDB", c.Pair, c.Short)
		}
	}
}

// TestClaimsMissOnlyWhatIsMissing gives the claims the queue run alone:
// the queue's claims are decided but those reading the long-lived and
// throughput runs or the raw results, every other one says which scenario
// is missing.
func TestClaimsMissOnlyWhatIsMissing(t *testing.T) {
	fromThroughput := map[string]bool{}
	for _, s := range append(throughputClaims, rawClaims...) {
		fromThroughput[s.short] = true
	}
	for _, c := range Claims(fixture()[:1]) {
		if decided := c.Verdict != NotMeasurable; decided != (c.Pair == "queue" && c.Short != agedShort && !fromThroughput[c.Short]) {
			t.Errorf("%s %q with the queue run only: %s (%s)", c.Pair, c.Short, c.Verdict, c.Why)
		}
	}
}

// TestAgedClaimNeedsAMillionRows: a long-lived run on a smaller history
// (a smoke run's) leaves the claim "not measurable", saying why; over the
// factor it does not hold.
func TestAgedClaimNeedsAMillionRows(t *testing.T) {
	aged := func(runs []*driver.Run) Claim {
		for _, c := range Claims(runs) {
			if c.Short == agedShort {
				return c
			}
		}
		t.Fatal("no aged claim")
		return Claim{}
	}
	runs := fixture()
	runs[3].StartState.HistoryRows = 10_000
	if c := aged(runs); c.Verdict != NotMeasurable || !strings.Contains(c.Why, "10,000 rows of history") {
		t.Errorf("small history: %+v", c)
	}
	runs = fixture()
	for i := range runs[3].Points {
		for j := range runs[3].Points[i].Metrics {
			if m := &runs[3].Points[i].Metrics[j]; m.Name == "server.delivery.p99_ms" {
				a := m.Sides["no-rabbitmq"]
				a.Median *= 2
				m.Sides["no-rabbitmq"] = a
			}
		}
	}
	if c := aged(runs); c.Verdict != DoesNotHold || !strings.Contains(c.Measured, "(3×)") {
		t.Errorf("3× slower: %+v", c)
	}
}
