package scenario

import (
	"context"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestSearchClimbsTheLadderThenBisects runs the search against a fake
// side whose knee is 5000/s: up the ladder to the first failure, then
// geometric bisections; a capped ladder; a failing start halved.
func TestSearchClimbsTheLadderThenBisects(t *testing.T) {
	var tried []float64
	step := func(_ context.Context, _ string, rate float64) (driver.CeilingStep, error) {
		tried = append(tried, rate)
		return driver.CeilingStep{Rate: rate, Pass: rate <= 5000}, nil
	}
	o := CeilingOptions{Start: 1000, Factor: 2, Max: 16000, Bisect: 2}
	cr, err := search(context.Background(), "x", o, o.Start, step)
	if err != nil {
		t.Fatal(err)
	}
	// √(4000·8000) = 5657 → 5700 fails, √(4000·5700) = 4775 → 4800 passes.
	if want := []float64{1000, 2000, 4000, 8000, 5700, 4800}; !reflect.DeepEqual(tried, want) {
		t.Errorf("tried %v, want %v", tried, want)
	}
	if cr.Rate != 4800 || cr.Capped || len(cr.Steps) != 6 {
		t.Errorf("%+v", cr)
	}

	tried = nil
	cr, _ = search(context.Background(), "x", CeilingOptions{Start: 1000, Factor: 2, Max: 4000}, 1000, step)
	if !cr.Capped || cr.Rate != 4000 {
		t.Errorf("capped search: %+v (tried %v)", cr, tried)
	}

	tried = nil
	slow := func(_ context.Context, _ string, rate float64) (driver.CeilingStep, error) {
		tried = append(tried, rate)
		return driver.CeilingStep{Rate: rate, Pass: rate <= 300}, nil
	}
	cr, _ = search(context.Background(), "x", CeilingOptions{Start: 1000, Factor: 2, Max: 16000, Bisect: 1}, 1000, slow)
	if cr.Rate != 250 || !reflect.DeepEqual(tried, []float64{1000, 500, 250, 350}) {
		t.Errorf("failing start: %+v, tried %v", cr, tried)
	}
}

// TestLaterSearchesStartAtTheKnee: the ladder of √2 steps, and a side's
// second search starting on it at or below the first's knee, so that it
// spends its steps around the knee rather than below it.
func TestLaterSearchesStartAtTheKnee(t *testing.T) {
	o := CeilingOptions{Start: 1000, Factor: math.Sqrt2, Max: 16000, Bisect: 1}
	want := []float64{1000, 1400, 2000, 2800, 4000, 5700, 8000, 11000, 16000}
	if got := o.ladder(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ladder %v, want %v", got, want)
	}
	if s := warmStart(o, nil); s != 1000 {
		t.Errorf("first search starts at %g", s)
	}
	before := []driver.CeilingRound{{Rate: 3300}, {Rate: 0}}
	if s := warmStart(o, before); s != 2800 {
		t.Errorf("after a knee of 3300/s the search starts at %g, want 2800", s)
	}
	var tried []float64
	step := func(_ context.Context, _ string, rate float64) (driver.CeilingStep, error) {
		tried = append(tried, rate)
		return driver.CeilingStep{Rate: rate, Pass: rate <= 3500}, nil
	}
	cr, _ := search(context.Background(), "x", o, warmStart(o, before), step)
	if !reflect.DeepEqual(tried, []float64{2800, 4000, 3300}) || cr.Rate != 3300 {
		t.Errorf("warm search tried %v, knee %g", tried, cr.Rate)
	}
}

// TestJudgeNamesEveryFailedCriterion: a step's every failed criterion is
// recorded, not only the first, so that the report can say which binds;
// a missing latency fails (it used to pass as 0 ms).
func TestJudgeNamesEveryFailedCriterion(t *testing.T) {
	o := CeilingOptions{Step: 15 * time.Second, Warmup: 5 * time.Second, P99: 100 * time.Millisecond}
	sp := o.spec("processing", "send", nil)
	ok := map[driver.Metric]float64{"client.sent_rate": 1000, "client.errors": 0, "backlog_end": 50, "server.processing.p99_ms": 20, "server.send.p99_ms": 5}
	if failed, why := Judge(sp, ok, 1000); len(failed) != 0 {
		t.Errorf("should pass: %v %s", failed, why)
	}
	for name, c := range map[string]struct {
		change map[driver.Metric]float64
		drop   string
		want   []string
	}{
		"errors":   {change: map[driver.Metric]float64{"client.errors": 200}, want: []string{CritErrors}},
		"shed":     {change: map[driver.Metric]float64{"client.shed": 200}, want: []string{CritShed}},
		"slow":     {change: map[driver.Metric]float64{"server.processing.p99_ms": 150}, want: []string{CritP99}},
		"backlog":  {change: map[driver.Metric]float64{"backlog_end": 500, "server.processing.p99_ms": 120}, want: []string{CritBacklog, CritP99}},
		"underrun": {change: map[driver.Metric]float64{"client.sent_rate": 800}, want: []string{CritSent}},
		"nothing":  {change: map[driver.Metric]float64{"client.sent_rate": 0}, want: []string{CritSent}},
		"missing":  {drop: "server.processing.p99_ms", want: []string{CritLatency}},
		// the consumer keeps up while the producer waits past the bound
		// for its answer (Kafka at 3,600/s: delivery p99 91 ms, write
		// p99 296 ms): the step fails, and on p99 once, however many
		// latencies are over
		"slow answer": {change: map[driver.Metric]float64{"server.send.p99_ms": 296}, want: []string{CritP99}},
		"both slow":   {change: map[driver.Metric]float64{"server.send.p99_ms": 296, "server.processing.p99_ms": 150}, want: []string{CritP99}},
		"no answer":   {drop: "server.send.p99_ms", want: []string{CritLatency}},
	} {
		m := maps.Clone(ok)
		maps.Copy(m, c.change)
		delete(m, driver.Metric(c.drop))
		failed, why := Judge(sp, m, 1000)
		if !reflect.DeepEqual(failed, c.want) || why == "" {
			t.Errorf("%s: failed %v (%s), want %v", name, failed, why, c.want)
		}
	}
	text := CriteriaText(sp)
	for _, want := range []string{"errors < 1%", "shed < 1%", "sent >= 95%", "max(100, 0.2 s of arrivals)", "15s step (after 5s at the same rate)", "server processing and send p99 < 100ms"} {
		if !strings.Contains(text, want) {
			t.Errorf("criteria %q lacks %q", text, want)
		}
	}
	if strings.Contains(text, "own p99") || strings.Contains(text, "×") {
		t.Errorf("criteria %q: a relative bound came back", text)
	}
	if !strings.HasSuffix(text, "p99 < 100ms") {
		t.Errorf("criteria %q: the latency bound must come last", text)
	}
}

// TestOneAbsoluteRuleForBothSides: the same step figures pass or fail
// the same way whatever the side's own floor: a side with a 14 ms floor
// at 90 ms passes exactly as a side with a 67 ms floor does (the knee
// rule of the files before 5 December 2026 failed the first alone).
func TestOneAbsoluteRuleForBothSides(t *testing.T) {
	o := QueueScenario.Defaults.CeilingOpts
	low, high := o.spec("delivery", "", nil), o.spec("delivery", "", nil)
	low.LowRate, low.LowP99MS = 100, 14.4
	high.LowRate, high.LowP99MS = 100, 67.6
	m := map[driver.Metric]float64{"client.sent_rate": 1000, "backlog_end": 10, "server.delivery.p99_ms": 90}
	f1, _ := Judge(low, m, 1000)
	f2, _ := Judge(high, m, 1000)
	if len(f1) != 0 || len(f2) != 0 {
		t.Errorf("a 90 ms p99 under the 100 ms SLO failed: %v / %v", f1, f2)
	}
}

// TestInvalidStepEndsTheSearch: a step whose precondition did not hold
// is neither a pass nor a failure: its search ends, marked invalid, and
// its rate does not count toward the ceiling.
func TestInvalidStepEndsTheSearch(t *testing.T) {
	var tried []float64
	step := func(_ context.Context, _ string, rate float64) (driver.CeilingStep, error) {
		tried = append(tried, rate)
		if rate == 2000 {
			return driver.CeilingStep{Rate: rate, Invalid: "replication slot 4.1 GiB behind"}, nil
		}
		return driver.CeilingStep{Rate: rate, Pass: true}, nil
	}
	cr, err := search(context.Background(), "x", CeilingOptions{Start: 1000, Factor: 2, Max: 16000, Bisect: 2}, 1000, step)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tried, []float64{1000, 2000}) || cr.Invalid == "" || !strings.Contains(cr.Invalid, "at 2000/s") {
		t.Errorf("tried %v, round %+v", tried, cr)
	}
	run := &driver.Run{Ceilings: []driver.Ceiling{{Scenario: "q.ceiling", Service: "x", Rounds: []driver.CeilingRound{cr, cr, {Rate: 1000, Steps: []driver.CeilingStep{{Rate: 1000, Pass: true}}}}}}}
	run.Validate()
	if st := run.Ceilings[0].CeilingStatus(); st.State != driver.StateInvalid || !strings.Contains(st.Reason, "1 of 3 ceiling searches") {
		t.Errorf("two invalid searches of three: %s", st)
	}
}

