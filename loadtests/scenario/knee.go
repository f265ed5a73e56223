package scenario

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// CeilingOptions parameterize a ceiling search: each side's ceiling, the
// highest offered rate it takes with every absolute check of a step
// passing, found on a ladder of rates and refined by bisection. Both
// sides are judged by the same absolute bounds: no rule relative to a
// side's own floor, which would give the side with the lower floor the
// tighter bound.
type CeilingOptions struct {
	// Start is the first rate tried. The ladder is Start × Factor^i, to
	// two significant digits, up to Max: the first search of a side
	// climbs it until a step fails (past Max: the ceiling was not
	// reached), then bisects (geometrically) Bisect times between the
	// last pass and the first failure. A side's later searches start on
	// the ladder at or below the rate a majority of its searches before
	// passed, so that their steps are spent around the ceiling.
	Start, Factor, Max float64
	// Bisect is how many bisection steps refine the ceiling between the
	// last pass and the first failure.
	Bisect int
	// Warmup is how long each step first offers its own rate, measured
	// by nothing, so that the measured Step starts in the steady state
	// of that rate (pools, batches and caches sized for it) rather than
	// cold from the step before.
	Warmup time.Duration
	// Step is each step's measured duration.
	Step time.Duration
	// Rounds is how many searches per side (alternating sides, order
	// rotated); the published ceiling is the rate a majority of them
	// passed (driver.PassedInMost), with their range.
	Rounds int
	// P99 is the server-side latency p99 a step must stay under: the
	// pair's SLO, the same for both sides.
	P99 time.Duration
	// MaxInFlight is the MAX_IN_FLIGHT the services are restarted with
	// for the search: 0 lifts the bound, so that what fails first is the
	// system (its latency, its backlog), not the service's admission
	// limit shedding 503s. LeaveInFlight keeps the services' own bound.
	MaxInFlight int
}

// CeilingSLOs are the p99 bounds the report reads every ceiling search
// at: from the same steps, the highest rate each search passed with its
// p99 under each (the latency-vs-rate curve, three points of it). The
// search itself bisects at CeilingOptions.P99, the largest of them.
var CeilingSLOs = []time.Duration{25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}

// The ceiling searches' declared durations: each step is measured for
// CeilingStep after CeilingWarmup at its own rate, refined by
// CeilingBisect bisections, CeilingRounds searches per side.
const (
	CeilingWarmup = 5 * time.Second
	CeilingStep   = 15 * time.Second
	CeilingBisect = 2
	CeilingRounds = 3
	// CeilingP99 is the pairs' SLO for a single request's server-side
	// latency (processing, delivery, a search's answer): the largest of
	// CeilingSLOs.
	CeilingP99 = 100 * time.Millisecond
)

// maxInFlight is the largest MAX_IN_FLIGHT the services accept
// (httpapi.MaxMaxInFlight).
const maxInFlight = 100000

// LeaveInFlight is the CeilingOptions.MaxInFlight that leaves the
// services' own in-flight bound (httpapi's DefaultMaxInFlight unless
// their environment says otherwise).
const LeaveInFlight = -1

// The criteria of a ceiling step, as CeilingStep.Failed records them.
const (
	// CritErrors: at least ErrorShare of the requests sent failed
	// (transport errors and non-2xx answers other than sheds).
	CritErrors = "errors"
	// CritShed: at least ShedShare of the requests sent were shed (503
	// with Retry-After: the service's admission limit refused them).
	CritShed = "shed"
	// CritSent: the driver sent less than SentShare of the rate.
	CritSent = "sent"
	// CritLatency: the service recorded no latency to judge.
	CritLatency = "latency"
	// CritBacklog: the backlog at the end of the step grew past its
	// bound.
	CritBacklog = "backlog"
	// CritP99: the latency's p99, or the acknowledgement's, reached
	// P99MS.
	CritP99 = "p99"
	// CritKnee: the latency's p99 passed KneeFactor × the side's
	// low-rate p99: a relative rule of files written before 5 December
	// 2026 (driver.CeilingSpec.KneeFactor), never judged now.
	CritKnee = "knee"
)

