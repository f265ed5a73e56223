package report

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestInvalidPointFeedsNoClaim: a fixed-rate point whose side could not
// prove its start (a replication slot gigabytes behind) is invalid: no
// claim reads its figures as a measurement, and its table cell says why
// (once such a point gave "delivery p95 88998 ms", a 17319× ratio and a
// claim whose every round "agreed").
func TestInvalidPointFeedsNoClaim(t *testing.T) {
	runs := fixture()
	var log *driver.Run
	for _, r := range runs {
		if r.Command == "log" {
			log = r
		}
	}
	if log == nil {
		t.Fatal("no log run in the fixture")
	}
	found := false
	for i := range log.Points {
		p := &log.Points[i]
		if p.Scenario != "log.rate" || p.Rate != 100 {
			continue
		}
		found = true
		for _, r := range p.Rounds[:2] {
			r.Sides["no-kafka"].Precondition = "replication slot 4.1 GiB behind the current WAL position at the start"
			r.Sides["no-kafka"].Metrics["server.delivery.p95_ms"] = 88998
		}
		p.Status = nil
		driver.Summarize(p)
	}
	if !found {
		t.Fatal("no log 100/s point in the fixture")
	}
	log.Validate()
	for _, c := range Claims(runs) {
		if c.Pair != "log" || c.Short != "low delivery p95 on both sides" {
			continue
		}
		if c.Verdict == Holds || c.Verdict == DoesNotHold || strings.Contains(c.Measured, "88998") {
			t.Errorf("a claim decided from an invalid point: %s: %s (%s)", c.Verdict, c.Measured, c.Why)
		}
		if !strings.Contains(c.Why+c.Measured, "precondition") {
			t.Errorf("the claim does not say why: %s (%s)", c.Measured, c.Why)
		}
		return
	}
	t.Fatal("no delivery p95 claim")
}

// TestPublishedRatesWereOffered: a ceiling's and a sustainable rate's
// figure is a rate one of the searches passed, never a mean of two
// ("Postgres sustained 12500/s" was the mean of 10,000 and 15,000).
func TestPublishedRatesWereOffered(t *testing.T) {
	for _, rates := range [][]float64{{10000, 15000}, {2000, 2800, 2800}, {350, 500, 2000}, {7000}} {
		a := driver.RateAgg(rates)
		offered := false
		for _, r := range rates {
			offered = offered || r == a.Median
		}
		passedBy := 0
		for _, r := range rates {
			if r >= a.Median {
				passedBy++
			}
		}
		if !offered || 2*passedBy <= len(rates) {
			t.Errorf("%v: published %g, passed by %d of %d searches", rates, a.Median, passedBy, len(rates))
		}
	}
}

// TestHighestOfferedCountsBatches: "above N nothing was measured" is
// true: N counts the batched steps too (a card once said "above 5000/s
// nothing was measured" beside a sustained 12,500/s).
func TestHighestOfferedCountsBatches(t *testing.T) {
	r := withSustain(throughputFixture(), false)
	in := newInputs([]*driver.Run{r}, eventStoreOf(nil))
	v, how := maxOffered(in, "queue")
	if v < 11000 || !strings.Contains(how, "in batches of") {
		t.Errorf("highest offered %g%s, want the sustainable search's top step, in batches", v, how)
	}
}
