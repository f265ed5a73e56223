package scenario

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// OverloadOptions parameterize the overload points of a rate scenario:
// single requests offered at multiples of each side's own ceiling.
type OverloadOptions struct {
	// Multiples of the ceiling offered (2, 5).
	Multiples []float64
	// Duration is each attack's duration; Rounds the rounds per point.
	Duration time.Duration
	Rounds   int
	// StackDir is where the stack keeps its pid files (.stack), to find
	// the servers whose CPU is counted; empty: $STACK_DIR, else a /proc
	// scan.
	StackDir string
}

// OverloadCostSetting is the run setting that lists, per service, the
// process groups whose CPU the overload points counted (a map of service
// to cost.Set): the side's service, Postgres, RabbitMQ, Kafka and the
// load driver itself.
const OverloadCostSetting = "overload_cost_processes"

// DriverGroup is the name of the load driver's own process group in the
// overload points' CPU figures ("cores.driver").
const DriverGroup = "driver"

// The overload points' metrics, per side, besides a rate point's: the
// rate offered, the side's median ceiling it is a multiple of, the
// requests accepted per second (2xx answers: MetricAcceptedRate is also
// the batch throughput point's events accepted per second), and
// MetricThroughput as a percentage of the ceiling.
const (
	MetricOfferedRate  driver.Metric = "offered_rate"
	MetricCeilingRate  driver.Metric = "ceiling_rate"
	MetricAcceptedRate driver.Metric = "accepted_rate"
	MetricPctOfCeiling driver.Metric = "pct_of_ceiling"
)

// DefaultOverload is 2× and 5× the ceiling, 3 s each, three rounds: the
// points are about whether throughput holds, which a short attack shows
// (at 5× each attack leaves a backlog to drain), and the verdict takes the
// median of rounds: one 3 s round on a 2-core machine shared with the
// driver swung no-rabbitmq's 5× point between 54% and 85% of its ceiling
// from one run to the next.
var DefaultOverload = OverloadOptions{Multiples: []float64{2, 5}, Duration: 3 * time.Second, Rounds: 3}

// Estimate returns the expected duration of the overload points on a
// pair, when each settle wait is bounded by settle.
func (o OverloadOptions) Estimate(settle time.Duration) Estimate {
	e := Estimate{Typical: warmupTime, Bound: warmupTime}
	a := attacks(len(o.Multiples)*o.Rounds*2, o.Duration, settle)
	// An overload attack leaves a backlog: count a few seconds of
	// draining each.
	a.Typical += time.Duration(a.Attacks) * 3 * time.Second
	return e.Add(a)
}

// Overload offers each side single requests at o.Multiples of its own
// median ceiling found earlier in run (the scenario's ceiling search), and
// appends one point per multiple, named <pair>.overload. Each side
// records its offered rate ("offered_rate"), its ceiling
// ("ceiling_rate"), what it accepted ("accepted_rate": 2xx answers per
// second), and what it processed or delivered during the attack as a
// percentage of its ceiling ("pct_of_ceiling"); sheds (503 with
// Retry-After) are counted apart from errors, as in every point. Each
// side also records the cores each process used during the attack
// ("cores.<group>": the load driver itself, the service, Postgres,
// RabbitMQ, Kafka; see RateScenario.side), so that a reader sees when
// the driver, on the same machine, took the CPU the point measures. A
// side without a ceiling is left out, with a note.
func (s RateScenario) Overload(ctx context.Context, e *Env, run *driver.Run, o OverloadOptions) error {
	ceil := map[string]float64{}
	var sides []string
	for _, c := range run.Ceilings {
		if c.Scenario == CeilingScenarioName(s.Pair.Name, "") && c.Rate.Median > 0 {
			ceil[c.Service] = c.Rate.Median
		}
	}
	for _, svc := range s.Pair.Sides() {
		if ceil[svc] > 0 {
			sides = append(sides, svc)
		} else {
			run.Note("%s overload of %s not measured: no ceiling in this run", s.Pair.Name, svc)
		}
	}
	if len(sides) == 0 {
		return nil
	}
	run.Settings["overload_multiples"] = o.Multiples
	run.Settings["overload_duration_s"] = o.Duration.Seconds()
	run.Settings["overload_rounds"] = o.Rounds
	if err := e.Ensure(ctx, s.Pair.Services(), nil, nil); err != nil {
		return err
	}
	groups := map[string]cost.Set{}
	for _, svc := range sides {
		groups[svc] = append(pairCostSet(ctx, e, s.Pair, svc, o.StackDir), cost.Self(DriverGroup))
	}
	run.Settings[OverloadCostSetting] = groups
	s.warmup(ctx, e)
	for _, m := range o.Multiples {
		scenario := PairScenarioName(s.Pair.Name, KindOverload)
		e.logf("%s %s: %g× each side's ceiling for %s, %d rounds", s.Pair.Name, scenario, m, o.Duration, o.Rounds)
		p := driver.Point{Scenario: scenario, Name: fmt.Sprintf("%g× ceiling", m), DurationS: o.Duration.Seconds(), Sides: s.Pair.Sides()}
		err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
			c := ceil[svc]
			if c == 0 {
				return nil, fmt.Errorf("no ceiling measured")
			}
			rate := math.Round(m * c)
			res, err := s.side(ctx, e, rateAttack{svc: svc, rate: rate, dur: o.Duration, settle: e.settle(), groups: groups[svc]})
			if res != nil {
				res.Metrics[MetricOfferedRate] = rate
				res.Metrics[MetricCeilingRate] = c
				if cr := res.Phases; len(cr) > 0 {
					res.Metrics[MetricAcceptedRate] = math.Round(float64(cr[0].Client.OK)/o.Duration.Seconds()*10) / 10
				}
				res.Metrics[MetricPctOfCeiling] = math.Round(1000*res.Metrics[MetricThroughput]/c) / 10
			}
			return res, err
		})
		run.Points = append(run.Points, p)
		if err != nil {
			return err
		}
	}
	return nil
}