// Criteria are the Crit* keys in the order a step is judged by.
var Criteria = []string{CritErrors, CritShed, CritSent, CritLatency, CritBacklog, CritP99}

// MetricWarmupBacklog is a ceiling step's backlog left by its warm-up at
// the step's rate, carried into its MetricBacklogEnd.
const MetricWarmupBacklog driver.Metric = "warmup_backlog"

// The bounds of a ceiling step besides the options' latency bounds and
// the share of the rate it must send, SendShare (the same for every
// step of every search): each is written here once, CriteriaText words
// them.
const (
	stepShedShare  = 0.01
	stepBacklogS   = 0.2
	stepBacklogMin = 100
)

// FlatBacklog is the most backlog a step at rate may end with and still
// count as flat: max(stepBacklogMin, stepBacklogS seconds of arrivals).
func FlatBacklog(rate float64) float64 { return math.Max(stepBacklogMin, stepBacklogS*rate) }

// spec is the criteria of o for latency, with the in-flight bound the
// services run with (nil: their own).
func (o CeilingOptions) spec(latency, ack string, inFlight *int) driver.CeilingSpec {
	return driver.CeilingSpec{Latency: latency, AckLatency: ack, StepS: o.Step.Seconds(), WarmupS: o.Warmup.Seconds(), ErrorShare: driver.FailShare, ShedShare: stepShedShare,
		SentShare: SendShare, BacklogS: stepBacklogS, BacklogMin: stepBacklogMin,
		P99MS: float64(o.P99) / float64(time.Millisecond), MaxInFlight: inFlight}
}

// share formats a share as a percentage ("1%", "95%").
func share(v float64) string { return strconv.FormatFloat(100*v, 'g', 4, 64) + "%" }

// ownBoundNotes says of each ceiling searched with the service's own
// in-flight bound although the run asked for MAX_IN_FLIGHT (its Spec has
// none: ceilingServices found it running outside the driver) why. The
// options asked for are the search's own setting (named by its scenario:
// a run of several searches records each), else the run's "ceiling".
func ownBoundNotes(run *driver.Run) []string {
	var out []string
	for _, c := range run.Ceilings {
		key := "ceiling"
		if _, own := run.Settings[string(c.Scenario)]; own {
			key = string(c.Scenario)
		}
		var o struct{ MaxInFlight *int }
		if run.Setting(key, &o) != nil || o.MaxInFlight == nil || *o.MaxInFlight < 0 {
			continue
		}
		if c.Spec != nil && c.Spec.MaxInFlight == nil {
			out = append(out, fmt.Sprintf("%s ceiling: %s runs outside the driver, so its search ran with its own in-flight bound, not MAX_IN_FLIGHT=%d",
				strings.TrimSuffix(string(c.Scenario), ".ceiling"), c.Service, *o.MaxInFlight))
		}
	}
	return out
}

// CriteriaText words spec's criteria, the latency bound last ("...,
// server processing p99 < 100ms").
func CriteriaText(s driver.CeilingSpec) string {
	step := time.Duration(s.StepS*float64(time.Second)).String() + " step"
	if s.WarmupS > 0 {
		step += " (after " + time.Duration(s.WarmupS*float64(time.Second)).String() + " at the same rate)"
	}
	t := fmt.Sprintf("errors < %s and shed < %s of the requests sent, sent >= %s of the rate, backlog at the end of each %s <= max(%g, %g s of arrivals) (flat)",
		share(s.ErrorShare), share(s.ShedShare), share(s.SentShare), step, s.BacklogMin, s.BacklogS)
	if s.KneeFactor > 0 {
		t += fmt.Sprintf(", server %s p99 <= %g× the side's own p99 at a low rate", s.Latency, s.KneeFactor)
	}
	return t + fmt.Sprintf(", server %s p99 < %s", JudgedLatencies(s), time.Duration(s.P99MS*float64(time.Millisecond)))
}

// JudgedLatencies words the latencies spec bounds: "delivery", or
// "delivery and write" when it bounds the acknowledgement too.
func JudgedLatencies(s driver.CeilingSpec) string { return strings.Join(judged(s), " and ") }

