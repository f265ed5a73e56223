package report

import "testing"

// TestEveryClaimEvaluatesOnTheFixture runs each row of claimTable on the
// fixture, which has every scenario the claims read: none may come out
// "not measurable" for lack of data, and with a real MongoDB every claim
// gets a holds / does-not-hold verdict.
func TestEveryClaimEvaluatesOnTheFixture(t *testing.T) {
	pairs := map[string]bool{"queue": true, "log": true, "documents": true}
	for _, s := range claimTable {
		if !pairs[s.pair] || s.short == "" || s.claim == "" || s.rule == "" || s.evaluate == nil {
			t.Errorf("incomplete claim row: %+v", s)
		}
	}
	runs := append(fixture(), throughputFixture())
	for _, c := range Claims(runs) {
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
	for i, c := range Claims(runs) {
		if c.Verdict != Holds && c.Verdict != DoesNotHold {
			t.Errorf("%s %q with MongoDB: verdict %q (%s)", c.Pair, c.Short, c.Verdict, c.Why)
		}
		if claimTable[i].mongo && c.Measured == "" {
			t.Errorf("%s %q: no measurement against MongoDB", c.Pair, c.Short)
		}
	}
}

// TestClaimsMissOnlyWhatIsMissing gives the claims the queue run alone:
// the queue's claims are decided, every other one (the throughput run's
// queue claims too) says which scenario is missing.
func TestClaimsMissOnlyWhatIsMissing(t *testing.T) {
	fromThroughput := map[string]bool{}
	for _, s := range throughputClaims {
		fromThroughput[s.short] = true
	}
	for _, c := range Claims(fixture()[:1]) {
		if decided := c.Verdict != NotMeasurable; decided != (c.Pair == "queue" && !fromThroughput[c.Short]) {
			t.Errorf("%s %q with the queue run only: %s (%s)", c.Pair, c.Short, c.Verdict, c.Why)
		}
	}
}
