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
	o := CeilingOptions{Step: 4 * time.Second, P99: 100 * time.Millisecond, KneeFactor: 5}
	sp := o.spec("processing", nil)
	sp.LowRate, sp.LowP99MS = 100, 10
	ok := map[string]float64{"client.sent_rate": 1000, "client.errors": 0, "backlog_end": 50, "server.processing.p99_ms": 20}
	if failed, why := Judge(sp, ok, 1000); len(failed) != 0 {
		t.Errorf("should pass: %v %s", failed, why)
	}
	for name, c := range map[string]struct {
		change map[string]float64
		drop   string
		want   []string
	}{
		"errors":   {change: map[string]float64{"client.errors": 100}, want: []string{CritErrors}},
		"shed":     {change: map[string]float64{"client.shed": 100}, want: []string{CritShed}},
		"slow":     {change: map[string]float64{"server.processing.p99_ms": 150}, want: []string{CritP99, CritKnee}},
		"knee":     {change: map[string]float64{"server.processing.p99_ms": 60}, want: []string{CritKnee}},
		"backlog":  {change: map[string]float64{"backlog_end": 500, "server.processing.p99_ms": 120}, want: []string{CritBacklog, CritP99, CritKnee}},
		"underrun": {change: map[string]float64{"client.sent_rate": 800}, want: []string{CritSent}},
		"nothing":  {change: map[string]float64{"client.sent_rate": 0}, want: []string{CritSent}},
		"missing":  {drop: "server.processing.p99_ms", want: []string{CritLatency}},
	} {
		m := maps.Clone(ok)
		maps.Copy(m, c.change)
		delete(m, c.drop)
		failed, why := Judge(sp, m, 1000)
		if !reflect.DeepEqual(failed, c.want) || why == "" {
			t.Errorf("%s: failed %v (%s), want %v", name, failed, why, c.want)
		}
	}
	// No low-rate p99: no knee clause.
	sp.LowP99MS = 0
	m := maps.Clone(ok)
	m["server.processing.p99_ms"] = 90
	if failed, _ := Judge(sp, m, 1000); len(failed) != 0 {
		t.Errorf("without a low-rate p99 the knee clause applied: %v", failed)
	}
	text := CriteriaText(sp)
	for _, want := range []string{"errors < 1%", "shed < 1%", "sent >= 95%", "max(100, 0.2 s of arrivals)", "5× the side's own p99", "server processing p99 < 100ms"} {
		if !strings.Contains(text, want) {
			t.Errorf("criteria %q lacks %q", text, want)
		}
	}
	if !strings.HasSuffix(text, "p99 < 100ms") {
		t.Errorf("criteria %q: the latency bound must come last", text)
	}
}

// TestLowRateP99 takes the lowest fixed rate whose rounds are all valid.
func TestLowRateP99(t *testing.T) {
	side := func(p99 float64, codes map[string]int64) *driver.SideResult {
		var ok, errs int64
		for c, n := range codes {
			if c == "202" {
				ok += n
			} else {
				errs += n
			}
		}
		return &driver.SideResult{Phases: []driver.Phase{{Name: "send", Client: driver.ClientResult{Requests: ok + errs, OK: ok, Errors: errs, Codes: codes}}},
			Metrics: map[string]float64{"server.processing.p99_ms": p99}}
	}
	point := func(rate float64, sides ...*driver.SideResult) driver.Point {
		p := driver.Point{Scenario: "queue.rate", Rate: rate}
		for i, s := range sides {
			p.Rounds = append(p.Rounds, driver.Round{Index: i, Sides: map[string]*driver.SideResult{"a": s}})
		}
		return p
	}
	good := map[string]int64{"202": 100}
	bad := map[string]int64{"202": 50, "500": 50}
	run := &driver.Run{Points: []driver.Point{
		point(1000, side(30, good), side(50, good), side(40, good)),
		point(200, side(5, good), side(900, bad)),
		point(500, side(12, good), side(10, good), side(11, good)),
	}}
	if r, v := lowRateP99(run, "queue.rate", "a", "processing"); r != 500 || v != 11 {
		t.Errorf("low rate %g, p99 %g; want 500, 11", r, v)
	}
	if r, v := lowRateP99(run, "queue.rate", "b", "processing"); r != 0 || v != 0 {
		t.Errorf("a side never measured: %g %g", r, v)
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
// with the services' in-flight bound lifted and a knee factor, and
// Validate refuses a knee factor of 1 or less.
func TestDeclaredCeilingsLiftTheInFlightBound(t *testing.T) {
	for _, s := range []RateScenario{QueueScenario, LogScenario} {
		c := s.Defaults.CeilingOpts
		if c.MaxInFlight != 0 || c.KneeFactor <= 1 || c.Factor >= 2 || len(c.ladder()) < 8 {
			t.Errorf("%s: %+v", s.Pair.Name, c)
		}
		bad := s
		bad.Defaults.CeilingOpts.KneeFactor = 1
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "knee factor") {
			t.Errorf("%s with knee factor 1: %v", s.Pair.Name, err)
		}
	}
	if !slices.Equal(Criteria, []string{CritErrors, CritShed, CritSent, CritLatency, CritBacklog, CritP99, CritKnee}) {
		t.Errorf("criteria %v", Criteria)
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
	got, err := QueueScenario.ceilingServices(context.Background(), e, run, o)
	if err != nil || len(got) != 0 {
		t.Fatalf("bounds %v, err %v", got, err)
	}
	// What ceiling records around it.
	run.Settings["ceiling"] = o
	for _, svc := range QueueScenario.Pair.Sides() {
		sp := o.spec(QueueScenario.CeilingLatency, got[svc])
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
	if got, err := QueueScenario.ceilingServices(context.Background(), e, run, CeilingOptions{MaxInFlight: LeaveInFlight}); err != nil || len(got) != 0 || len(run.Notes) != 0 {
		t.Errorf("leaving the bound: %v %v %q", got, err, run.Notes)
	}
}