// judged is the latencies spec bounds by P99MS: Latency, then AckLatency
// when it names another.
func judged(s driver.CeilingSpec) []string {
	if s.AckLatency == "" || s.AckLatency == s.Latency {
		return []string{s.Latency}
	}
	return []string{s.Latency, s.AckLatency}
}

// Judge returns every criterion of spec that a step at rate, with
// metrics m, failed (in Criteria's order; none: it passed) and the
// first failure's reason in words, or what it passed with.
func Judge(spec driver.CeilingSpec, m map[driver.Metric]float64, rate float64) (failed []string, why string) {
	add := func(c, format string, args ...any) {
		if len(failed) == 0 {
			why = fmt.Sprintf(format, args...)
		}
		failed = append(failed, c)
	}
	sent := m[driver.ClientSentRate]
	n := sent * spec.StepS
	if e := m[driver.ClientErrors]; sent > 0 && e > 0 && e >= spec.ErrorShare*n {
		add(CritErrors, "errors %.0f", e)
	}
	if sh := m[driver.ClientShed]; sent > 0 && sh > 0 && sh >= spec.ShedShare*n {
		add(CritShed, "shed %.0f (503 + Retry-After)", sh)
	}
	switch {
	case sent <= 0:
		add(CritSent, "nothing sent")
	case sent < spec.SentShare*rate:
		add(CritSent, "driver sent only %.0f/s", sent)
	}
	// every judged latency read once: each missing one and each over the
	// bound named, each criterion recorded once, in Criteria's order
	var missing, slow, seen []string
	for _, l := range judged(spec) {
		p99, ok := m[driver.ServerLatency(l, driver.SuffixP99)]
		text := fmt.Sprintf("%s p99 %.1f ms", l, p99)
		switch {
		case !ok:
			missing = append(missing, l)
		case p99 >= spec.P99MS:
			slow = append(slow, text)
		}
		seen = append(seen, text)
	}
	if len(missing) > 0 {
		add(CritLatency, "no %s latency recorded", strings.Join(missing, " or "))
	}
	if b := m[MetricBacklogEnd]; b > math.Max(spec.BacklogMin, spec.BacklogS*rate) {
		add(CritBacklog, "backlog %.0f at the end", b)
	}
	if len(slow) > 0 {
		add(CritP99, "%s", strings.Join(slow, ", "))
	}
	if len(failed) == 0 {
		why = fmt.Sprintf("%s, backlog %.0f", strings.Join(seen, ", "), m[MetricBacklogEnd])
	}
	return failed, why
}

// ladder returns the rates a search climbs: Start × Factor^i to two
// significant digits, up to Max.
func (o CeilingOptions) ladder() []float64 {
	if o.Start <= 0 || o.Factor <= 1 {
		return []float64{o.Start}
	}
	var out []float64
	for i := 0; i < 200; i++ {
		r := roundRate(o.Start * math.Pow(o.Factor, float64(i)))
		if r > o.Max*(1+1e-9) {
			break
		}
		if len(out) == 0 || r > out[len(out)-1] {
			out = append(out, r)
		}
	}
	return out
}

// warmStart is where a side's search after its first starts: the highest
// ladder rate at or below the rate a majority of its valid searches
// before passed; when they all passed nothing, the lowest rate they
// tried (a floor below the ladder, which climbAndBisect tries alone
// instead of descending again: a side that fails every step, FerretDB's
// seconds-long searches, costs one step per later search); o.Start when
// no valid search ran before.
func warmStart(o CeilingOptions, before []driver.CeilingRound) float64 {
	var rates []float64
	floor, valid := 0.0, false
	for _, r := range before {
		if r.Invalid != "" {
			continue
		}
		valid = true
		if r.Rate > 0 {
			rates = append(rates, r.Rate)
		}
		for _, st := range r.Steps {
			if st.Invalid == "" && (floor == 0 || st.Rate < floor) {
				floor = st.Rate
			}
		}
	}
	lad := o.ladder()
	if valid && len(rates) == 0 && floor > 0 {
		return floor
	}
	if len(rates) == 0 || len(lad) == 0 {
		return o.Start
	}
	m := driver.PassedInMost(rates)
	start := lad[0]
	for _, r := range lad {
		if r <= m {
			start = r
		}
	}
	return start
}

