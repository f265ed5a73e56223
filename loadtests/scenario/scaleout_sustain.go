package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// The fan-out points' sustainable published rate (issue 23, item 2):
// per number of subscribers N and per side (and no-rabbitmq's second
// design), the highest rate of published FanoutKind tasks at which the
// backlog of their copies stays flat and the copies' send→processed p99
// stays under SustainSLO. It is the sustainable search of the throughput
// scenario (searchSustainable, StepJudge: the same criteria, the same
// steps) on one fresh instance configured as the fan-out points' are,
// offered batches of published tasks while the flat bound, the backlog
// and the processing count copies: N per published task (MetricCopies).
//
// What bounds it: what a copy costs the side. The search's instance
// runs with WORK_MS 0 (FanoutSustainOptions.WorkMS), as the throughput
// section's search does, so that the workers' simulated work does not
// bind (8 workers × 1 ms, the fixed-rate points' setting, would cap
// either side near 6,000 copies/s: a first run of this search, 3
// December 2026, found both sides there). Each copy costs its claim, its
// completion and its record in Postgres (both sides record every copy),
// its delivery and ack in RabbitMQ on the rabbitmq side, and its share of
// the enqueue (the N rows of no-rabbitmq's one transaction, the one
// publish RabbitMQ copies N times), all on the two cores the service,
// Postgres, RabbitMQ and the driver share. When a side's cost is all per
// copy its sustainable published rate falls as 1/N; what it keeps above
// that is what it shares between the copies (no-rabbitmq's cursors
// design stores a task once for its N subscribers).

// ScaleOutFanoutSustain is the scenario of the fan-out points'
// sustainable search: one point per number of subscribers, one search
// per side (no-rabbitmq's cursors design as a point of its own).
const ScaleOutFanoutSustain = "scaleout.fanout_sustainable"

// FanoutSustainSetting is the run setting that holds the fan-out
// search's options and criteria: a SustainSettings whose one ladder,
// "copies", is in copies per second.
const FanoutSustainSetting = "fanout_sustainable"

// FanoutSustainWorkSetting is the run setting that holds the search's
// WORK_MS (FanoutSustainOptions.WorkMS).
const FanoutSustainWorkSetting = "fanout_sustainable_work_ms"

// FanoutSustainOptions parameterize the fan-out points' sustainable
// search. Each point's search climbs Copies divided by its number of
// subscribers N (published tasks/s: N copies each), offering batches of
// Batch tasks for Step, its first Warmup left out of the backlog's
// trend, /stats read every Sample; Drain bounds each wait for a backlog
// to drain. A side's search at N after its first starts from the
// previous N's bracket, in copies per second (searchSustainable with a
// seed: it checks both ends and searches again only if they moved).
//
// The steps are shorter than the throughput scenario's (SustainDefaults:
// 30 s, a 25 s window), so that the twelve searches (N = 1, 2, 4, 8 on
// three sides) fit in minutes. The criterion is the same and still
// sound over a shorter window: the flat bound is FlatArrivals seconds of
// arrivals whatever the window, so it still absorbs the noise of an
// instantaneous read of the counters (the copies in flight, about the
// copy rate × a p50 of tens of milliseconds), and what it lets through
// is a side falling behind by at most FlatArrivals over the window (3%
// over 8 s instead of 1% over 25 s): finer than the ladder, whose
// bracket after one bisection spans 1.5×, so a rate printed is at most
// a few percent above one a longer window would pass, and a backlog
// growing faster still fails. The p99 bound is unchanged and covers
// every copy processed in the step.
//
// WorkMS is the instance's WORK_MS during the search (0: no simulated
// work, as in the throughput section's search).
type FanoutSustainOptions struct {
	Step, Warmup, Sample, Drain time.Duration
	Batch, WorkMS               int
	Copies                      SustainLadder
}

