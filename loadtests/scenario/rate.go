package scenario

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"reflect"
	"strings"
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
		if err := s.point(ctx, e, run, ratePoint{kind: "rate", rate: r}, o); err != nil {
			return err
		}
	}
	if o.Ceiling {
		run.Settings["ceiling"] = o.CeilingOpts
		if err := s.ceiling(ctx, e, run, o.CeilingOpts, o.Designs); err != nil {
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
	// The same rate in the default mode, so the two are compared within
	// one run even when VariantRate is not one of Rates; the extras after
	// the variant.
	modes := append([]Extra{{Name: "default"}, {Name: s.Variant, Env: s.VariantEnv}}, s.Extras...)
	for _, mode := range modes {
		if mode.Name == "default" {
			if p, ok := s.ratePoint(run, o.VariantRate); ok {
				// Measured already, in this run and in this mode: the
				// fixed-rate point at that rate (the same services,
				// settings, duration and rounds) is the default mode's.
				p.Scenario = PairScenarioName(s.Pair.Name, mode.Name)
				run.Points = append(run.Points, p)
				continue
			}
		}
		if err := e.Ensure(ctx, s.Pair.Services(), mode.Env, nil); err != nil {
			return fmt.Errorf("%s: %w", mode.Name, err)
		}
		s.warmup(ctx, e)
		if err := s.point(ctx, e, run, ratePoint{kind: mode.Name, rate: o.VariantRate, env: mode.Env}, o); err != nil {
			return fmt.Errorf("%s: %w", mode.Name, err)
		}
	}
	return nil
}

// reusedDefaultNotes says of each default-mode point that variant took
// from the fixed-rate point at the same rate (the same rounds) that it
// is that point.
func reusedDefaultNotes(run *driver.Run) []string {
	var out []string
	for _, p := range run.Points {
		pair, ok := strings.CutSuffix(string(p.Scenario), "."+KindDefault)
		if !ok || len(p.Rounds) == 0 {
			continue
		}
		for _, q := range run.Points {
			if q.Scenario == RateScenarioName(pair) && q.Rate == p.Rate && reflect.DeepEqual(q.Rounds, p.Rounds) {
				out = append(out, fmt.Sprintf("the default mode's point at %s is the fixed-rate point at that rate, measured earlier in this run", driver.Label(p.Rate)))
				break
			}
		}
	}
	return out
}

// ratePoint is run's fixed-rate point at rate, when every side of it is
// valid.
func (s RateScenario) ratePoint(run *driver.Run, rate float64) (driver.Point, bool) {
	for _, p := range run.Points {
		if p.Scenario != RateScenarioName(s.Pair.Name) || p.Rate != rate || len(p.Rounds) == 0 {
			continue
		}
		// Judged as the report will judge it (a copy: run's statuses are
		// filled when it is written).
		c := p
		c.Status = maps.Clone(p.Status)
		judged := driver.Run{Points: []driver.Point{c}}
		judged.Validate()
		for _, side := range p.Sides {
			if !judged.Points[0].SideStatus(side).OK() {
				return driver.Point{}, false
			}
		}
		return p, true
	}
	return driver.Point{}, false
}

// rateAttack is one side's attack at a constant rate: the service, the
// rate and how long, how long its backlog may settle after, and the
// process groups whose CPU it samples (nil: none).
type rateAttack struct {
	// svc is the side's service.
	svc string
	// rate is the requests per second, for dur.
	rate float64
	dur  time.Duration
	// settle bounds the wait for the backlog to drain after the attack.
	settle time.Duration
	// groups are the processes whose CPU is sampled (nil: none).
	groups cost.Set
}

// side measures one side at a.rate for a.dur: reset, attack, read,
// settle, read; with a.groups it also samples their CPU around the attack
// (from its first send to its last answer, the settle excluded): each
// group's CPU-seconds ("cpu.<group>.s") and the cores it used
// ("cores.<group>": CPU-seconds per second of the attack), and the cores
// the whole machine was busy ("cores.machine": everybody's, the other
// users of the machine too).
func (s RateScenario) side(ctx context.Context, e *Env, a rateAttack) (*driver.SideResult, error) {
	svc, rate, dur, settle, groups := a.svc, a.rate, a.dur, a.settle, a.groups
	pair, load := s.Pair, s.Load
	base := e.URL(svc)
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := driver.ResetStats(ctx, base); err != nil {
		return res, err
	}
	url := base + load.Path
	var c driver.ClientResult
	costWindow(res.Metrics, groups, func() {
		c = driver.Attack(ctx, driver.AttackSpec{
			Name: fmt.Sprintf("%-12s %6g/s", svc, rate), Rate: rate, Duration: dur,
			MaxWorkers: e.MaxWorkers, Progress: e.Progress,
			Next: func(n uint64) driver.Request {
				return driver.Request{Method: http.MethodPost, URL: url, Body: load.Body(n)}
			},
		})
	})
	res.Phases = append(res.Phases, driver.Phase{Name: load.Phase, Client: c})
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	res.Metrics[driver.ClientOK] = float64(c.OK)
	atEnd, err := driver.GetStats(ctx, base)
	if err != nil {
		return res, err
	}
	res.ProgressAtEnd, _ = driver.GetRaw(ctx, base+pair.Progress)
	res.Metrics[MetricBacklogEnd] = float64(max(pair.backlog(atEnd), 0))
	res.Metrics[MetricThroughput] = math.Round(float64(counterSum(atEnd, pair.Out))/dur.Seconds()*10) / 10
	// Settle: wait for what was sent to be processed, so that the
	// server-side latencies cover every request and the next round starts
	// from an empty backlog.
	t0 := time.Now()
	final, drained, err := pair.drain(ctx, base, atEnd, settle, 200*time.Millisecond)
	if err != nil {
		return res, err
	}
	if !drained {
		final, _ = driver.GetStats(ctx, base)
	}
	res.Metrics[MetricSettle] = math.Round(time.Since(t0).Seconds()*100) / 100
	res.Metrics[MetricDrained] = b2f(drained)
	res.Stats = final
	res.Progress, _ = driver.GetRaw(ctx, base+pair.Progress)
	driver.FlattenServer(res.Metrics, final)
	return res, nil
}

// costWindow runs attack and writes into m, for each group of groups
// found, the CPU-seconds it used from the attack's first send to its last
// answer ("cpu.<group>.s") and the cores that is ("cores.<group>"), and
// the cores the whole machine was busy ("cores.machine": everybody's).
// Without groups it only runs attack.
func costWindow(m map[driver.Metric]float64, groups cost.Set, attack func()) {
	if len(groups) == 0 {
		attack()
		return
	}
	cpu0 := groups.Sample()
	busy0, _ := cost.MachineBusy()
	t0 := time.Now()
	attack()
	window := time.Since(t0).Seconds()
	used := groups.Sample().Sub(cpu0)
	for _, g := range groups {
		if v, ok := used[g.Name]; ok {
			m[MetricCPUSeconds(g.Name)] = v
			m[MetricCoresOf.Of(g.Name)] = math.Round(v/window*100) / 100
		}
	}
	if busy1, err := cost.MachineBusy(); err == nil && busy0 > 0 {
		m[MetricCoresMachine] = math.Round((busy1-busy0).Seconds()/window*100) / 100
	}
}

// warmup sends 2 s at 50/s to each side and waits for it to drain,
// recording nothing: a freshly started service (a Kafka consumer joining
// its group, pools filling) should not weigh on the first round.
func (s RateScenario) warmup(ctx context.Context, e *Env) {
	progress := e.Progress
	e.Progress = nil
	defer func() { e.Progress = progress }()
	for _, svc := range s.Pair.Sides() {
		if _, err := s.side(ctx, e, rateAttack{svc: svc, rate: 50, dur: 2 * time.Second, settle: e.settle()}); err != nil {
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

// ratePoint names a point of a rate scenario and what it runs: the kind
// (its name is <pair>.<kind>), the rate, and the environment the
// services run with (nil: the defaults).
type ratePoint struct {
	kind string
	rate float64
	env  map[string]map[string]string
}

// point measures the pair at rp.rate over o.Rounds rounds of o.Duration
// and appends the point, named <pair>.<kind>, to run.
func (s RateScenario) point(ctx context.Context, e *Env, run *driver.Run, rp ratePoint, o RateOptions) error {
	kind, rate, env := rp.kind, rp.rate, rp.env
	scenario := PairScenarioName(s.Pair.Name, kind)
	e.logf("%s %s: %g/s for %s, %d rounds", s.Pair.Name, scenario, rate, o.Duration, o.Rounds)
	p := driver.Point{Scenario: scenario, Name: driver.Label(rate), Rate: rate, DurationS: o.Duration.Seconds(), Sides: s.Pair.Sides(), Env: env}
	err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
		if why := e.startState(ctx, s.Pair, svc, e.settle()); why != "" {
			return &driver.SideResult{Precondition: why, Metrics: map[driver.Metric]float64{}}, nil
		}
		return s.side(ctx, e, rateAttack{svc: svc, rate: rate, dur: o.Duration, settle: e.settle()})
	})
	run.Points = append(run.Points, p)
	return err
}