// ceilingDescents is how many times a search halves its rate when its
// first step fails.
const ceilingDescents = 4

// search finds the highest passing rate from start: up the ladder until a
// step fails (past its top: Capped), then o.Bisect geometric bisections.
// If the first step fails, it halves the rate up to ceilingDescents
// times. A step whose precondition did not hold (CeilingStep.Invalid)
// ends the search without a verdict (CeilingRound.Invalid).
func search(ctx context.Context, svc string, o CeilingOptions, start float64, step func(context.Context, string, float64) (driver.CeilingStep, error)) (driver.CeilingRound, error) {
	var cr driver.CeilingRound
	try := func(rate float64) (bool, error) {
		st, err := step(ctx, svc, rate)
		cr.Steps = append(cr.Steps, st)
		if st.Invalid != "" {
			cr.Invalid = fmt.Sprintf("%s at %s/s", st.Invalid, strconv.FormatFloat(rate, 'g', -1, 64))
			return false, errInvalidStep
		}
		if st.Pass && rate > cr.Rate {
			cr.Rate = rate
		}
		return st.Pass, err
	}
	capped, err := climbAndBisect(o, start, try)
	cr.Capped = capped
	if errors.Is(err, errInvalidStep) {
		err = nil
	}
	return cr, err
}

// errInvalidStep ends a search whose step could not start from a proven
// state.
var errInvalidStep = errors.New("step precondition failed")

// climbAndBisect is search's walk: it calls try on the ladder from start
// up to the first failure (or halves from start while it fails), then
// bisects o.Bisect times; it reports whether the ladder's top passed. A
// start below the ladder is a floor (warmStart): it is tried alone, and
// only when it passes is the search refined above it (floorWalk).
func climbAndBisect(o CeilingOptions, start float64, try func(float64) (bool, error)) (capped bool, err error) {
	lad := o.ladder()
	if len(lad) > 0 && start > 0 && start < lad[0] {
		return false, floorWalk(o, start, try)
	}
	i := 0
	for i < len(lad)-1 && lad[i] < start {
		i++
	}
	lo, hi := 0.0, 0.0
	for ; ; i++ {
		if i >= len(lad) {
			return true, nil
		}
		ok, err := try(lad[i])
		if err != nil {
			return false, err
		}
		if !ok {
			hi = lad[i]
			break
		}
		lo = lad[i]
	}
	if lo == 0 {
		for range ceilingDescents {
			r := roundRate(hi / 2)
			ok, err := try(r)
			if err != nil {
				return false, err
			}
			if ok {
				lo = r
				break
			}
			hi = r
		}
		if lo == 0 {
			return false, nil
		}
	}
	return false, bisect(o, lo, hi, try)
}

// floorWalk tries the floor start once: failing, the search ends there
// (an earlier search descended from above it already); passing, it
// bisects between the floor and twice it, the rate the earlier search
// failed at before halving to the floor.
func floorWalk(o CeilingOptions, start float64, try func(float64) (bool, error)) error {
	ok, err := try(start)
	if err != nil || !ok {
		return err
	}
	return bisect(o, start, roundRate(2*start), try)
}

// bisect refines a pass at lo and a failure at hi with o.Bisect
// geometric bisections.
func bisect(o CeilingOptions, lo, hi float64, try func(float64) (bool, error)) error {
	for range o.Bisect {
		mid := roundRate(math.Sqrt(lo * hi))
		if mid <= lo || mid >= hi {
			break
		}
		ok, err := try(mid)
		if err != nil {
			return err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return nil
}

// roundRate rounds to two significant digits, as the decimal written
// (9.2, not 9.200000000000001: a rate below 10 is a FerretDB side's).
func roundRate(r float64) float64 {
	if r <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(r))-1)
	v, _ := strconv.ParseFloat(strconv.FormatFloat(math.Round(r/p)*p, 'g', 2, 64), 64)
	return v
}

// ceilingScenario is one ceiling scenario of a run: its name, the sides
// it searches and each side's environment (a design's, a documents run's
// own database; nil: the defaults).
type ceilingScenario struct {
	name  driver.ScenarioName
	sides []string
	env   map[string]map[string]string
}