// FanoutSustainDefaults are ScaleOutDefaults' fan-out search: 10 s
// steps (2 s warm-up, an 8 s window), batches of 100, WORK_MS 0, copies
// from 2,000/s ×2 up to 32,000/s with two bisections (a bracket of about
// 1.2×): 2,000 published tasks/s at one subscriber, 250 at eight. The
// ladder's top is above what either side sustained without fan-out on
// this machine (RESULTS.md's throughput section), so a side passing it
// would say the search, not the side, stopped.
var FanoutSustainDefaults = FanoutSustainOptions{
	Step: 10 * time.Second, Warmup: 2 * time.Second, Sample: 500 * time.Millisecond, Drain: 20 * time.Second,
	Batch: 100, Copies: SustainLadder{Start: 2000, Factor: 2, Max: 32000, Bisect: 2},
}

// Validate says what is wrong with o.
func (o FanoutSustainOptions) Validate() error {
	var errs []error
	if o.Step <= 0 || o.Warmup < 0 || o.Warmup >= o.Step || o.Sample <= 0 || o.Drain <= 0 {
		errs = append(errs, fmt.Errorf("fan-out sustainable: step %s must be longer than its warm-up %s, sampled every %s > 0, drained within %s > 0", o.Step, o.Warmup, o.Sample, o.Drain))
	}
	if o.WorkMS < 0 {
		errs = append(errs, fmt.Errorf("fan-out sustainable: WORK_MS %d must not be negative", o.WorkMS))
	}
	if o.Batch < 1 || o.Batch > 1000 {
		errs = append(errs, fmt.Errorf("fan-out sustainable: batch size %d (1 to 1000)", o.Batch))
	}
	if l := o.Copies; l.Start <= 0 || l.Factor <= 1 || l.Max < l.Start || l.Bisect < 0 {
		errs = append(errs, fmt.Errorf("fan-out sustainable: the copies ladder %+v cannot climb", l))
	}
	return errors.Join(errs...)
}

// options are o as the throughput scenario's search takes them: one
// batch size, one round, no overload point, the copies ladder.
func (o FanoutSustainOptions) options() SustainOptions {
	return SustainOptions{Sizes: []int{o.Batch}, Step: o.Step, Warmup: o.Warmup, Sample: o.Sample, Rounds: 1, Drain: o.Drain,
		Ladders: map[string]SustainLadder{"copies": o.Copies}}
}

// Settings returns o and the search's criteria as a run records them
// (FanoutSustainSetting): its one ladder is "copies".
func (o FanoutSustainOptions) Settings() SustainSettings { return o.options().Settings() }

// ladder is the published tasks/s ladder of n subscribers: Copies over n.
func (o FanoutSustainOptions) ladder(n int) SustainLadder {
	l := o.Copies
	return SustainLadder{Start: roundRate(l.Start / float64(n)), Factor: l.Factor, Max: l.Max / float64(n), Bisect: l.Bisect}
}

// estimate is the search on sides sides at each of subs: typically,
// each side's first search passes its first rate, fails the next and
// bisects once (failing), each later one checks the previous bracket's
// two ends (a pass and a failure); a failing step ends earlyFailAfter
// into its window and drains in a third of a step; each search starts
// an instance and warms it for 1 s. Bound: every search climbs its whole
// ladder, every step runs to its end and every drain to its bound.
func (o FanoutSustainOptions) estimate(sides int, subs []int) Estimate {
	if len(subs) == 0 {
		return Estimate{}
	}
	pass := o.Step + attackOverhead
	fail := o.Warmup + earlyFailAfter + 2*attackOverhead + min(o.Drain, o.Step/3)
	start := instanceStart + time.Second + 2*attackOverhead
	full := o.Step + attackOverhead + o.Drain
	l := o.Copies
	rungs := 1
	if l.Factor > 1 && l.Max > l.Start && l.Start > 0 {
		for r := l.Start * l.Factor; r <= l.Max; r *= l.Factor {
			rungs++
		}
	}
	first := start + time.Duration(1+l.Bisect/2)*pass + time.Duration(1+l.Bisect-l.Bisect/2)*fail
	later := time.Duration(len(subs)-1) * (start + pass + fail)
	k := time.Duration(sides)
	return Estimate{
		Attacks: sides * (2 + l.Bisect + 2*(len(subs)-1)),
		Typical: k * (first + later),
		Bound:   k * time.Duration(len(subs)) * (start + time.Duration(rungs+l.Bisect)*full),
	}
}

