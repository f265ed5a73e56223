package scenario

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestSearchSustainable runs the search against sides whose boundary is
// known: the first round climbs and bisects, a later round seeded with
// its bracket checks both ends only, a moved boundary is searched again,
// a ladder whose top passes is capped, a first step that fails descends,
// and an error stops the search.
func TestSearchSustainable(t *testing.T) {
	l := SustainLadder{Start: 5000, Factor: 2, Max: 40000, Bisect: 2}
	side := func(limit float64) (*[]float64, func(float64) (bool, error)) {
		var tried []float64
		return &tried, func(r float64) (bool, error) {
			tried = append(tried, r)
			return r <= limit, nil
		}
	}
	tried, try := side(8000)
	b, err := searchSustainable(l, bracket{}, try)
	if err != nil || b.lo != 7500 || b.hi != 8800 || b.capped || !slices.Equal(*tried, []float64{5000, 10000, 7500, 8800}) {
		t.Errorf("first round: %+v %v, tried %v; want 7500–8800 after 5000 10000 7500 8800", b, err, *tried)
	}
	// Seeded with that bracket: both ends hold, nothing else is tried.
	tried, try = side(8000)
	b2, err := searchSustainable(l, b, try)
	if err != nil || b2 != b || !slices.Equal(*tried, []float64{7500, 8800}) {
		t.Errorf("seeded round: %+v %v, tried %v", b2, err, *tried)
	}
	// The side got slower: the seed's low end fails, the search descends
	// and bisects.
	tried, try = side(4000)
	b3, err := searchSustainable(l, b, try)
	if err != nil || b3.lo != 3800 || (*tried)[0] != 7500 || (*tried)[1] != 3800 {
		t.Errorf("slower round: %+v %v, tried %v", b3, err, *tried)
	}
	// Faster: the high end passes and the climb goes on from there.
	tried, try = side(20000)
	b4, err := searchSustainable(l, b, try)
	if err != nil || b4.lo != 18000 || b4.hi != 23000 || !slices.Contains(*tried, 36000) {
		t.Errorf("faster round: %+v %v, tried %v", b4, err, *tried)
	}
	// The ladder's top passes: capped, no first failure.
	tried, try = side(1e9)
	b5, err := searchSustainable(l, bracket{}, try)
	if err != nil || !b5.capped || b5.lo != 40000 || b5.hi != 0 || len(*tried) != 4 {
		t.Errorf("capped: %+v %v, tried %v", b5, err, *tried)
	}
	// Nothing passes: three descents, then no rate.
	tried, try = side(10)
	b6, err := searchSustainable(l, bracket{}, try)
	if err != nil || b6.lo != 0 || len(*tried) != 1+sustainDescents {
		t.Errorf("nothing passes: %+v %v, tried %v", b6, err, *tried)
	}
	boom := errors.New("stats unreachable")
	_, err = searchSustainable(l, bracket{}, func(float64) (bool, error) { return false, boom })
	if !errors.Is(err, boom) {
		t.Errorf("error: %v", err)
	}
}