// ceilingSearch is how a ceiling scenario searches: its options (ladder,
// rounds), a side's criteria (spec) and one step's measurement
// (measure; see runCeiling).
type ceilingSearch struct {
	o       CeilingOptions
	spec    func(svc string) driver.CeilingSpec
	measure func(ctx context.Context, svc string, rate float64) (*driver.SideResult, error)
}

// ceilingServices restarts each side of cs.sides with o.MaxInFlight and
// its environment of cs.env for the search (ceilingInFlight), then warms
// up the sides restarted.
func (s RateScenario) ceilingServices(ctx context.Context, e *Env, run *driver.Run, o CeilingOptions, cs ceilingScenario) (map[string]*int, error) {
	var svcs []Service
	for _, svc := range s.Pair.Services() {
		if slices.Contains(cs.sides, svc.Name) {
			svcs = append(svcs, svc)
		}
	}
	out, restarted, err := e.ceilingInFlight(ctx, run, cs, svcs, o)
	if restarted {
		s.warmup(ctx, e)
	}
	return out, err
}

// ceilingInFlight restarts svcs for the search cs (its name and
// environment; cs.sides aside) with o.MaxInFlight beside each one's
// variables of cs.env (a design's, a documents run's own database), on
// fresh broker resources where a design names its own (freshResources),
// records that environment in run's settings (ceilingEnvSetting;
// whatever runs next ensures its own), and returns the bound each runs
// with: nil where the driver left the service's own, because o says so
// or because it runs outside the driver (ownBoundNotes). It reports
// whether it restarted any.
func (e *Env) ceilingInFlight(ctx context.Context, run *driver.Run, cs ceilingScenario, svcs []Service, o CeilingOptions) (map[string]*int, bool, error) {
	scenario, env := cs.name, cs.env
	out := map[string]*int{}
	envs := map[string]map[string]string{}
	for _, svc := range svcs {
		want := maps.Clone(env[svc.Name])
		if want == nil {
			want = map[string]string{}
		}
		if o.MaxInFlight >= 0 {
			want["MAX_IN_FLIGHT"] = strconv.Itoa(o.MaxInFlight)
		}
		if len(want) == 0 {
			continue
		}
		if err := e.freshResources(ctx, svc.Name, env[svc.Name]); err != nil {
			return nil, len(envs) > 0, err
		}
		err := e.Ensure(ctx, []Service{svc}, map[string]map[string]string{svc.Name: want}, nil)
		switch {
		case errors.Is(err, ErrExternal):
			e.logf("%s: %s keeps its own environment (its in-flight bound too): %v", scenario, svc.Name, err)
			continue
		case err != nil:
			return nil, len(envs) > 0, err
		}
		if o.MaxInFlight >= 0 {
			n := o.MaxInFlight
			out[svc.Name] = &n
		}
		envs[svc.Name] = want
	}
	if len(envs) > 0 {
		run.Settings[ceilingEnvSetting(scenario)] = envs
	}
	return out, len(envs) > 0, nil
}

// ceilingEnvSetting is the run setting that records the environment the
// services ran a ceiling scenario with ("ceiling_env" for the pair's
// main search, as files before the designs named it).
func ceilingEnvSetting(scenario driver.ScenarioName) string {
	if strings.Count(string(scenario), ".") == 1 {
		return "ceiling_env"
	}
	return strings.TrimSuffix(string(scenario), ".ceiling") + "_env"
}

// CeilingScenarioName is the Ceiling.Scenario of a pair's search of
// design ("" for the main one): "queue.ceiling", "queue.broker-only.ceiling".
func CeilingScenarioName(pair, design string) driver.ScenarioName {
	if design == "" {
		return driver.ScenarioName(pair + ".ceiling")
	}
	return driver.ScenarioName(pair + "." + design + ".ceiling")
}

