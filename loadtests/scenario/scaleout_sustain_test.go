package scenario

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// TestFanoutSearchCountsCopies runs quick fan-out searches on the queue
// contract's memory backend with FANOUT giving FanoutKind 4 subscribers
// (it keeps up with anything this test offers): the search climbs the
// copies ladder over 4 in published tasks/s, each step's flat bound
// counts copies (4 per published task) and records them, the service
// counts 4 copies for each task sent, and a seed in copies per second
// starts the next search from its bracket over 4. The figures mean
// nothing about a real service.
func TestFanoutSearchCountsCopies(t *testing.T) {
	port := serveMemoryFanout(t, FanoutSetting(4))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	e := &Env{Start: StartNever, Settle: 5 * time.Second}
	o := FanoutSustainOptions{Step: 1500 * time.Millisecond, Warmup: 500 * time.Millisecond, Sample: 100 * time.Millisecond, Drain: 5 * time.Second,
		Batch: 10, Copies: SustainLadder{Start: 800, Factor: 2, Max: 1600}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	res, b, err := fanoutSearch(context.Background(), e, fanoutInstance{svc: QueuePair.A.Name, base: base, n: 4}, o, bracket{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Metrics
	// Each step that ran offered its rate of the ladder over 4 and
	// counted copies; whether a 1.5 s step passes is the machine's (on a
	// CI runner whose two cores also run the other packages' tests under
	// -race, the 400/s step once failed, and the search stopped at 200,
	// as it should). The outcome is asserted whole when both passed.
	passed := 0
	for i, rate := range []float64{200, 400} {
		step := func(k string) float64 { return m[StepMetric(i, driver.Metric(k))] }
		if step(MetricOffered) != rate || step(MetricCopies) != 4 || step("flat_bound") != 4*flatBound(rate, 10) {
			t.Errorf("step %d: offered %v, copies %v, flat bound %v; want %v published/s, 4 copies, flat bound %v", i, step(MetricOffered), step(MetricCopies), step("flat_bound"), rate, 4*flatBound(rate, 10))
		}
		if step("pass") != 1 {
			break
		}
		passed++
	}
	if m[MetricFanoutSubscribers] != 4 {
		t.Errorf("subscribers %v, want 4", m[MetricFanoutSubscribers])
	}
	switch {
	case passed == 2:
		if b.lo != 400 || !b.capped || m[MetricSustainable] != 400 || m[MetricSteps] != 2 {
			t.Errorf("bracket %+v, sustainable %v, steps %v; want 200 and 400 published/s passed, capped", b, m[MetricSustainable], m[MetricSteps])
		}
	case passed == 1 && (m[MetricSustainable] != 200 || b.lo != 200 || b.hi != 400):
		t.Errorf("after 200/s passed and 400/s failed: bracket %+v, sustainable %v; want 200 sustained, bracket 200 to 400", b, m[MetricSustainable])
	default:
		t.Logf("step %d failed on this machine (bracket %+v, sustainable %v, steps %v): the ladder is right, the step's outcome is the machine's", passed, b, m[MetricSustainable], m[MetricSteps])
	}
	st, err := driver.GetStats(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	last := min(passed, 1) // the 400/s step, or the first that failed
	reqs := m[StepMetric(last, driver.ClientRequests)]
	if got := float64(st.Counters[queue.CounterEnqueued]); reqs == 0 || got < 4*10*reqs*(1-driver.FailShare) {
		t.Errorf("enqueued %v copies in step %d's %v batches of 10, want 4 per task", got, last, reqs)
	}
	// The next number of subscribers starts from this bracket in copies
	// per second (1,600: capped), over 4: its first step offers 400, and
	// when that step passes the search ends there. Whether a 1.5 s step
	// passes depends on the machine: on a CI runner whose two cores also
	// run the other packages' tests under -race, one once failed (and the
	// search bisected down to 200, as it should), so the seed is what
	// this part asserts, and the rest only when the step passed.
	res, b, err = fanoutSearch(context.Background(), e, fanoutInstance{svc: QueuePair.A.Name, base: base, n: 4}, o, bracket{lo: 1600, capped: true})
	if err != nil || res.Metrics[StepMetric(0, MetricOffered)] != 400 {
		t.Fatalf("seeded search: %v, first offered %v, want 400 (1,600 copies/s over 4)", err, res.Metrics[StepMetric(0, MetricOffered)])
	}
	if res.Metrics[StepMetric(0, "pass")] != 1 {
		t.Logf("the seeded step at 400/s failed on this machine (bracket %+v, steps %v): the seed is right, the step's outcome is the machine's", b, res.Metrics[MetricSteps])
		return
	}
	if b.lo != 400 || res.Metrics[MetricSteps] != 1 {
		t.Errorf("seeded search: bracket %+v, steps %v; want one step, passed at 400", b, res.Metrics[MetricSteps])
	}
}

// TestFanoutSustainPointsAndOptions: the defaults add one search point
// per number of subscribers and one more per cursors design, named by
// the subscribers, none without FanoutSustain; the ladder of N
// subscribers is the copies ladder over N; a ladder that cannot climb
// or a step shorter than its warm-up is refused; the settings record
// the criteria and the copies ladder.
func TestFanoutSustainPointsAndOptions(t *testing.T) {
	t.Parallel()
	o := ScaleOutDefaults
	pts := newScaleOutPoints(o, QueuePair.Sides())
	if len(pts.fanoutSustains) != len(o.Subscribers) || len(pts.cursorFanoutSustains) != len(o.Subscribers) {
		t.Fatalf("%d search points, %d of the cursors design, want %d each", len(pts.fanoutSustains), len(pts.cursorFanoutSustains), len(o.Subscribers))
	}
	if p := pts.fanoutSustains[8]; p.Scenario != ScaleOutFanoutSustain || p.Name != "8 subscribers" || pts.fanoutSustains[1].Name != "1 subscriber" {
		t.Errorf("points %q, %q", p.Name, pts.fanoutSustains[1].Name)
	}
	if p := pts.cursorFanoutSustains[2]; p.Name != "2 subscribers, cursors" || len(p.Sides) != 1 || p.Sides[0] != fanoutCursors.side {
		t.Errorf("cursors point %q on %v", p.Name, p.Sides)
	}
	o.FanoutSustain = nil
	if pts := newScaleOutPoints(o, QueuePair.Sides()); len(pts.fanoutSustains)+len(pts.cursorFanoutSustains) != 0 {
		t.Error("search points without FanoutSustain")
	}
	fo := FanoutSustainDefaults
	if err := fo.Validate(); err != nil {
		t.Fatal(err)
	}
	if l := fo.ladder(8); l.Start != 250 || l.Max != 4000 || l.Factor != fo.Copies.Factor || l.Bisect != fo.Copies.Bisect {
		t.Errorf("ladder of 8 subscribers %+v", l)
	}
	bad := fo
	bad.Copies.Factor, bad.Warmup = 1, bad.Step
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "copies ladder") || !strings.Contains(err.Error(), "warm-up") {
		t.Errorf("bad options: %v", err)
	}
	s := fo.Settings()
	if s.StepS != fo.Step.Seconds() || s.SLOMS != float64(SustainSLO.Milliseconds()) || s.Ladders["copies"] != fo.Copies || s.Rounds != 1 {
		t.Errorf("settings %+v", s)
	}
}