// TestEstimateCountsTheScenariosAttacks checks the plan the progress
// report starts from: the fixed-rate attacks of both sides; the ceiling
// searches, the first of a side half-way up its ladder and the later
// ones from their knee (typical) or each all the way (bound), with the
// restart that lifts the in-flight bound.
func TestEstimateCountsTheScenariosAttacks(t *testing.T) {
	o := RateOptions{Rates: []float64{500}, Duration: 10 * time.Second, Rounds: 1}
	e := o.Estimate(20 * time.Second)
	if e.Attacks != 2 || e.Typical != 48*time.Second || e.Bound != 88*time.Second {
		t.Errorf("one rate, one round: %+v, want 2 attacks, 48s typical, 1m28s bound", e)
	}
	o.Ceiling = true
	o.CeilingOpts = CeilingOptions{Start: 1000, Factor: 2, Max: 16000, Bisect: 2, Step: 4 * time.Second, Rounds: 3}
	c := o.Estimate(20 * time.Second)
	// Ladder 1000…16000 is 5 rates: a first search of 3 up and 2
	// bisections, two later ones of 2 and 2, per side.
	if got := c.Attacks - e.Attacks; got != 26 {
		t.Errorf("ceiling attacks %d, want 26", got)
	}
	restart := 2*serviceStart + warmupTime
	if got, want := c.Typical-e.Typical, 26*5*time.Second+6*pastKneeDrain+restart; got != want {
		t.Errorf("ceiling typical %s, want %s", got, want)
	}
	if got, want := c.Bound-e.Bound, time.Duration(6*7)*(5*time.Second+30*time.Second)+restart; got != want {
		t.Errorf("ceiling bound %s, want %s", got, want)
	}
	o.CeilingOpts.MaxInFlight = LeaveInFlight
	if got := o.Estimate(20*time.Second).Typical - e.Typical; got != 26*5*time.Second+6*pastKneeDrain {
		t.Errorf("no restart: %s", got)
	}
}