// TestStepJudge decides steps from their figures: flat and fast passes,
// a growing backlog, a p99 over the SLO, shed or failed batches, a
// driver that could not send, and a step ended early (whose cut-off
// requests are not blamed on the side) each fail with their reason.
func TestStepJudge(t *testing.T) {
	ok := func() map[driver.Metric]float64 {
		return map[driver.Metric]float64{MetricOffered: 5000, "client.requests": 1500, "sent_per_s": 5000, "flat_bound": flatBound(5000, 100),
			"backlog_growth": 300, "window_s": 25, MetricIntake: 4990, "p99_count": 100000, "p99_ms": 45}
	}
	if pass, why := StepJudge(ok()); !pass || !strings.Contains(why, "flat") {
		t.Errorf("flat step: %v %q", pass, why)
	}
	for name, c := range map[string]struct {
		set  map[driver.Metric]float64
		want string
	}{
		"growing":  {map[driver.Metric]float64{"backlog_growth": 1251}, "backlog grew 1251 items"},
		"slow":     {map[driver.Metric]float64{"p99_ms": float64(SustainSLO.Milliseconds())}, "p99 1000 ms"},
		"shed":     {map[driver.Metric]float64{"client.shed": 15}, "15 of 1500 batches shed"},
		"errors":   {map[driver.Metric]float64{"client.errors": 15}, "15 of 1500 batch requests failed"},
		"driver":   {map[driver.Metric]float64{"sent_per_s": 4000}, "the driver sent only 4000"},
		"nothing":  {map[driver.Metric]float64{"p99_count": 0}, "nothing was processed"},
		"early":    {map[driver.Metric]float64{"stopped_early": 1, "client.errors": 300, "backlog_growth": 9000}, "backlog grew 9000"},
		"not sent": {map[driver.Metric]float64{"client.requests": 0}, "nothing sent"},
	} {
		m := ok()
		for k, v := range c.set {
			m[k] = v
		}
		if pass, why := StepJudge(m); pass || !strings.Contains(why, c.want) {
			t.Errorf("%s: %v %q, want a failure saying %q", name, pass, why, c.want)
		}
	}
	if got := flatBound(100, 100); got != FlatMinBatches*100 {
		t.Errorf("flat bound at a low rate: %v", got)
	}
}

// TestStepStarved flags a step whose processing collapsed while its
// backlog grew, against the offered rate or the rate the side passed
// before, whichever is lower; a backlog that stayed flat is no
// starvation.
func TestStepStarved(t *testing.T) {
	m := map[driver.Metric]float64{MetricOffered: 16000, "flat_bound": 4000, "backlog_growth": 200000, MetricIntake: 3200}
	if !StepStarved(m, 0) || !StepStarved(m, 8000) {
		t.Error("3,200/s processed at 16,000/s offered, backlog growing: not flagged")
	}
	m[MetricIntake] = 7000
	if StepStarved(m, 8000) {
		t.Error("7,000/s processed after passing 8,000/s: flagged")
	}
	if !StepStarved(m, 0) {
		t.Error("7,000/s processed at 16,000/s offered with no rate passed before: not flagged")
	}
	m[MetricIntake], m["backlog_growth"] = 100, 10
	if StepStarved(m, 0) {
		t.Error("a flat backlog flagged as starved")
	}
}

// TestSustainOptions checks the declared sizes: defaults and the quick
// size are valid, a broken ladder is refused by name, and the default
// search at three batch sizes adds about half an hour to a run (2
// cores): the price of a sustainable rate per batch size.
func TestSustainOptions(t *testing.T) {
	for name, o := range map[string]SustainOptions{"defaults": SustainDefaults, "quick": SustainQuick} {
		if err := o.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := SustainDefaults
	bad.Ladders = map[string]SustainLadder{"queue": {Start: 100, Factor: 1, Max: 200}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "queue ladder") || !strings.Contains(err.Error(), "log ladder") {
		t.Errorf("bad ladders: %v", err)
	}
	bad = SustainDefaults
	bad.OverSize = 7
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "overload point's batch size 7") {
		t.Errorf("an overload size outside the searched sizes: %v", err)
	}
	e := SustainDefaults.Estimate()
	if e.Typical < 8*time.Minute || e.Typical > 25*time.Minute || e.Bound < e.Typical || e.Attacks == 0 {
		t.Errorf("default estimate %+v (typical %s)", e, e.Typical)
	}
	if q := SustainQuick.Estimate(); q.Typical > 3*time.Minute {
		t.Errorf("quick estimate %s", q.Typical)
	}
	// The throughput scenario's estimate adds the search (the pairs';
	// the designs add theirs).
	o := ThroughputDefaults
	o.Designs = false
	without := o.Estimate(20 * time.Second)
	o.Sustain = &SustainDefaults
	if with := o.Estimate(20 * time.Second); with.Typical != without.Typical+e.Typical {
		t.Errorf("throughput estimate with the search %s, without %s, search %s", with.Typical, without.Typical, e.Typical)
	}
	o.SkipClosedLoop = true
	if alone := o.Estimate(20 * time.Second); alone != e {
		t.Errorf("search alone %+v, want %+v", alone, e)
	}
}

