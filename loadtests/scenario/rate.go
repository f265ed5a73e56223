package scenario

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Load is what one rate point sends.
type Load struct {
	// Phase names the attack in the results ("send", "write").
	Phase string
	// Path is the endpoint POSTed to ("/tasks").
	Path string
	// Body returns the n-th request's JSON body.
	Body func(n uint64) []byte
}

// Run runs the scenario with o on e, recording every point and ceiling
// in run: the fixed rates, then the ceiling search, then the variant.
func (s RateScenario) Run(ctx context.Context, e *Env, run *driver.Run, o RateOptions) error {
	run.Settings["rates"] = o.Rates
	run.Settings["duration_s"] = o.Duration.Seconds()
	run.Settings["rounds"] = o.Rounds
	run.Settings["settle_s"] = e.settle().Seconds()
	run.Settings["max_workers"] = e.MaxWorkers
	if err := e.Ensure(ctx, s.Pair.Services(), nil, nil); err != nil {
		return err
	}
	s.warmup(ctx, e)
	for _, r := range o.Rates {
		if err := s.point(ctx, e, run, "rate", r, o, nil); err != nil {
			return err
		}
	}
	if o.Ceiling {
		run.Settings["ceiling"] = o.CeilingOpts
		if err := s.ceiling(ctx, e, run, o.CeilingOpts); err != nil {
			return err
		}
	}
	if o.Variant {
		run.Settings[s.Variant+"_env"] = s.VariantEnv
		run.Settings[s.Variant+"_rate"] = o.VariantRate
		for _, x := range s.Extras {
			run.Settings[x.Name+"_env"] = x.Env
		}
		if err := s.variant(ctx, e, run, o); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			run.Note("%s variant not measured: %v", s.Variant, err)
			e.logf("%s variant not measured: %v", s.Variant, err)
		}
		// Back to the defaults for whatever runs next.
		if err := e.Ensure(ctx, s.Pair.Services(), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// variant measures the pair at o.VariantRate in the default mode, then
// restarted with the variant's environment, then with each extra's.
func (s RateScenario) variant(ctx context.Context, e *Env, run *driver.Run, o RateOptions) error {
	// Fail early, before measuring anything, when a service cannot be
	// restarted by the driver.
	if err := e.Ensure(ctx, s.Pair.Services(), s.VariantEnv, nil); err != nil {
		return err
	}
	// The same rate in the default mode, so the two are compared within
	// one run even when VariantRate is not one of Rates; the extras after
	// the variant.
	modes := append([]Extra{{Name: "default"}, {Name: s.Variant, Env: s.VariantEnv}}, s.Extras...)
	for _, mode := range modes {
		if err := e.Ensure(ctx, s.Pair.Services(), mode.Env, nil); err != nil {
			return fmt.Errorf("%s: %w", mode.Name, err)
		}
		s.warmup(ctx, e)
		if err := s.point(ctx, e, run, mode.Name, o.VariantRate, o, mode.Env); err != nil {
			return fmt.Errorf("%s: %w", mode.Name, err)
		}
	}
	return nil
}

// side measures one side at rate for dur: reset, attack, read, settle,
// read.
func (s RateScenario) side(ctx context.Context, e *Env, svc string, rate float64, dur, settle time.Duration) (*driver.SideResult, error) {
	return s.sideCost(ctx, e, svc, rate, dur, settle, nil)
}

// sideCost is side, also sampling the CPU of groups around the attack
// (from its first send to its last answer, the settle excluded): each
// group's CPU-seconds ("cpu.<group>.s") and the cores it used
// ("cores.<group>": CPU-seconds per second of the attack), and the cores
// the whole machine was busy ("cores.machine": everybody's, the other
// users of the machine too).
func (s RateScenario) sideCost(ctx context.Context, e *Env, svc string, rate float64, dur, settle time.Duration, groups cost.Set) (*driver.SideResult, error) {
	pair, load := s.Pair, s.Load
	base := e.URL(svc)
	res := &driver.SideResult{Metrics: map[string]float64{}}
	if err := driver.ResetStats(ctx, base); err != nil {
		return res, err
	}
	url := base + load.Path
	var cpu0 cost.Sample
	var busy0 time.Duration
	if len(groups) > 0 {
		cpu0 = groups.Sample()
		busy0, _ = cost.MachineBusy()
	}
	t0 := time.Now()
	c := driver.Attack(ctx, driver.AttackSpec{
		Name: fmt.Sprintf("%-12s %6g/s", svc, rate), Rate: rate, Duration: dur,
		MaxWorkers: e.MaxWorkers, Progress: e.Progress,
		Next: func(n uint64) driver.Request {
			return driver.Request{Method: http.MethodPost, URL: url, Body: load.Body(n)}
		},
	})
	if len(groups) > 0 {
		window := time.Since(t0).Seconds()
		used := groups.Sample().Sub(cpu0)
		for _, g := range groups {
			if v, ok := used[g.Name]; ok {
				res.Metrics["cpu."+g.Name+".s"] = v
				res.Metrics["cores."+g.Name] = math.Round(v/window*100) / 100
			}
		}
		if busy1, err := cost.MachineBusy(); err == nil && busy0 > 0 {
			res.Metrics["cores.machine"] = math.Round((busy1-busy0).Seconds()/window*100) / 100
		}
	}
	res.Phases = append(res.Phases, driver.Phase{Name: load.Phase, Client: c})
	driver.FlattenClient(res.Metrics, "client.", c)
	atEnd, err := driver.GetStats(ctx, base)
	if err != nil {
		return res, err
	}
	res.ProgressAtEnd, _ = driver.GetRaw(ctx, base+pair.Progress)
	res.Metrics["backlog_end"] = float64(max(pair.backlog(atEnd), 0))
	res.Metrics["throughput"] = math.Round(float64(counterSum(atEnd, pair.Out))/dur.Seconds()*10) / 10
	// Settle: wait for what was sent to be processed, so that the
	// server-side latencies cover every request and the next round starts
	// from an empty backlog.
	t0 = time.Now()
	final, drained, err := pair.drain(ctx, base, atEnd, settle, 200*time.Millisecond)
	if err != nil {
		return res, err
	}
	if !drained {
		final, _ = driver.GetStats(ctx, base)
	}
	res.Metrics["settle_s"] = math.Round(time.Since(t0).Seconds()*100) / 100
	res.Metrics["drained"] = b2f(drained)
	res.Stats = final
	res.Progress, _ = driver.GetRaw(ctx, base+pair.Progress)
	driver.FlattenServer(res.Metrics, final)
	return res, nil
}

// warmup sends 2 s at 50/s to each side and waits for it to drain,
// recording nothing: a freshly started service (a Kafka consumer joining
// its group, pools filling) should not weigh on the first round.
func (s RateScenario) warmup(ctx context.Context, e *Env) {
	progress := e.Progress
	e.Progress = nil
	defer func() { e.Progress = progress }()
	for _, svc := range s.Pair.Sides() {
		if _, err := s.side(ctx, e, svc, 50, 2*time.Second, e.settle()); err != nil {
			e.logf("warm-up of %s: %v", svc, err)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// point measures the pair at rate over o.Rounds rounds of o.Duration and
// appends the point, named <pair>.<kind>, to run; env is the environment
// the services run with (nil: the defaults).
func (s RateScenario) point(ctx context.Context, e *Env, run *driver.Run, kind string, rate float64, o RateOptions, env map[string]map[string]string) error {
	scenario := s.Pair.Name + "." + kind
	e.logf("%s %s: %g/s for %s, %d rounds", s.Pair.Name, scenario, rate, o.Duration, o.Rounds)
	p := driver.Point{Scenario: scenario, Name: driver.Label(rate), Rate: rate, DurationS: o.Duration.Seconds(), Sides: s.Pair.Sides(), Env: env}
	err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
		return s.side(ctx, e, svc, rate, o.Duration, e.settle())
	})
	run.Points = append(run.Points, p)
	return err
}

// CeilingOptions parameterize a ceiling search.
type CeilingOptions struct {
	// Start is the first rate tried; each passing step multiplies it by
	// Factor until a step fails or Max is passed.
	Start, Factor, Max float64
	// Bisect is how many bisection steps refine the ceiling between the
	// last pass and the first failure.
	Bisect int
	// Step is each step's duration.
	Step time.Duration
	// Rounds is how many searches per side (alternating sides, order
	// rotated).
	Rounds int
	// P99 is the server-side latency p99 a step must stay under.
	P99 time.Duration
}

// ceilingCriteria says whether a step passed: errors under 1% and sheds
// (503 + Retry-After: the service refused the excess) under 1%, the driver
// sent at least 95% of the rate, the backlog at the end of the attack at
// most 0.2 s of arrivals (at least 100), and the server-side latency p99
// under o.P99.
func ceilingCriteria(latency string, o CeilingOptions) (string, func(m map[string]float64, rate float64) (bool, string)) {
	desc := fmt.Sprintf("errors < 1%%, shed < 1%%, sent >= 95%% of the rate, backlog at the end of each %s step <= max(100, 0.2 s of arrivals) (flat), server %s p99 < %s",
		o.Step, latency, o.P99)
	return desc, func(m map[string]float64, rate float64) (bool, string) {
		sent := m["client.sent_rate"]
		switch {
		case sent == 0:
			return false, "nothing sent"
		case m["client.errors"] > 0.01*sent*o.Step.Seconds():
			return false, fmt.Sprintf("errors %.0f", m["client.errors"])
		case m["client.shed"] > 0.01*sent*o.Step.Seconds():
			return false, fmt.Sprintf("shed %.0f (503 + Retry-After)", m["client.shed"])
		case sent < 0.95*rate:
			return false, fmt.Sprintf("driver sent only %.0f/s", sent)
		case m["backlog_end"] > math.Max(100, 0.2*rate):
			return false, fmt.Sprintf("backlog %.0f at the end", m["backlog_end"])
		case m["server."+latency+".p99_ms"] >= float64(o.P99.Milliseconds()):
			return false, fmt.Sprintf("%s p99 %.1f ms", latency, m["server."+latency+".p99_ms"])
		}
		return true, fmt.Sprintf("%s p99 %.1f ms, backlog %.0f", latency, m["server."+latency+".p99_ms"], m["backlog_end"])
	}
}

// ceiling runs the ceiling search on both sides of pair, o.Rounds times,
// alternating sides with the order rotated, and appends one Ceiling per
// side to run.
func (s RateScenario) ceiling(ctx context.Context, e *Env, run *driver.Run, o CeilingOptions) error {
	pair, scenario := s.Pair, s.Pair.Name+".ceiling"
	desc, pass := ceilingCriteria(s.CeilingLatency, o)
	e.logf("%s %s: search from %g/s (x%g, max %g/s), %s steps, %d rounds", pair.Name, scenario, o.Start, o.Factor, o.Max, o.Step, o.Rounds)
	byside := map[string]*driver.Ceiling{}
	for _, svc := range pair.Sides() {
		byside[svc] = &driver.Ceiling{Scenario: scenario, Service: svc, Criteria: desc}
	}
	step := func(ctx context.Context, svc string, rate float64) (driver.CeilingStep, error) {
		res, err := s.side(ctx, e, svc, rate, o.Step, 3*e.settle()/2)
		st := driver.CeilingStep{Rate: rate}
		if res != nil {
			st.Metrics = res.Metrics
		}
		if err != nil {
			st.Why = err.Error()
			return st, err
		}
		st.Pass, st.Why = pass(res.Metrics, rate)
		e.logf("  %s %g/s: pass=%v (%s)", svc, rate, st.Pass, st.Why)
		return st, nil
	}
	var err error
	for r := range o.Rounds {
		for _, svc := range driver.Order(pair.Sides(), r) {
			var cr driver.CeilingRound
			cr, err = search(ctx, svc, o, step)
			cr.Index = r
			byside[svc].Rounds = append(byside[svc].Rounds, cr)
			if ctx.Err() != nil {
				break
			}
		}
	}
	for _, svc := range pair.Sides() {
		c := byside[svc]
		var rates []float64
		for _, r := range c.Rounds {
			rates = append(rates, r.Rate)
		}
		if len(rates) > 0 {
			c.Rate = driver.Aggregate(rates)
		}
		run.Ceilings = append(run.Ceilings, *c)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// search finds the highest passing rate: geometric steps up from o.Start
// until a failure (or o.Max), then o.Bisect bisections. If the first step
// fails, it halves the rate up to three times.
func search(ctx context.Context, svc string, o CeilingOptions, step func(context.Context, string, float64) (driver.CeilingStep, error)) (driver.CeilingRound, error) {
	var cr driver.CeilingRound
	try := func(rate float64) (bool, error) {
		st, err := step(ctx, svc, rate)
		cr.Steps = append(cr.Steps, st)
		if st.Pass && rate > cr.Rate {
			cr.Rate = rate
		}
		return st.Pass, err
	}
	lo, hi := 0.0, 0.0
	for rate := o.Start; ; rate = math.Round(rate * o.Factor) {
		if rate > o.Max {
			cr.Capped = true
			return cr, nil
		}
		ok, err := try(rate)
		if err != nil {
			return cr, err
		}
		if !ok {
			hi = rate
			break
		}
		lo = rate
	}
	if lo == 0 {
		for range 3 {
			hi = math.Round(hi / 2)
			ok, err := try(hi)
			if err != nil || ok {
				lo = hi
				hi *= 2
				if err != nil {
					return cr, err
				}
				break
			}
		}
		if lo == 0 {
			return cr, nil
		}
	}
	for range o.Bisect {
		mid := roundRate((lo + hi) / 2)
		if mid <= lo || mid >= hi {
			break
		}
		ok, err := try(mid)
		if err != nil {
			return cr, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return cr, nil
}

// roundRate rounds to two significant digits.
func roundRate(r float64) float64 {
	if r <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(r))-1)
	return math.Round(r/p) * p
}