// TestDeclaredCeilingsLiftTheInFlightBound: both rate scenarios search
// with the services' in-flight bound lifted, steps long enough to trust
// (15 s after a 5 s warm-up at the rate), two bisections and three
// searches per side, under the one absolute SLO; Validate refuses a
// negative warm-up.
func TestDeclaredCeilingsLiftTheInFlightBound(t *testing.T) {
	for _, s := range []RateScenario{QueueScenario, LogScenario} {
		c := s.Defaults.CeilingOpts
		if c.MaxInFlight != 0 || c.Factor >= 2 || len(c.ladder()) < 8 || c.Step < 15*time.Second || c.Warmup <= 0 ||
			c.Bisect < 2 || c.Rounds < 3 || c.P99 != CeilingP99 {
			t.Errorf("%s: %+v", s.Pair.Name, c)
		}
		bad := s
		bad.Defaults.CeilingOpts.Warmup = -time.Second
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "warm-up") {
			t.Errorf("%s with a negative warm-up: %v", s.Pair.Name, err)
		}
	}
	if !slices.Equal(Criteria, []string{CritErrors, CritShed, CritSent, CritLatency, CritBacklog, CritP99}) {
		t.Errorf("criteria %v", Criteria)
	}
	if CeilingSLOs[len(CeilingSLOs)-1] != CeilingP99 {
		t.Errorf("the search bisects at %s, the largest SLO read is %s", CeilingP99, CeilingSLOs[len(CeilingSLOs)-1])
	}
}