// TestSustainBookkeeping runs a quick search and the overload point on
// no-rabbitmq's port served by the queue contract's memory backend
// (which keeps up with anything this test offers): every step records
// its offered rate, its figures and its declared start, the search
// stops at its ladder's top, and the overload point measures the
// processing during the intake against the sustainable rate. The figures
// mean nothing about a real service.
func TestSustainBookkeeping(t *testing.T) {
	port := serveMemoryQueue(t)
	e := &Env{PortOffset: port - QueuePair.A.Port, Start: StartNever, Settle: 5 * time.Second,
		Probe: func(context.Context, string, int) error { return nil }}
	sc := QueueThroughput
	// The other side is a port nobody serves: its rounds fail, and only
	// no-rabbitmq's are checked.
	sc.Pair.B = LogPair.A
	o := SustainQuick
	o.Step, o.Warmup, o.Sample = 1500*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond
	// Two sizes, the overload point at the first only.
	o.Sizes, o.OverSize = []int{10, 20}, 10
	o.Ladders = map[string]SustainLadder{"queue": {Start: 200, Factor: 2, Max: 400}, "log": {Start: 200, Factor: 2, Max: 400}}
	run := driver.NewRun("throughput", nil, time.Now())
	if err := sc.RunSustainable(context.Background(), e, run, o); err != nil {
		t.Fatal(err)
	}
	if len(run.Points) != 3 || run.Points[0].Scenario != "queue.sustainable" || run.Points[1].Scenario != "queue.over_sustainable" ||
		run.Points[1].Name != BatchLabel(10) || run.Points[2].Scenario != "queue.sustainable" || run.Points[2].Name != BatchLabel(20) {
		t.Fatalf("points %+v", run.Points)
	}
	s := run.Points[0].Rounds[0].Sides["no-rabbitmq"]
	if s == nil || s.Error != "" {
		t.Fatalf("search: %+v", s)
	}
	m := s.Metrics
	if m[MetricSustainable] != 400 || m[MetricCapped] != 1 || m[MetricSteps] != 2 || m["start.restarted"] != 0 {
		t.Errorf("search figures: sustainable %v, capped %v, steps %v, restarted %v", m[MetricSustainable], m[MetricCapped], m[MetricSteps], m["start.restarted"])
	}
	for i, rate := range []float64{200, 400} {
		if m[StepMetric(i, MetricOffered)] != rate || m[StepMetric(i, "pass")] != 1 || m[StepMetric(i, "client.requests")] == 0 {
			t.Errorf("step %d: offered %v, pass %v, requests %v", i, m[StepMetric(i, MetricOffered)], m[StepMetric(i, "pass")], m[StepMetric(i, "client.requests")])
		}
		if _, ok := m[StepMetric(i, "start.backlog")]; !ok {
			t.Errorf("step %d declares no starting backlog", i)
		}
		if _, ok := m[StepMetric(i, "start.queued")]; !ok {
			t.Errorf("step %d: no queue depth at its start", i)
		}
	}
	ov := run.Points[1].Rounds[0].Sides["no-rabbitmq"]
	if ov == nil || ov.Error != "" || len(ov.Phases) != 1 {
		t.Fatalf("overload: %+v", ov)
	}
	om := ov.Metrics
	if om[MetricOffered] != SustainOver*400 || om[MetricSustainable] != 400 || om[MetricIntake] <= 0 || om[MetricShare] <= 0 || om[MetricDrained] != 1 {
		t.Errorf("overload figures: %v", om)
	}
	run.Validate()
	if st := run.Points[1].SideStatus("no-rabbitmq"); !st.OK() {
		t.Errorf("overload status %s", st)
	}
}