// ceiling runs the pair's main ceiling search on both sides, each with
// CeilingEnv, then (withDesigns) every one of CeilingDesigns on the sides
// its environment names (see runCeiling), with the services' in-flight
// bound set to o.MaxInFlight: each step proves its start (startState),
// offers its rate for o.Warmup, then measures o.Step.
func (s RateScenario) ceiling(ctx context.Context, e *Env, run *driver.Run, o CeilingOptions, withDesigns bool) error {
	designs := []Extra{{Env: s.CeilingEnv}}
	if withDesigns {
		designs = append(designs, s.CeilingDesigns...)
	}
	var first error
	for _, d := range designs {
		sides := s.Pair.Sides()
		if d.Name != "" {
			sides = slices.DeleteFunc(slices.Clone(sides), func(svc string) bool { _, ok := d.Env[svc]; return !ok })
		}
		err := s.ceilingOf(ctx, e, run, o, ceilingScenario{name: CeilingScenarioName(s.Pair.Name, d.Name), sides: sides, env: d.Env})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			run.Note("%s not measured: %v", CeilingScenarioName(s.Pair.Name, d.Name), err)
			first = cmp.Or(first, err)
		}
	}
	return first
}

// ceilingOf runs the ceiling scenario cs on its sides, each restarted
// with its environment.
func (s RateScenario) ceilingOf(ctx context.Context, e *Env, run *driver.Run, o CeilingOptions, cs ceilingScenario) error {
	scenario, env := cs.name, cs.env
	inFlight, err := s.ceilingServices(ctx, e, run, o, cs)
	if err != nil {
		return err
	}
	pair := s.Pair
	e.logf("%s %s: search from %g/s (x%g, max %g/s, %d bisections), %s steps after %s at the rate, %d rounds, MAX_IN_FLIGHT %d, env %v",
		pair.Name, scenario, o.Start, o.Factor, o.Max, o.Bisect, o.Step, o.Warmup, o.Rounds, o.MaxInFlight, env)
	spec := func(svc string) driver.CeilingSpec { return o.spec(s.CeilingLatency, s.CeilingAck, inFlight[svc]) }
	measure := func(ctx context.Context, svc string, rate float64) (*driver.SideResult, error) {
		if why := e.startState(ctx, pair, svc, 3*e.settle()/2); why != "" {
			return &driver.SideResult{Precondition: why, Metrics: map[driver.Metric]float64{}}, nil
		}
		carry, err := s.warmAt(ctx, e, svc, rate, o.Warmup)
		if err != nil {
			return nil, err
		}
		groups := pairCostSet(ctx, e, pair, svc, e.StackDir)
		res, err := s.side(ctx, e, rateAttack{svc: svc, rate: rate, dur: o.Step, settle: 3 * e.settle() / 2, groups: groups})
		if res != nil {
			res.Metrics[MetricWarmupBacklog] = float64(carry)
			res.Metrics[MetricBacklogEnd] += float64(carry)
			StepCPU(res.Metrics, groups)
		}
		return res, err
	}
	return runCeiling(ctx, e, run, cs, ceilingSearch{o: o, spec: spec, measure: measure})
}

// warmAt offers rate to svc for d, measured by nothing, and returns the
// backlog left at its end (counted since the reset before it), which the
// measured step that follows at once carries: its counters restart at 0.
func (s RateScenario) warmAt(ctx context.Context, e *Env, svc string, rate float64, d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, nil
	}
	base := e.URL(svc)
	if err := driver.ResetStats(ctx, base); err != nil {
		return 0, err
	}
	url := base + s.Load.Path
	driver.Attack(ctx, driver.AttackSpec{
		Name: fmt.Sprintf("%-12s %6g/s warm-up", svc, rate), Rate: rate, Duration: d, MaxWorkers: e.MaxWorkers,
		Next: func(n uint64) driver.Request {
			return driver.Request{Method: http.MethodPost, URL: url, Body: s.Load.Body(n)}
		},
	})
	st, err := driver.GetStats(ctx, base)
	if err != nil {
		return 0, err
	}
	return max(s.Pair.backlog(st), 0), nil
}