// TestCeilingKeepsTheBoundOfServicesOutsideTheDriver: a service the
// driver did not start cannot be restarted without its in-flight bound;
// the search then runs with its own bound, recorded as such (nil) and
// explained (Explain), rather than failing the run.
func TestCeilingKeepsTheBoundOfServicesOutsideTheDriver(t *testing.T) {
	e := &Env{Start: StartAuto, Probe: func(context.Context, string, int) error { return nil }}
	run := driver.NewRun("queue", nil, time.Now())
	o := CeilingOptions{MaxInFlight: 0}
	got, err := QueueScenario.ceilingServices(context.Background(), e, run, o, ceilingScenario{name: "queue.ceiling", sides: QueueScenario.Pair.Sides()})
	if err != nil || len(got) != 0 {
		t.Fatalf("bounds %v, err %v", got, err)
	}
	// What ceiling records around it.
	run.Settings["ceiling"] = o
	for _, svc := range QueueScenario.Pair.Sides() {
		sp := o.spec(QueueScenario.CeilingLatency, QueueScenario.CeilingAck, got[svc])
		run.Ceilings = append(run.Ceilings, driver.Ceiling{Scenario: "queue.ceiling", Service: svc, Spec: &sp})
	}
	notes := Explain(readBack(t, run))
	if len(run.Notes) != 0 || len(notes) != 2 || notes[0] != "queue ceiling: no-rabbitmq runs outside the driver, so its search ran with its own in-flight bound, not MAX_IN_FLIGHT=0" {
		t.Errorf("notes %q, explained %q", run.Notes, notes)
	}
	if _, ok := run.Settings["ceiling_env"]; ok {
		t.Errorf("settings record an environment the services did not get: %v", run.Settings)
	}
	run.Notes = nil
	if got, err := QueueScenario.ceilingServices(context.Background(), e, run, CeilingOptions{MaxInFlight: LeaveInFlight}, ceilingScenario{name: "queue.ceiling", sides: QueueScenario.Pair.Sides()}); err != nil || len(got) != 0 || len(run.Notes) != 0 {
		t.Errorf("leaving the bound: %v %v %q", got, err, run.Notes)
	}
}

// TestLaterSearchesOfASideThatPassedNothingTryItsFloorOnce: a side
// whose valid searches passed nothing (FerretDB's searches, seconds
// each) starts its later searches at the lowest rate tried, alone: a
// failure ends the search there, without halving again; a pass is
// refined between the floor and twice it. An invalid search says
// nothing about the floor.
func TestLaterSearchesOfASideThatPassedNothingTryItsFloorOnce(t *testing.T) {
	o := CeilingOptions{Start: 100, Factor: math.Sqrt2, Max: 12800, Bisect: 2}
	var tried []float64
	failing := func(_ context.Context, _ string, rate float64) (driver.CeilingStep, error) {
		tried = append(tried, rate)
		return driver.CeilingStep{Rate: rate}, nil
	}
	first, _ := search(context.Background(), "x", o, o.Start, failing)
	if !reflect.DeepEqual(tried, []float64{100, 50, 25, 13, 6.5}) || first.Rate != 0 {
		t.Fatalf("first search tried %v (rate %g), want the start and four halvings", tried, first.Rate)
	}
	before := []driver.CeilingRound{first}
	if s := warmStart(o, before); s != 6.5 {
		t.Fatalf("after a search that passed nothing down to 6.5/s, the next starts at %g", s)
	}
	if s := warmStart(o, []driver.CeilingRound{{Invalid: "not idle", Steps: []driver.CeilingStep{{Rate: 3, Invalid: "not idle"}}}}); s != o.Start {
		t.Errorf("after an invalid search only, the next starts at %g, want the ladder's start", s)
	}
	tried = nil
	cr, _ := search(context.Background(), "x", o, warmStart(o, before), failing)
	if !reflect.DeepEqual(tried, []float64{6.5}) || cr.Rate != 0 {
		t.Errorf("floor search tried %v (rate %g), want the floor once", tried, cr.Rate)
	}
	tried = nil
	upTo9 := func(_ context.Context, _ string, rate float64) (driver.CeilingStep, error) {
		tried = append(tried, rate)
		return driver.CeilingStep{Rate: rate, Pass: rate <= 9}, nil
	}
	cr, _ = search(context.Background(), "x", o, 6.5, upTo9)
	// √(6.5·13) = 9.2 fails, √(6.5·9.2) = 7.7 passes.
	if !reflect.DeepEqual(tried, []float64{6.5, 9.2, 7.7}) || cr.Rate != 7.7 {
		t.Errorf("a passing floor tried %v, rate %g; want 6.5, 9.2, 7.7 and 7.7", tried, cr.Rate)
	}
}