// fanoutThroughput is the queue's throughput scenario with FanoutKind
// items: the batches the fan-out search posts.
var fanoutThroughput = func() ThroughputScenario {
	s := QueueThroughput
	s.Item = fanoutBody
	s.Overload = false
	return s
}()

// SubscribersName names a point of n subscribers: "1 subscriber", "8
// subscribers".
func SubscribersName(n int) string {
	if n == 1 {
		return "1 subscriber"
	}
	return strconv.Itoa(n) + " subscribers"
}

// fanoutSustain measures at.svc's side of the search point at.p, n
// subscribers: one fresh instance as the fan-out points' (FANOUT, but
// WORK_MS the search's, at.extra: a second design's setting) with the throughput
// scenario's SustainEnv, searched from the bracket the side's (and
// design's) last search found, which it then replaces.
func (pts *scaleOutPoints) fanoutSustain(ctx context.Context, e *Env, at scaleOutSide, n int, o ScaleOutOptions) {
	svc, extra := at.svc, at.extra
	fo := *o.FanoutSustain
	key := svc + fmt.Sprint(extra)
	e.logf("scaleout: %s fan-out to %d subscribers, sustainable published rate %v", svc, n, extra)
	env := map[string]string{"FANOUT": FanoutSetting(n), "WORK_MS": strconv.Itoa(fo.WorkMS)}
	maps.Copy(env, fanoutThroughput.SustainEnv)
	maps.Copy(env, extra)
	measureOne(ctx, pts, at,
		func() (*fleet, error) { return startFleet(ctx, e, fleetSpec{svc: svc, n: 1, extra: env}, o) },
		func(f *fleet) (*driver.SideResult, error) {
			res, b, err := fanoutSearch(ctx, e, fanoutInstance{svc: svc, base: f.urls[0], n: n}, fo, pts.copySeeds[key])
			if b.lo > 0 {
				pts.copySeeds[key] = bracket{lo: b.lo * float64(n), hi: b.hi * float64(n), capped: b.capped}
			}
			return res, err
		})
}

// fanoutInstance is the instance a fan-out search drives: svc's at
// base, whose FANOUT gives FanoutKind n subscribers.
type fanoutInstance struct {
	svc, base string
	n         int
}

// fanoutSearch runs the sustainable search on the instance fi: the
// published rates of o's ladder over fi.n, from seed (a bracket in
// copies per second; none: a climb), each step's backlog, processing and
// flat bound in copies. The result holds the search's figures
// (MetricSustainable in published tasks/s) and the subscribers; the
// bracket it returns is in published tasks/s.
func fanoutSearch(ctx context.Context, e *Env, fi fanoutInstance, o FanoutSustainOptions, seed bracket) (*driver.SideResult, bracket, error) {
	svc, base, n := fi.svc, fi.base, fi.n
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{MetricFanoutSubscribers: float64(n)}}
	if seed.lo > 0 {
		seed = bracket{lo: roundRate(seed.lo / float64(n)), hi: roundRate(seed.hi / float64(n)), capped: seed.capped}
	}
	s := fanoutThroughput
	side := sideLoad{e: e, svc: svc, size: o.Batch, body: s.Body(o.Batch), o: o.options(), st: &sideState{base: base, copies: n}}
	b, err := s.searchAt(ctx, side, o.ladder(n), seed, res)
	return res, b, err
}