// runCeiling runs cw.o.Rounds searches on each side of cs, alternating
// sides with the order rotated, and appends one Ceiling per side to run
// under cs.name: every step with the criteria it failed (Judge against
// cw.spec(side)), each search's highest passing rate and the rate a
// majority of them passed. cw.measure offers one step: a result with a
// Precondition is an invalid step, which ends its search without a
// verdict.
func runCeiling(ctx context.Context, e *Env, run *driver.Run, cs ceilingScenario, cw ceilingSearch) error {
	scenario, sides, o, spec, measure := cs.name, cs.sides, cw.o, cw.spec, cw.measure
	byside := map[string]*driver.Ceiling{}
	for _, svc := range sides {
		sp := spec(svc)
		byside[svc] = &driver.Ceiling{Scenario: scenario, Service: svc, Spec: &sp}
	}
	step := func(ctx context.Context, svc string, rate float64) (driver.CeilingStep, error) {
		res, err := measure(ctx, svc, rate)
		st := driver.CeilingStep{Rate: rate}
		if res != nil {
			st.Metrics = res.Metrics
			if res.Precondition != "" {
				st.Invalid = res.Precondition
				e.logf("  %s %g/s: not measured (precondition: %s)", svc, rate, res.Precondition)
				return st, nil
			}
		}
		if err != nil {
			st.Why = err.Error()
			return st, err
		}
		st.Failed, st.Why = Judge(*byside[svc].Spec, res.Metrics, rate)
		st.Pass = len(st.Failed) == 0
		e.logf("  %s %g/s: pass=%v (%s)", svc, rate, st.Pass, st.Why)
		return st, nil
	}
	var first error
	for r := range o.Rounds {
		for _, svc := range driver.Order(sides, r) {
			start := o.Start
			if r > 0 {
				start = warmStart(o, byside[svc].Rounds)
			}
			cr, err := search(ctx, svc, o, start, step)
			cr.Index = r
			byside[svc].Rounds = append(byside[svc].Rounds, cr)
			if err != nil && first == nil {
				first = err
			}
			if ctx.Err() != nil {
				break
			}
		}
	}
	for _, svc := range sides {
		c := byside[svc]
		var rates []float64
		for _, r := range c.Rounds {
			if r.Invalid == "" {
				rates = append(rates, r.Rate)
			}
		}
		if len(rates) > 0 {
			c.Rate = driver.RateAgg(rates)
		}
		run.Ceilings = append(run.Ceilings, *c)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// StepCPU adds to a measured step's metrics m, which hold each group's
// CPU-seconds over its attack ("cpu.<group>.s", RateScenario.side), each
// group's CPU-seconds per 1,000 requests answered 2xx
// (MetricCPUPerThousand): the same unit for every pair, whatever its
// items are.
func StepCPU(m map[driver.Metric]float64, groups cost.Set) {
	ok := m[driver.ClientOK]
	if ok <= 0 {
		return
	}
	for _, g := range groups {
		if v, has := m[MetricCPUSeconds(g.Name)]; has {
			if pk := cost.PerThousand(v, int64(ok)); !math.IsNaN(pk) {
				m[MetricCPUPerThousand(g.Name)] = pk
			}
		}
	}
}

// DesignSides counts the side searches of s's ceiling designs.
func (s RateScenario) DesignSides() int {
	n := 0
	for _, d := range s.CeilingDesigns {
		n += len(d.Env)
	}
	return n
}

// freshResources deletes the broker resources a design names of its own
// (a queue, RABBITMQ_QUEUE; a topic, KAFKA_TOPIC), so that its search
// starts on none of an earlier run's messages: the driver empties the
// pair's tables, and messages whose records are gone would be work no
// step offered. The service must not use them yet.
func (e *Env) freshResources(ctx context.Context, svc string, env map[string]string) error {
	if q := env["RABBITMQ_QUEUE"]; q != "" {
		if err := deleteQueues(firstURL(e.ServiceVar(svc, "RABBITMQ_URL", rabbitMQURL())), q); err != nil {
			return fmt.Errorf("delete queue %s: %w", q, err)
		}
	}
	if t := env["KAFKA_TOPIC"]; t != "" {
		if err := deleteTopic(ctx, firstURL(e.ServiceVar(svc, "KAFKA_BROKERS", kafkaBrokers())), t); err != nil {
			return fmt.Errorf("delete topic %s: %w", t, err)
		}
	}
	return nil
}
